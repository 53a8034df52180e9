-- Token bucket (src/algorithms/token-bucket.ts): refills lim tokens per size, continuously, up to the burst.
-- State: amount = scaled tokens (tokens x size, so refill is the whole number elapsed ms x lim), time_ms = epoch ms
-- of the last refill, pairs = ARRAY[size]: the window size (ms) the tokens are counted in (NULL in a row of an
-- earlier release: the op's). A request of another size (a size chosen per client) refills at the state's size
-- up to now, then keeps its whole tokens in its own size, as token-bucket.ts says. Receipt: 0. Every product
-- stays below 2^53 (the limiter refuses larger limits).

-- Time of the refill at now_ms: time never runs backwards (a clock behind time_ms reads as time_ms).
CREATE OR REPLACE FUNCTION @schema@.@token_refill_ts@(st @schema@.@state@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT greatest(now_ms, coalesce(st.time_ms, now_ms)) $$;

-- Scaled tokens at now_ms in units of 1/size_ms token, counted from the level the state was left at (a record
-- can take it below zero).
CREATE OR REPLACE FUNCTION @schema@.@token_refilled@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, size_ms bigint
) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  capacity bigint := @schema@.@burst_of@(op) * size_ms;
  elapsed bigint;
BEGIN
  IF st.time_ms IS NULL THEN RETURN capacity; END IF;
  elapsed := least(
    @schema@.@token_refill_ts@(st, now_ms) - st.time_ms, @schema@.@ceil_div@(capacity - st.amount, op.lim)
  );
  RETURN least(capacity, st.amount + elapsed * op.lim);
END $$;

-- The bucket in the op's size (token-bucket.ts inOpSize).
CREATE OR REPLACE FUNCTION @schema@.@token_in_op_size@(st @schema@.@state@, op @schema@.@op@, now_ms bigint)
RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  from_ms bigint := st.pairs[1];
BEGIN
  IF st.time_ms IS NULL OR from_ms IS NULL OR from_ms = op.size_ms THEN RETURN st; END IF;
  RETURN ROW(
    @schema@.@floor_div@(@schema@.@token_refilled@(st, op, now_ms, from_ms), from_ms) * op.size_ms,
    @schema@.@token_refill_ts@(st, now_ms), ARRAY[op.size_ms]
  )::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_evaluate@(
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@token_in_op_size@(stored, op, now_ms);
  burst bigint := @schema@.@burst_of@(op);
  scaled bigint := @schema@.@token_refilled@(st, op, now_ms, op.size_ms);
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
  stored @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  st @schema@.@state@ := @schema@.@token_in_op_size@(stored, op, now_ms);
BEGIN
  RETURN ROW(
    @schema@.@token_refilled@(st, op, now_ms, op.size_ms) - op.cost * op.size_ms,
    @schema@.@token_refill_ts@(st, now_ms), ARRAY[op.size_ms]
  )::@schema@.@state@;
END $$;

-- The tokens go back in the bucket's own size (token-bucket.ts).
CREATE OR REPLACE FUNCTION @schema@.@token_bucket_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  size_ms bigint := coalesce(st.pairs[1], op.size_ms);
  capacity bigint := @schema@.@burst_of@(op) * size_ms;
  scaled bigint := least(capacity, @schema@.@token_refilled@(st, op, now_ms, size_ms) + op.cost * size_ms);
BEGIN
  IF scaled >= capacity THEN RETURN NULL; END IF;
  RETURN ROW(scaled, @schema@.@token_refill_ts@(st, now_ms), st.pairs)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@token_bucket_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT st.time_ms
    + @schema@.@ceil_div@(@schema@.@burst_of@(op) * coalesce(st.pairs[1], op.size_ms) - st.amount, op.lim)
$$;
