-- Sliding counter (src/algorithms/sliding.ts): `buckets` sub-windows of size/buckets; a hit counts for at
-- least size and at most size + one bucket, so it never over-admits.
-- State: pairs = one (bucket index floor(t / width), units) pair per bucket, oldest first, flattened;
-- time_ms = the window size (ms) the buckets count in (NULL in a row of an earlier release: the op's). A
-- request of another size (a size chosen per client) re-files the buckets into its own width, as sliding.ts
-- says. Receipt: the bucket index the op was counted in. Widths are doubles, as in the TypeScript twin.

CREATE OR REPLACE FUNCTION @schema@.@sliding_width@(op @schema@.@op@) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$ SELECT op.size_ms::float8 / op.buckets::float8 $$;

-- The current bucket index.
CREATE OR REPLACE FUNCTION @schema@.@sliding_current@(op @schema@.@op@, now_ms bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT floor(now_ms::float8 / @schema@.@sliding_width@(op))::bigint
$$;

-- The pair index (1-based) of the first bucket still counting: index >= current - buckets.
CREATE OR REPLACE FUNCTION @schema@.@sliding_first_live@(xs bigint[], current_index bigint, buckets bigint)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  m integer := coalesce(cardinality(xs), 0) / 2;
  j integer := 1;
BEGIN
  WHILE j <= m AND xs[2 * j - 1] < current_index - buckets LOOP j := j + 1; END LOOP;
  RETURN j;
END $$;

-- The state as buckets of the op's size (sliding.ts inOpSize): one of another size has each bucket still
-- counting re-filed into the op's width, into the first bucket that ends at or after the old one's end.
CREATE OR REPLACE FUNCTION @schema@.@sliding_in_op_size@(st @schema@.@state@, op @schema@.@op@, now_ms bigint)
RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  from_width float8;
  to_width float8 := @schema@.@sliding_width@(op);
  cur bigint;
  xs bigint[] := '{}';
  idx bigint;
  n integer;
BEGIN
  IF st IS NULL OR st.time_ms IS NULL OR st.time_ms = op.size_ms THEN RETURN st; END IF;
  from_width := st.time_ms::float8 / op.buckets::float8;
  cur := floor(now_ms::float8 / from_width)::bigint;
  FOR j IN 1..coalesce(cardinality(st.pairs), 0) / 2 LOOP
    CONTINUE WHEN st.pairs[2 * j - 1] < cur - op.buckets;
    idx := ceil((st.pairs[2 * j - 1] + op.buckets + 1)::float8 * from_width / to_width)::bigint - op.buckets - 1;
    n := cardinality(xs);
    IF n > 0 AND xs[n - 1] = idx THEN xs[n] := xs[n] + st.pairs[2 * j];
    ELSE xs := xs || ARRAY[idx, st.pairs[2 * j]];
    END IF;
  END LOOP;
  RETURN ROW(NULL, op.size_ms, xs)::@schema@.@state@;
END $$;

-- Ms from now until bucket `idx` stops counting.
CREATE OR REPLACE FUNCTION @schema@.@sliding_expiry_ms@(idx bigint, op @schema@.@op@, now_ms bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(1, ceil((idx + op.buckets + 1)::float8 * @schema@.@sliding_width@(op) - now_ms::float8))::bigint
$$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_evaluate@(
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@sliding_in_op_size@(stored, op, now_ms);
  cur bigint := @schema@.@sliding_current@(op, now_ms);
  xs bigint[] := coalesce(st.pairs, '{}');
  m integer := cardinality(xs) / 2;
  f integer := @schema@.@sliding_first_live@(xs, cur, op.buckets);
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
  IF f <= m THEN oldest := xs[2 * f - 1]; ELSIF counted > 0 THEN oldest := cur; END IF;
  IF NOT allowed THEN
    retry := @schema@.@sliding_expiry_ms@(cur, op, now_ms);
    FOR j IN f..m LOOP
      freed := freed + xs[2 * j];
      retry := @schema@.@sliding_expiry_ms@(xs[2 * j - 1], op, now_ms);
      EXIT WHEN used - freed + op.cost <= op.lim;
    END LOOP;
  END IF;
  RETURN ROW(
    allowed, greatest(0, op.lim - counted),
    CASE WHEN oldest IS NULL THEN 0 ELSE @schema@.@sliding_expiry_ms@(oldest, op, now_ms) END,
    retry, counted, cur
  )::@schema@.@verdict@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_apply@(
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@sliding_in_op_size@(stored, op, now_ms);
  cur bigint := @schema@.@sliding_current@(op, now_ms);
  xs bigint[] := coalesce(st.pairs, '{}');
  f integer := @schema@.@sliding_first_live@(xs, cur, op.buckets);
  at integer;
BEGIN
  xs := coalesce(xs[2 * f - 1:], '{}');
  IF op.cost > 0 THEN
    -- Oldest first: a bucket re-filed from a longer size, or written on a clock ahead, may come after this one.
    at := cardinality(xs) / 2 + 1;
    WHILE at > 1 AND xs[2 * at - 3] > cur LOOP at := at - 1; END LOOP;
    IF at > 1 AND xs[2 * at - 3] = cur THEN xs[2 * at - 2] := xs[2 * at - 2] + op.cost;
    ELSE xs := xs[:2 * at - 2] || ARRAY[cur, op.cost] || xs[2 * at - 1:];
    END IF;
  END IF;
  RETURN ROW(NULL, op.size_ms, xs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(
    ceil((st.pairs[cardinality(st.pairs) - 1] + op.buckets + 1)::float8
      * (coalesce(st.time_ms, op.size_ms)::float8 / op.buckets::float8))::bigint, 0
  )
$$;
