-- Fixed window (src/algorithms/fixed.ts): starts at the first counted hit and lasts size_ms.
-- State: amount = count (units), time_ms = the window's end (epoch ms). Receipt: the window's end.

-- Counting against a window that ends at end_ms; shared with calendar windows (evaluateCounter).
CREATE OR REPLACE FUNCTION @schema@.@counter_evaluate@(
  held bigint, end_ms bigint, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  total bigint := held + op.cost;
  allowed boolean := total <= op.lim;
  counted bigint := CASE WHEN allowed OR add THEN total ELSE held END;
  until_end bigint := end_ms - now_ms;
BEGIN
  RETURN ROW(
    allowed, greatest(0, op.lim - counted), CASE WHEN counted > 0 THEN until_end ELSE 0 END,
    CASE WHEN allowed THEN 0 ELSE until_end END, counted, end_ms
  )::@schema@.@verdict@;
END $$;

-- Gives a reservation back (refundCounter); shared with calendar windows. Only the window it was made in can.
CREATE OR REPLACE FUNCTION @schema@.@counter_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, receipt bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  left_units bigint;
BEGIN
  IF st.time_ms <> receipt OR now_ms >= st.time_ms THEN RETURN st; END IF;
  left_units := greatest(0, st.amount - op.cost);
  IF left_units = 0 THEN RETURN NULL; END IF;
  RETURN ROW(left_units, st.time_ms, NULL)::@schema@.@state@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@fixed_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  -- A missing or ended window reads as a fresh one starting now.
  IF st.time_ms IS NOT NULL AND now_ms < st.time_ms THEN
    RETURN @schema@.@counter_evaluate@(st.amount, st.time_ms, op, now_ms, add);
  END IF;
  RETURN @schema@.@counter_evaluate@(0, now_ms + op.size_ms, op, now_ms, add);
END $$;

CREATE OR REPLACE FUNCTION @schema@.@fixed_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF st.time_ms IS NULL OR now_ms >= st.time_ms THEN
    RETURN ROW(op.cost, now_ms + op.size_ms, NULL)::@schema@.@state@;
  END IF;
  RETURN ROW(st.amount + op.cost, st.time_ms, NULL)::@schema@.@state@;
END $$;
