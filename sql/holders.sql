-- Calls on concurrency slots (src/stores/postgres/postgres-store.ts renew and holders; lua/renew.lua and
-- src/stores/redis/holders.ts on Redis), and whether a released slot was still held (refund.sql give_back).
-- now_arg: epoch ms, or NULL for the server's clock.

-- Renews held slots: each an op (rules, keys, nums as check.sql's) and its receipt (the id of its first
-- slot), renewed until now + lease. Rows are locked in the order check.sql locks them. Returns, per slot,
-- whether every unit of it was still held; one released, lapsed or reset is not taken again.
CREATE OR REPLACE FUNCTION @schema@.@renew@(
  now_arg bigint, rules text[], keys bytea[], nums float8[], receipts float8[]
) RETURNS boolean[] LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  held boolean[] := array_fill(false, ARRAY[coalesce(cardinality(rules), 0)]);
  o @schema@.@op@;
  st @schema@.@state@;
  r record;
  h bytea;
  i integer;
BEGIN
  FOR i IN SELECT u.ord::integer FROM unnest(rules, keys) WITH ORDINALITY AS u(rule, key, ord)
      ORDER BY u.rule COLLATE "C", sha256(u.key), u.ord LOOP
    h := sha256(keys[i]);
    o := @schema@.@op_at@(nums, i);
    SELECT k.amount, k.pairs, k.expires_ms INTO r
      FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = h FOR UPDATE;
    CONTINUE WHEN NOT FOUND OR NOT coalesce(r.expires_ms > now_ms, false) OR r.pairs IS NULL;
    SELECT x.held, x.after INTO r
      FROM @schema@.@concurrency_renew@(ROW(r.amount, NULL, r.pairs)::@schema@.@state@, o, now_ms, receipts[i]::bigint) x;
    held[i] := r.held;
    st := r.after;
    UPDATE @schema@.@keys@ k SET pairs = st.pairs, expires_ms = @schema@.@concurrency_expires_at@(st, o)
      WHERE k.rule = rules[i] AND k.key_hash = h;
  END LOOP;
  RETURN held;
END $$;

-- Whether every one of the op.cost slots taken from receipt on is held at now_ms (its lease not ended), in
-- a concurrency state's holders, its pairs (sql/concurrency.sql): a release of slots that are not counts as lapsed.
CREATE OR REPLACE FUNCTION @schema@.@slots_held@(
  xs bigint[], op @schema@.@op@, now_ms bigint, receipt bigint
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT count(*) = op.cost FROM generate_series(1, coalesce(cardinality(xs), 0) / 2) AS p(i)
    WHERE xs[2 * p.i - 1] BETWEEN receipt AND receipt + op.cost - 1 AND xs[2 * p.i] > now_ms
$$;

-- The live slots of a concurrency key: each one's id and the epoch ms its lease ends, oldest (lowest id)
-- first, at most max_rows; with the time they were read at.
CREATE OR REPLACE FUNCTION @schema@.@holders@(now_arg bigint, rule_name text, key_bytes bytea, max_rows integer)
RETURNS TABLE (slot bigint, until_ms bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
  at_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
  RETURN QUERY SELECT k.pairs[2 * p.i - 1], k.pairs[2 * p.i]
    FROM @schema@.@keys@ k, generate_series(1, coalesce(cardinality(k.pairs), 0) / 2) AS p(i)
    WHERE k.rule = rule_name AND k.key_hash = sha256(key_bytes) AND k.expires_ms > at_ms AND k.pairs[2 * p.i] > at_ms
    ORDER BY 1 LIMIT max_rows;
END $$;
