-- The window algorithms by type (src/algorithms/index.ts): what check.sql and refund.sql call for an op.
-- Types: 1 fixed, 2 calendar, 3 sliding-log, 4 sliding, 5 token-bucket, 6 gcra, 7 concurrency.

-- Decides an op against a state (NULL: nothing stored). Reads only. add: count even past the limit (record).
CREATE OR REPLACE FUNCTION @schema@.@evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE op.type
    WHEN 1 THEN RETURN @schema@.@fixed_evaluate@(st, op, now_ms, add);
    WHEN 2 THEN RETURN @schema@.@calendar_evaluate@(st, op, now_ms, add);
    WHEN 3 THEN RETURN @schema@.@sliding_log_evaluate@(st, op, now_ms, add);
    WHEN 4 THEN RETURN @schema@.@sliding_evaluate@(st, op, now_ms, add);
    WHEN 5 THEN RETURN @schema@.@token_bucket_evaluate@(st, op, now_ms, add);
    WHEN 7 THEN RETURN @schema@.@concurrency_evaluate@(st, op, now_ms, add);
    ELSE RETURN @schema@.@gcra_evaluate@(st, op, now_ms, add);
  END CASE;
END $$;

-- Writes the op's cost into the state (creating it), as evaluated.
CREATE OR REPLACE FUNCTION @schema@.@apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE op.type
    WHEN 1 THEN RETURN @schema@.@fixed_apply@(st, op, now_ms);
    WHEN 2 THEN RETURN @schema@.@calendar_apply@(st, op, now_ms);
    WHEN 3 THEN RETURN @schema@.@sliding_log_apply@(st, op, now_ms);
    WHEN 4 THEN RETURN @schema@.@sliding_apply@(st, op, now_ms);
    WHEN 5 THEN RETURN @schema@.@token_bucket_apply@(st, op, now_ms);
    WHEN 7 THEN RETURN @schema@.@concurrency_apply@(st, op, now_ms);
    ELSE RETURN @schema@.@gcra_apply@(st, op, now_ms);
  END CASE;
END $$;

-- Gives a consumption back, never below empty; NULL when the state is now empty (a concurrency
-- state stays: its seq).
CREATE OR REPLACE FUNCTION @schema@.@refund_state@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, receipt bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE op.type
    WHEN 1, 2 THEN RETURN @schema@.@counter_refund@(st, op, now_ms, receipt);
    WHEN 3, 4 THEN RETURN @schema@.@pairs_refund@(st, op, now_ms, receipt);
    WHEN 5 THEN RETURN @schema@.@token_bucket_refund@(st, op, now_ms);
    WHEN 7 THEN RETURN @schema@.@concurrency_refund@(st, op, receipt);
    ELSE RETURN @schema@.@gcra_refund@(st, op, now_ms);
  END CASE;
END $$;

-- Epoch ms from which the state means nothing any more.
CREATE OR REPLACE FUNCTION @schema@.@expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE op.type
    WHEN 1, 2 THEN RETURN st.time_ms;
    WHEN 3 THEN RETURN @schema@.@sliding_log_expires_at@(st, op);
    WHEN 4 THEN RETURN @schema@.@sliding_expires_at@(st, op);
    WHEN 5 THEN RETURN @schema@.@token_bucket_expires_at@(st, op);
    WHEN 7 THEN RETURN @schema@.@concurrency_expires_at@(st, op);
    ELSE RETURN @schema@.@gcra_expires_at@(st, op);
  END CASE;
END $$;

-- The op of a call: nums holds 13 numbers per op, the first 8 the fields of the op type in order (see check.sql).
CREATE OR REPLACE FUNCTION @schema@.@op_at@(nums float8[], i integer) RETURNS @schema@.@op@
LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(
    nums[13 * i - 12], nums[13 * i - 11], nums[13 * i - 10], nums[13 * i - 9], nums[13 * i - 8],
    nums[13 * i - 7], nums[13 * i - 6], nums[13 * i - 5]
  )::@schema@.@op@
$$;

-- Duration of the lock at `level` (1 for the first): duration x escalate^(level-1), capped (lockDurationMs).
CREATE OR REPLACE FUNCTION @schema@.@lock_duration_ms@(
  duration_ms float8, escalate float8, max_ms float8, level integer
) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT ceil(least(
    CASE WHEN max_ms > 0 THEN least(duration_ms * power(escalate, level - 1), max_ms)
      ELSE duration_ms * power(escalate, level - 1) END,
    1e13
  ))::bigint
$$;
