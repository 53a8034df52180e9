-- Gives reservations back (an outcome that does not count): src/stores/memory/memory-store.ts refund, in one call.
-- Rows are locked in the order check.sql locks them. Arguments as check.sql's (no mode), and receipts:
-- per op, what its decision's result said. Never below empty; a row left holding nothing is deleted.
-- frees: the announcements of the concurrency keys whose slots this releases, sent on the store's free
-- channel (NOTIFY, when the transaction commits) so that calls waiting for a slot in any process try again.
-- Returns, per refund, whether what it gave back was still held: false for a concurrency op's slots not
-- all held any more (released, lapsed or reset: its release counts as lapsed), true for any other.
CREATE OR REPLACE FUNCTION @schema@.@give_back@(
  now_arg bigint, rules text[], keys bytea[], nums float8[], receipts float8[], frees text[]
) RETURNS boolean[] LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := coalesce(now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  held boolean[] := array_fill(true, ARRAY[coalesce(cardinality(rules), 0)]);
  o @schema@.@op@;
  st @schema@.@state@;
  r record;
  lim bigint;
  win bigint;
  h bytea;
  i integer;
BEGIN
  FOR i IN SELECT u.ord::integer FROM unnest(rules, keys) WITH ORDINALITY AS u(rule, key, ord)
      ORDER BY u.rule COLLATE "C", sha256(u.key) LOOP
    h := sha256(keys[i]);
    o := @schema@.@op_at@(nums, i);
    -- check.sql's read: the limit in force, and the window the key's override sets.
    SELECT (array_agg(x.lim ORDER BY x.key_hash = '\x'::bytea) FILTER (WHERE octet_length(x.key_hash) <> 33))[1],
        max(x.lim) FILTER (WHERE octet_length(x.key_hash) = 33)
      INTO lim, win FROM @schema@.@overrides@ x
      WHERE x.rule = rules[i] AND x.key_hash IN (h, '\x'::bytea, h || '\x01'::bytea)
        AND (x.until_ms IS NULL OR x.until_ms > now_ms);
    IF lim IS NOT NULL THEN o.lim := lim; END IF;
    IF win IS NOT NULL THEN o.size_ms := win; END IF;
    SELECT k.amount, k.time_ms, k.pairs, k.expires_ms, k.forget_ms INTO r
      FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = h FOR UPDATE;
    IF o.type = 7 THEN
      held[i] := FOUND AND coalesce(r.expires_ms > now_ms, false)
        AND @schema@.@slots_held@(r.pairs, o, now_ms, receipts[i]::bigint);
    END IF;
    CONTINUE WHEN NOT FOUND OR NOT coalesce(r.expires_ms > now_ms, false);
    st := @schema@.@refund_state@(ROW(r.amount, r.time_ms, r.pairs)::@schema@.@state@, o, now_ms, receipts[i]::bigint);
    IF st IS NULL AND NOT coalesce(r.forget_ms > now_ms, false) THEN
      DELETE FROM @schema@.@keys@ k WHERE k.rule = rules[i] AND k.key_hash = h;
    ELSE
      UPDATE @schema@.@keys@ k SET amount = st.amount, time_ms = st.time_ms, pairs = st.pairs,
        expires_ms = CASE WHEN st IS NULL THEN NULL ELSE @schema@.@expires_at@(st, o) END
        WHERE k.rule = rules[i] AND k.key_hash = h;
    END IF;
  END LOOP;
  PERFORM pg_notify(@free_channel@, f) FROM unnest(frees) AS f;
  RETURN held;
END $$;

-- The refund of schema version 2, answering nothing: what processes of an older release, still running
-- after a newer one upgraded the schema, call.
CREATE OR REPLACE FUNCTION @schema@.@refund@(
  now_arg bigint, rules text[], keys bytea[], nums float8[], receipts float8[], frees text[]
) RETURNS void LANGUAGE sql AS $$
  SELECT FROM @schema@.@give_back@(now_arg, rules, keys, nums, receipts, frees)
$$;
