-- Calendar window (src/algorithms/calendar.ts): a fixed window whose end is a wall-clock boundary; the op
-- carries this period's end and the next one's (computed by the limiter on the store's clock).
-- State: amount = count (units), time_ms = the period's end (epoch ms). Receipt: the period's end.

-- The end of the period now_ms falls in.
CREATE OR REPLACE FUNCTION @schema@.@period_end@(op @schema@.@op@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN now_ms < op.period_end THEN op.period_end ELSE op.next_period_end END
$$;

CREATE OR REPLACE FUNCTION @schema@.@calendar_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  end_ms bigint := @schema@.@period_end@(op, now_ms);
BEGIN
  RETURN @schema@.@counter_evaluate@(
    CASE WHEN st.time_ms = end_ms THEN st.amount ELSE 0 END, end_ms, op, now_ms, add
  );
END $$;

CREATE OR REPLACE FUNCTION @schema@.@calendar_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  end_ms bigint := @schema@.@period_end@(op, now_ms);
BEGIN
  RETURN ROW(CASE WHEN st.time_ms = end_ms THEN st.amount ELSE 0 END + op.cost, end_ms, NULL)::@schema@.@state@;
END $$;
