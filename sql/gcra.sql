-- GCRA (src/algorithms/gcra.ts), leaky bucket as a meter: one number per key.
-- State: amount = the theoretical arrival time (TAT) in whole epoch µs, at most 2^53 - 1; it advances by
-- cost x size/lim per op, rounded to the nearest µs. Decisions count whole units relative to now, exactly. Receipt: 0.

-- Backlog (TAT - now) in µs, never negative.
CREATE OR REPLACE FUNCTION @schema@.@gcra_backlog@(st @schema@.@state@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT greatest(0, coalesce(st.amount - now_ms * 1000, 0)) $$;

-- The latest TAT a state holds: 2^53 - 1 µs (MAX_TAT_US in src/algorithms/gcra.ts), where the TypeScript
-- and Lua twins' doubles stop being exact integers. Only a debt (add, a settled cost) reaches it.
CREATE OR REPLACE FUNCTION @schema@.@gcra_max_tat@() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 9007199254740991::bigint $$;

-- How far an op moves the TAT: cost x size/lim, rounded to the nearest µs, at most the latest TAT. In
-- doubles, multiplied in the order the twins multiply (each product rounded as theirs is), as Math.round.
CREATE OR REPLACE FUNCTION @schema@.@gcra_step_us@(op @schema@.@op@) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN x >= @schema@.@gcra_max_tat@() THEN @schema@.@gcra_max_tat@() ELSE @schema@.@js_round@(x) END
  FROM (SELECT op.cost::float8 * op.size_ms::float8 * 1000::float8 / op.lim::float8 AS x) AS q
$$;

-- Units a backlog holds at lim (ceil(backlog x lim / unit_us) without forming backlog x lim).
CREATE OR REPLACE FUNCTION @schema@.@gcra_units_in@(backlog bigint, lim bigint, unit_us bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT w * lim + @schema@.@ceil_div@((backlog - w * unit_us) * lim, unit_us)
  FROM (SELECT @schema@.@floor_div@(backlog, unit_us) AS w) AS whole
$$;

-- Ms until (backlog x lim + units x size x 1000) µs·lim have drained at lim x 1000 per ms, rounded up.
CREATE OR REPLACE FUNCTION @schema@.@gcra_ms_until@(backlog bigint, units bigint, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT ms + @schema@.@ceil_div@((backlog - ms * 1000) * op.lim + units * op.size_ms * 1000, op.lim * 1000)
  FROM (SELECT @schema@.@floor_div@(backlog, 1000) AS ms) AS whole
$$;

CREATE OR REPLACE FUNCTION @schema@.@gcra_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  burst bigint := @schema@.@burst_of@(op);
  backlog bigint := @schema@.@gcra_backlog@(st, now_ms);
  in_use bigint := @schema@.@gcra_units_in@(backlog, op.lim, op.size_ms * 1000);
  allowed boolean := in_use + op.cost <= burst;
  added bigint := CASE WHEN allowed OR add THEN op.cost ELSE 0 END;
  counted bigint := in_use + added;
  remaining bigint := greatest(0, burst - counted);
BEGIN
  RETURN ROW(
    allowed, remaining,
    -- One more unit is free once the backlog drops to the multiple of a unit below it.
    CASE WHEN counted = 0 THEN 0 ELSE @schema@.@gcra_ms_until@(backlog, added - burst + remaining + 1, op) END,
    CASE WHEN allowed THEN 0
      ELSE greatest(1, @schema@.@gcra_ms_until@(backlog, least(op.cost, burst) - burst, op)) END,
    counted, 0
  )::@schema@.@verdict@;
END $$;

CREATE OR REPLACE FUNCTION @schema@.@gcra_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(least(@schema@.@gcra_max_tat@(),
    greatest(now_ms * 1000, coalesce(st.amount, 0)) + @schema@.@gcra_step_us@(op)), NULL, NULL)::@schema@.@state@
$$;

CREATE OR REPLACE FUNCTION @schema@.@gcra_refund@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN st.amount - @schema@.@gcra_step_us@(op) <= now_ms * 1000 THEN NULL
    ELSE ROW(st.amount - @schema@.@gcra_step_us@(op), NULL, NULL)::@schema@.@state@ END
$$;

CREATE OR REPLACE FUNCTION @schema@.@gcra_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT @schema@.@ceil_div@(st.amount, 1000) $$;
