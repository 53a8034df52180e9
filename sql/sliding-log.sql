-- Sliding log (src/algorithms/sliding-log.ts): exact; a hit at t counts until t + size.
-- State: pairs = one (ts epoch ms, cost units) pair per distinct millisecond, oldest first, flattened;
-- time_ms = the window size (ms) the entries count in (NULL in a row of an earlier release: the op's). A
-- request of another size (a size chosen per client) moves the entries as sliding-log.ts says.
-- Receipt: the millisecond the op was counted at. pairs_refund serves the sliding counter too.

-- The log in the op's size (sliding-log.ts inOpSize): one of another size has every entry's time moved by
-- the difference, so that it leaves when it would have.
CREATE OR REPLACE FUNCTION @schema@.@log_in_op_size@(st @schema@.@state@, op @schema@.@op@)
RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  xs bigint[] := st.pairs;
BEGIN
  IF st IS NULL OR st.time_ms IS NULL OR st.time_ms = op.size_ms THEN RETURN st; END IF;
  FOR j IN 1..coalesce(cardinality(xs), 0) / 2 LOOP
    xs[2 * j - 1] := xs[2 * j - 1] + st.time_ms - op.size_ms;
  END LOOP;
  RETURN ROW(NULL, op.size_ms, xs)::@schema@.@state@;
END $$;

-- The pair index (1-based) of the first entry still inside the window at now_ms.
CREATE OR REPLACE FUNCTION @schema@.@log_first_live@(xs bigint[], now_ms bigint, size_ms bigint)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  m integer := coalesce(cardinality(xs), 0) / 2;
  j integer := 1;
BEGIN
  WHILE j <= m AND xs[2 * j - 1] + size_ms <= now_ms LOOP j := j + 1; END LOOP;
  RETURN j;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_log_evaluate@(
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@log_in_op_size@(stored, op);
  xs bigint[] := coalesce(st.pairs, '{}');
  m integer := cardinality(xs) / 2;
  f integer := @schema@.@log_first_live@(xs, now_ms, op.size_ms);
  used bigint := 0;
  total bigint;
  allowed boolean;
  counted bigint;
  oldest bigint;
  freed bigint := 0;
  retry bigint := 0;
BEGIN
  FOR j IN f..m LOOP used := used + xs[2 * j]; END LOOP;
  total := used + op.cost;
  allowed := total <= op.lim;
  counted := CASE WHEN allowed OR add THEN total ELSE used END;
  IF f <= m THEN oldest := xs[2 * f - 1]; ELSIF counted > 0 THEN oldest := now_ms; END IF;
  IF NOT allowed THEN
    -- Walk the oldest entries until enough units have expired for this op to fit.
    retry := op.size_ms;
    FOR j IN f..m LOOP
      freed := freed + xs[2 * j];
      retry := xs[2 * j - 1] + op.size_ms - now_ms;
      EXIT WHEN used - freed + op.cost <= op.lim;
    END LOOP;
  END IF;
  RETURN ROW(
    allowed, greatest(0, op.lim - counted),
    CASE WHEN oldest IS NULL THEN 0 ELSE oldest + op.size_ms - now_ms END, retry, counted, now_ms
  )::@schema@.@verdict@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_log_apply@(
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@log_in_op_size@(stored, op);
  xs bigint[] := coalesce(st.pairs, '{}');
  f integer := @schema@.@log_first_live@(xs, now_ms, op.size_ms);
  at integer;
BEGIN
  xs := coalesce(xs[2 * f - 1:], '{}');
  IF op.cost > 0 THEN
    -- Oldest first: an entry moved from a longer size, or logged on a clock ahead, may come after this one.
    at := cardinality(xs) / 2 + 1;
    WHILE at > 1 AND xs[2 * at - 3] > now_ms LOOP at := at - 1; END LOOP;
    IF at > 1 AND xs[2 * at - 3] = now_ms THEN xs[2 * at - 2] := xs[2 * at - 2] + op.cost;
    ELSE xs := xs[:2 * at - 2] || ARRAY[now_ms, op.cost] || xs[2 * at - 1:];
    END IF;
  END IF;
  RETURN ROW(NULL, op.size_ms, xs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@pairs_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, receipt bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  xs bigint[] := st.pairs;
  m integer := cardinality(xs) / 2;
BEGIN
  -- A receipt is an entry's time (a bucket) in its op's size: one moved into another size since is not found
  -- again (time_ms: the size the entries or buckets count in; NULL in a row of an earlier release).
  IF st.time_ms <> op.size_ms THEN RETURN st; END IF;
  FOR j IN 1..m LOOP
    IF xs[2 * j - 1] = receipt THEN
      xs[2 * j] := xs[2 * j] - least(xs[2 * j], op.cost);
      IF xs[2 * j] = 0 THEN xs := xs[:2 * j - 2] || xs[2 * j + 1:]; END IF;
      EXIT;
    END IF;
  END LOOP;
  IF coalesce(cardinality(xs), 0) = 0 THEN RETURN NULL; END IF;
  RETURN ROW(NULL, st.time_ms, xs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_log_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(st.pairs[cardinality(st.pairs) - 1] + coalesce(st.time_ms, op.size_ms), 0)
$$;
