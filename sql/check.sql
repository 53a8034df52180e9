-- Decides one request: src/stores/memory/memory-store.ts evaluateSync step for step, in one call. Phase 1 decides
-- every op (a live lock first), phase 2 consumes all or none (check), always adds (record) or writes
-- nothing (peek); an exceeded enforced lockout rule locks its key in this same call.
--
-- Concurrency (READ COMMITTED): check and record lock each op's row FOR UPDATE in one order (rule, then
-- sha256 of the key), creating it first when missing (INSERT ... ON CONFLICT DO NOTHING, whose new row is
-- locked as well), so two requests sharing keys wait for each other and never deadlock; rows are read
-- after their lock, so no update is lost. Peek reads without locks.
--
-- mode      'check' | 'peek' | 'record'
-- now_arg   epoch ms, or NULL for the server's clock (clock_timestamp(), read once)
-- rules     per op, the rule's name; keys per op, the identity as UTF-8
-- nums      per op 13 numbers: type, size_ms, buckets, burst, cost, lim (the op type's fields), period_end,
--           next_period_end (calendar, else 0), lock_ms (0: no lockout), escalate, max_lock_ms,
--           forget_after_ms, dry_run (1 or 0)
-- Returns   float8[]: the time decided at (epoch ms), then per op 9 numbers: flags (1 allowed, 2 locked,
--           4 locked now, 8 overridden: the key's override or the rule-wide limit; plus 16 x the window size in ms
--           the key's override set, when it sets one), the limit in force, remaining, reset_ms, retry_ms, count,
--           receipt, level, locked_until (epoch ms, 0 when not locked)
CREATE OR REPLACE FUNCTION @schema@.@check@(
  mode text, now_arg bigint, rules text[], keys bytea[], nums float8[]
) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE
  n integer := coalesce(cardinality(rules), 0);
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  adds boolean := mode = 'record';
  writes boolean := mode <> 'peek';
  hashes bytea[];
  lock_order integer[];
  expires bigint;
  ops @schema@.@op@[];
  states @schema@.@state@[];
  vs @schema@.@verdict@[];
  held boolean[];
  dirty boolean[];
  overridden boolean[];
  locked boolean[];
  locked_now boolean[];
  levels integer[];
  untils bigint[];
  forgets bigint[];
  denied boolean := false;
  o @schema@.@op@;
  st @schema@.@state@;
  v @schema@.@verdict@;
  now_v @schema@.@verdict@;
  r record;
  lim bigint;
  win bigint;
  wins bigint[];
  lock_ms float8;
  level integer;
  dur bigint;
  reply float8[];
  i integer;
BEGIN
  hashes := array_fill(NULL::bytea, ARRAY[n]);
  held := array_fill(false, ARRAY[n]);
  dirty := array_fill(false, ARRAY[n]);
  overridden := array_fill(false, ARRAY[n]);
  locked := array_fill(false, ARRAY[n]);
  locked_now := array_fill(false, ARRAY[n]);
  levels := array_fill(0, ARRAY[n]);
  untils := array_fill(0::bigint, ARRAY[n]);
  forgets := array_fill(0::bigint, ARRAY[n]);
  wins := array_fill(0::bigint, ARRAY[n]);
  FOR i IN 1..n LOOP
    hashes[i] := sha256(keys[i]);
    o := @schema@.@op_at@(nums, i);
    -- An override in force decides the limit: the key's, else the rule-wide one (key_hash empty); and the
    -- window, when the key's override sets one (its row's key_hash is the key's and a 1 byte, lim its size).
    SELECT (array_agg(x.lim ORDER BY x.key_hash = '\x'::bytea) FILTER (WHERE octet_length(x.key_hash) <> 33))[1],
        max(x.lim) FILTER (WHERE octet_length(x.key_hash) = 33)
      INTO lim, win FROM @schema@.@overrides@ x
      WHERE x.rule = rules[i] AND x.key_hash IN (hashes[i], '\x'::bytea, hashes[i] || '\x01'::bytea)
        AND (x.until_ms IS NULL OR x.until_ms > now_ms);
    IF lim IS NOT NULL THEN o.lim := lim; overridden[i] := true; END IF;
    IF win IS NOT NULL THEN o.size_ms := win; overridden[i] := true; wins[i] := win; END IF;
    ops[i] := o;
  END LOOP;

  -- The rows, in one order, each locked (check, record) or read (peek); expired parts read as absent.
  -- One op needs no order (and no query for it).
  IF n = 1 THEN
    lock_order := ARRAY[1];
  ELSE
    lock_order := ARRAY(SELECT u.ord::integer FROM unnest(rules, hashes) WITH ORDINALITY AS u(rule, key_hash, ord)
      ORDER BY u.rule COLLATE "C", u.key_hash);
  END IF;
  FOREACH i IN ARRAY lock_order LOOP
    LOOP
      IF writes THEN
        SELECT k.amount, k.time_ms, k.pairs, k.expires_ms, k.lock_until, k.lock_level, k.forget_ms INTO r
          FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = hashes[i] FOR UPDATE;
      ELSE
        SELECT k.amount, k.time_ms, k.pairs, k.expires_ms, k.lock_until, k.lock_level, k.forget_ms INTO r
          FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = hashes[i];
      END IF;
      IF FOUND THEN
        held[i] := writes;
        IF r.expires_ms > now_ms THEN states[i] := ROW(r.amount, r.time_ms, r.pairs)::@schema@.@state@;
        ELSIF r.expires_ms IS NOT NULL THEN dirty[i] := true;
        END IF;
        IF r.forget_ms > now_ms THEN
          levels[i] := r.lock_level; untils[i] := r.lock_until; forgets[i] := r.forget_ms;
        ELSIF r.forget_ms IS NOT NULL THEN dirty[i] := true;
        END IF;
        -- A row holding nothing (one check-batch.sql made for an op over its limit) is deleted unless filled.
        IF r.expires_ms IS NULL AND r.forget_ms IS NULL THEN dirty[i] := true; END IF;
        EXIT;
      END IF;
      EXIT WHEN NOT writes;
      -- A new row, locked by this transaction until it ends; another transaction's insert makes this one
      -- wait for it, then find its row.
      INSERT INTO @schema@.@keys@ (rule, key_hash, key) VALUES (rules[i], hashes[i], keys[i])
        ON CONFLICT DO NOTHING;
      IF FOUND THEN held[i] := true; dirty[i] := true; EXIT; END IF;
    END LOOP;
  END LOOP;

  -- Phase 1: decide every op, writing nothing.
  FOR i IN 1..n LOOP
    IF now_ms < untils[i] THEN
      locked[i] := true;
      v := ROW(false, 0, untils[i] - now_ms, untils[i] - now_ms, 0, 0)::@schema@.@verdict@;
    ELSE
      v := @schema@.@evaluate@(states[i], ops[i], now_ms, adds);
    END IF;
    IF NOT v.allowed AND nums[13 * i] = 0 THEN denied := true; END IF;
    vs[i] := v;
  END LOOP;

  -- Phase 2: all consume, or none does; exceeded enforced lockout rules lock.
  FOR i IN 1..n LOOP
    o := ops[i];
    v := vs[i];
    IF NOT locked[i] THEN
      IF NOT writes THEN
        NULL; -- peek: the answers of phase 1, as they are
      ELSIF (adds OR (NOT denied AND v.allowed)) AND o.cost > 0 THEN
        states[i] := @schema@.@apply@(states[i], o, now_ms);
        dirty[i] := true;
      ELSIF v.allowed THEN
        -- Admitted by its own rule but not consumed (another rule denied): the state as it is.
        o.cost := 0;
        now_v := @schema@.@evaluate@(states[i], o, now_ms, false);
        v.remaining := now_v.remaining; v.reset_ms := now_v.reset_ms; v.count := now_v.count; v.receipt := 0;
      ELSE
        v.receipt := 0;
      END IF;
      lock_ms := nums[13 * i - 4];
      IF lock_ms > 0 AND nums[13 * i] = 0 AND NOT v.allowed THEN
        level := levels[i] + 1;
        dur := @schema@.@lock_duration_ms@(lock_ms, nums[13 * i - 3], nums[13 * i - 2], level);
        v := ROW(false, 0, dur, dur, 0, 0)::@schema@.@verdict@;
        locked[i] := true;
        locked_now[i] := writes;
        levels[i] := level;
        untils[i] := now_ms + dur;
        IF writes THEN
          -- The lock forgets the count.
          states[i] := NULL;
          forgets[i] := now_ms + dur + nums[13 * i - 1]::bigint;
          dirty[i] := true;
        END IF;
      END IF;
      vs[i] := v;
    END IF;
  END LOOP;

  -- Write back what changed; a row left with neither a state nor a lock is deleted.
  IF writes THEN
    FOR i IN 1..n LOOP
      CONTINUE WHEN NOT held[i] OR NOT dirty[i];
      st := states[i];
      IF st IS NULL AND forgets[i] = 0 THEN
        DELETE FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = hashes[i];
      ELSE
        expires := CASE WHEN st IS NULL THEN NULL ELSE @schema@.@expires_at@(st, ops[i]) END;
        UPDATE @schema@.@keys@ k SET amount = st.amount, time_ms = st.time_ms, pairs = st.pairs, expires_ms = expires,
          lock_until = nullif(untils[i], 0), lock_level = nullif(levels[i], 0),
          forget_ms = nullif(forgets[i], 0)
          WHERE k.rule = rules[i] AND k.key_hash = hashes[i];
      END IF;
    END LOOP;
  END IF;

  reply := ARRAY[now_ms::float8];
  FOR i IN 1..n LOOP
    v := vs[i];
    reply := reply || ARRAY[
      (CASE WHEN v.allowed THEN 1 ELSE 0 END + CASE WHEN locked[i] THEN 2 ELSE 0 END
        + CASE WHEN locked_now[i] THEN 4 ELSE 0 END + CASE WHEN overridden[i] THEN 8 ELSE 0 END
        + 16 * wins[i])::float8,
      ops[i].lim, v.remaining, v.reset_ms, v.retry_ms, v.count, v.receipt, levels[i],
      CASE WHEN locked[i] THEN untils[i] ELSE 0 END
    ]::float8[];
  END LOOP;
  RETURN reply;
END $$;
