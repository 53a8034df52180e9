-- Sliding log (src/algorithms/sliding-log.ts): exact; a hit at t counts until t + size.
-- State: pairs = one (ts epoch ms, cost units) pair per distinct millisecond, oldest first, flattened.
-- Receipt: the millisecond the op was counted at. pairs_refund serves the sliding counter too.

-- Time never runs backwards inside the log: a clock behind the newest entry reads as that entry's time.
CREATE OR REPLACE FUNCTION @schema@.@log_clamp@(st @schema@.@state@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(now_ms, coalesce(st.pairs[cardinality(st.pairs) - 1], now_ms))
$$;

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
  st @schema@.@state@, op @schema@.@op@, now_arg bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  now_ms bigint := @schema@.@log_clamp@(st, now_arg);
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
  st @schema@.@state@, op @schema@.@op@, now_arg bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  now_ms bigint := @schema@.@log_clamp@(st, now_arg);
  xs bigint[] := coalesce(st.pairs, '{}');
  f integer := @schema@.@log_first_live@(xs, now_ms, op.size_ms);
  n integer;
BEGIN
  xs := coalesce(xs[2 * f - 1:], '{}');
  n := cardinality(xs);
  IF op.cost > 0 THEN
    IF n > 0 AND xs[n - 1] = now_ms THEN xs[n] := xs[n] + op.cost;
    ELSE xs := xs || ARRAY[now_ms, op.cost];
    END IF;
  END IF;
  RETURN ROW(NULL, NULL, xs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@pairs_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, receipt bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  xs bigint[] := st.pairs;
  m integer := cardinality(xs) / 2;
BEGIN
  -- A sliding counter's receipt is a bucket of its op's size: one re-filed into another size since is not
  -- found again (time_ms: the size its buckets count in; a log's is NULL).
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
  SELECT coalesce(st.pairs[cardinality(st.pairs) - 1] + op.size_ms, 0)
$$;
