-- Token bucket (src/algorithms/token-bucket.ts): refills lim tokens per size, continuously, up to the burst.
-- State: amount = scaled tokens (tokens x size_ms, so refill is the whole number elapsed ms x lim), time_ms = epoch ms
-- of the last refill. Receipt: 0. Every product stays below 2^53 (the limiter refuses larger limits).

-- Time of the refill at now_ms: time never runs backwards (a clock behind time_ms reads as time_ms).
CREATE OR REPLACE FUNCTION @schema@.@token_refill_ts@(st @schema@.@state@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT greatest(now_ms, coalesce(st.time_ms, now_ms)) $$;

-- Scaled tokens at now_ms, counted from the level the state was left at (a record can take it below zero).
CREATE OR REPLACE FUNCTION @schema@.@token_refilled@(st @schema@.@state@, op @schema@.@op@, now_ms bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  capacity bigint := @schema@.@burst_of@(op) * op.size_ms;
  elapsed bigint;
BEGIN
  IF st.time_ms IS NULL THEN RETURN capacity; END IF;
  elapsed := least(
    @schema@.@token_refill_ts@(st, now_ms) - st.time_ms, @schema@.@ceil_div@(capacity - st.amount, op.lim)
  );
  RETURN least(capacity, st.amount + elapsed * op.lim);
END $$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  burst bigint := @schema@.@burst_of@(op);
  scaled bigint := @schema@.@token_refilled@(st, op, now_ms);
  need bigint := op.cost * op.size_ms;
  allowed boolean := scaled >= need;
  after bigint := CASE WHEN allowed OR add THEN scaled - need ELSE scaled END;
  whole bigint := @schema@.@floor_div@(after, op.size_ms);
  -- Until one more whole token is there (0 when the bucket is full).
  next_unit bigint := greatest(1, whole + 1) * op.size_ms;
BEGIN
  RETURN ROW(
    allowed, greatest(0, whole),
    CASE WHEN after >= burst * op.size_ms THEN 0 ELSE @schema@.@ceil_div@(next_unit - after, op.lim) END,
    -- A cost above the burst never fits; the best answer is the time until the bucket is full.
    CASE WHEN allowed THEN 0
      ELSE @schema@.@ceil_div@(least(op.cost, burst) * op.size_ms - scaled, op.lim) END,
    burst - whole, 0
  )::@schema@.@verdict@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(
    @schema@.@token_refilled@(st, op, now_ms) - op.cost * op.size_ms, @schema@.@token_refill_ts@(st, now_ms), NULL
  )::@schema@.@state@
$$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  capacity bigint := @schema@.@burst_of@(op) * op.size_ms;
  scaled bigint := least(capacity, @schema@.@token_refilled@(st, op, now_ms) + op.cost * op.size_ms);
BEGIN
  IF scaled >= capacity THEN RETURN NULL; END IF;
  RETURN ROW(scaled, @schema@.@token_refill_ts@(st, now_ms), NULL)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT st.time_ms + @schema@.@ceil_div@(@schema@.@burst_of@(op) * op.size_ms - st.amount, op.lim)
$$;
