-- Sliding counter (src/algorithms/sliding.ts): `buckets` sub-windows of size/buckets; a hit counts for at
-- least size and at most size + one bucket, so it never over-admits.
-- State: pairs = one (bucket index floor(t / width), units) pair per bucket, oldest first, flattened.
-- Receipt: the bucket index the op was counted in. Widths are doubles, as in the TypeScript twin.

CREATE OR REPLACE FUNCTION @schema@.@sliding_width@(op @schema@.@op@) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$ SELECT op.size_ms::float8 / op.buckets::float8 $$;

-- The current bucket index; time never runs backwards (a clock behind the newest bucket reads as it).
CREATE OR REPLACE FUNCTION @schema@.@sliding_current@(st @schema@.@state@, op @schema@.@op@, now_ms bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(
    floor(now_ms::float8 / @schema@.@sliding_width@(op))::bigint,
    coalesce(st.pairs[cardinality(st.pairs) - 1], -1)
  )
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

-- Ms from now until bucket `idx` stops counting.
CREATE OR REPLACE FUNCTION @schema@.@sliding_expiry_ms@(idx bigint, op @schema@.@op@, now_ms bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(1, ceil((idx + op.buckets + 1)::float8 * @schema@.@sliding_width@(op) - now_ms::float8))::bigint
$$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  cur bigint := @schema@.@sliding_current@(st, op, now_ms);
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
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  cur bigint := @schema@.@sliding_current@(st, op, now_ms);
  xs bigint[] := coalesce(st.pairs, '{}');
  f integer := @schema@.@sliding_first_live@(xs, cur, op.buckets);
  n integer;
BEGIN
  xs := coalesce(xs[2 * f - 1:], '{}');
  n := cardinality(xs);
  IF op.cost > 0 THEN
    IF n > 0 AND xs[n - 1] = cur THEN xs[n] := xs[n] + op.cost;
    ELSE xs := xs || ARRAY[cur, op.cost];
    END IF;
  END IF;
  RETURN ROW(NULL, NULL, xs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@sliding_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(
    ceil((st.pairs[cardinality(st.pairs) - 1] + op.buckets + 1)::float8 * @schema@.@sliding_width@(op))::bigint, 0
  )
$$;
