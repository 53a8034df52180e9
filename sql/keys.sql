-- Operator calls on one rule's keys (src/stores/postgres/postgres-store.ts): clear, reset, override (and the
-- rule-wide limit), rule_limits, locked, and the
-- bounded sweep of expired rows. now_arg: epoch ms, or NULL for the server's clock. Resets and overrides are
-- announced on the store's channel (NOTIFY, sent when the transaction commits) with the payload the caller
-- made, so every process's deny cache forgets the key.

-- The count state of a key is cleared (resetOnSuccess); its lock and level stay.
CREATE OR REPLACE FUNCTION @schema@.@clear@(now_arg bigint, rule_name text, key_bytes bytea)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
  DELETE FROM @schema@.@keys@ k WHERE k.rule = rule_name AND k.key_hash = sha256(key_bytes)
    AND NOT coalesce(k.forget_ms > now_ms, false);
  IF NOT FOUND THEN
    UPDATE @schema@.@keys@ k SET amount = NULL, time_ms = NULL, pairs = NULL, expires_ms = NULL
      WHERE k.rule = rule_name AND k.key_hash = sha256(key_bytes);
  END IF;
END $$;

-- Clears count, lock and level, and announces it. True when the key was locked. A concurrency key's
-- holders go and its last slot id stays (sql/concurrency.sql: the only state with amount and pairs and no time_ms)
-- until the state expires, so a holder released after the reset frees nothing.
CREATE OR REPLACE FUNCTION @schema@.@reset@(now_arg bigint, rule_name text, key_bytes bytea, payload text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  was_locked boolean;
BEGIN
  UPDATE @schema@.@keys@ k SET pairs = '{}', lock_until = NULL, lock_level = NULL, forget_ms = NULL
    WHERE k.rule = rule_name AND k.key_hash = sha256(key_bytes)
      AND k.amount IS NOT NULL AND k.pairs IS NOT NULL AND k.time_ms IS NULL AND k.expires_ms > now_ms;
  IF NOT FOUND THEN
    DELETE FROM @schema@.@keys@ k WHERE k.rule = rule_name AND k.key_hash = sha256(key_bytes)
      RETURNING coalesce(k.lock_until > now_ms, false) INTO was_locked;
  END IF;
  PERFORM pg_notify(@channel@, payload);
  RETURN coalesce(was_locked, false);
END $$;

-- Sets the limit of one key of one rule (new_lim NULL: clears it), for for_ms (NULL: until cleared); announced.
-- key_bytes NULL: the rule's rule-wide limit, the row whose key_hash is empty (no sha256 is). window_ms: the
-- key's window size (NULL: none), in a row of its own whose key_hash is the key's and a 1 byte (33 bytes, which
-- no sha256 is) and whose lim is the size; a key's override replaces both rows.
-- Schema 4's form, without window_ms: a call of 6 arguments would find two functions.
DROP FUNCTION IF EXISTS @schema@.@override@(bigint, text, bytea, bigint, bigint, text);
CREATE OR REPLACE FUNCTION @schema@.@override@(
  now_arg bigint, rule_name text, key_bytes bytea, new_lim bigint, for_ms bigint, payload text,
  window_ms bigint
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  h bytea := CASE WHEN key_bytes IS NULL THEN '\x'::bytea ELSE sha256(key_bytes) END;
BEGIN
  IF new_lim IS NULL THEN
    DELETE FROM @schema@.@overrides@ x WHERE x.rule = rule_name AND x.key_hash = h;
  ELSE
    INSERT INTO @schema@.@overrides@ AS x (rule, key_hash, key, lim, until_ms)
      VALUES (rule_name, h, coalesce(key_bytes, '\x'::bytea), new_lim, now_ms + for_ms)
      ON CONFLICT (rule, key_hash) DO UPDATE SET lim = EXCLUDED.lim, until_ms = EXCLUDED.until_ms;
  END IF;
  IF key_bytes IS NOT NULL THEN
    IF window_ms IS NULL THEN
      DELETE FROM @schema@.@overrides@ x WHERE x.rule = rule_name AND x.key_hash = h || '\x01'::bytea;
    ELSE
      INSERT INTO @schema@.@overrides@ AS x (rule, key_hash, key, lim, until_ms)
        VALUES (rule_name, h || '\x01'::bytea, key_bytes, window_ms, now_ms + for_ms)
        ON CONFLICT (rule, key_hash) DO UPDATE SET lim = EXCLUDED.lim, until_ms = EXCLUDED.until_ms;
    END IF;
  END IF;
  PERFORM pg_notify(@channel@, payload);
END $$;

-- The rule-wide limits in force among rule_names, with the time they were read at.
CREATE OR REPLACE FUNCTION @schema@.@rule_limits@(now_arg bigint, rule_names text[])
RETURNS TABLE (rule text, lim bigint, until_ms bigint, now_ms bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
  at_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
  RETURN QUERY SELECT x.rule::text, x.lim, x.until_ms, at_ms FROM @schema@.@overrides@ x
    WHERE x.rule = ANY(rule_names) AND x.key_hash = '\x'::bytea AND (x.until_ms IS NULL OR x.until_ms > at_ms)
    ORDER BY x.rule;
END $$;

-- The keys of a rule locked now, soonest unlock first, at most max_rows; with the time they were read at.
CREATE OR REPLACE FUNCTION @schema@.@locked@(now_arg bigint, rule_name text, max_rows integer)
RETURNS TABLE (key bytea, until_ms bigint, level integer, now_ms bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
  at_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
  RETURN QUERY SELECT k.key, k.lock_until, k.lock_level, at_ms FROM @schema@.@keys@ k
    WHERE k.rule = rule_name AND k.lock_until > at_ms ORDER BY k.lock_until, k.key_hash LIMIT max_rows;
END $$;

-- One step of the background sweep: among the next max_rows rows after (after_rule, after_kh) in key
-- order, deletes those holding nothing live (skipping rows a decision holds), and expired overrides.
-- Returns how many rows went and where the next step starts (NULL: the end was reached, start again).
CREATE OR REPLACE FUNCTION @schema@.@sweep@(
  now_arg bigint, max_rows integer, after_rule text, after_kh bytea,
  OUT deleted integer, OUT next_rule text, OUT next_kh bytea
) LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  more integer;
BEGIN
  SELECT k.rule, k.key_hash INTO next_rule, next_kh FROM @schema@.@keys@ k
    WHERE (k.rule, k.key_hash) > (after_rule COLLATE "C", after_kh) ORDER BY k.rule, k.key_hash
    OFFSET max_rows - 1 LIMIT 1;
  DELETE FROM @schema@.@keys@ k WHERE (k.rule, k.key_hash) IN (
    SELECT x.rule, x.key_hash FROM @schema@.@keys@ x
      WHERE (x.rule, x.key_hash) > (after_rule COLLATE "C", after_kh)
        AND (next_rule IS NULL OR (x.rule, x.key_hash) <= (next_rule COLLATE "C", next_kh))
        AND NOT coalesce(x.expires_ms > now_ms, false) AND NOT coalesce(x.forget_ms > now_ms, false)
      FOR UPDATE SKIP LOCKED
  );
  GET DIAGNOSTICS deleted = ROW_COUNT;
  DELETE FROM @schema@.@overrides@ x WHERE x.ctid IN (
    SELECT y.ctid FROM @schema@.@overrides@ y WHERE y.until_ms <= now_ms LIMIT max_rows FOR UPDATE SKIP LOCKED
  );
  GET DIAGNOSTICS more = ROW_COUNT;
  deleted := deleted + more;
END $$;
