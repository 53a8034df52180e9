-- Calendar window (src/algorithms/calendar.ts): a fixed window whose end is a wall-clock boundary; the op
-- carries this period's end and the next one's (computed by the limiter on the store's clock).
-- State: amount = count (units), time_ms = the period's end (epoch ms). Receipt: the period's end.
-- A period in progress keeps the end stored with its count (a period chosen per client: calendar.ts says why).

-- The end of the period now_ms falls in.
CREATE OR REPLACE FUNCTION @schema@.@period_end@(op @schema@.@op@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN now_ms < op.period_end THEN op.period_end ELSE op.next_period_end END
$$;

-- The end of the key's period: the stored one while it lasts, else the op's (st.time_ms NULL: no state).
CREATE OR REPLACE FUNCTION @schema@.@calendar_end@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN now_ms < st.time_ms THEN st.time_ms ELSE @schema@.@period_end@(op, now_ms) END
$$;

CREATE OR REPLACE FUNCTION @schema@.@calendar_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  end_ms bigint := @schema@.@calendar_end@(st, op, now_ms);
BEGIN
  RETURN @schema@.@counter_evaluate@(
    CASE WHEN st.time_ms = end_ms THEN st.amount ELSE 0 END, end_ms, op, now_ms, add
  );
END $$;

CREATE OR REPLACE FUNCTION @schema@.@calendar_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  end_ms bigint := @schema@.@calendar_end@(st, op, now_ms);
BEGIN
  RETURN ROW(CASE WHEN st.time_ms = end_ms THEN st.amount ELSE 0 END + op.cost, end_ms, NULL)::@schema@.@state@;
END $$;
