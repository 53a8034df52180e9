-- Concurrency (src/algorithms/concurrency.ts, lua/concurrency.lua): admitted while fewer than lim slots are held
-- for the key; a slot is held until released (refund) or until its lease (op.size_ms) ends, unless renewed
-- (renew, below).
-- State: amount = the last slot id handed out (seq; ids are now_ms x 1024 + n and only grow, so a slot released
-- or lapsed is never handed out again); pairs = the holders (id, epoch ms its lease ends), ids
-- ascending, lapsed once the lease end is <= now; time_ms is NULL. A concurrency state is the only one with
-- amount and pairs and no time_ms (keys.sql's reset keeps its seq). Receipt: the id of the op's first slot; an op of cost c holds
-- ids receipt .. receipt + c - 1. The row of a key holds at most lim live holders (more only by record)
-- and the lapsed ones the next decision that writes drops: a decision reads and writes that array.

-- The id of the next slot taken at now_ms (nextSlotId).
CREATE OR REPLACE FUNCTION @schema@.@concurrency_next_id@(st @schema@.@state@, now_ms bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT greatest(coalesce(st.amount, 0) + 1, now_ms * 1024 + 1) $$;

-- Lease ends of the live holders, soonest first ('{}' when none).
CREATE OR REPLACE FUNCTION @schema@.@concurrency_live@(st @schema@.@state@, now_ms bigint) RETURNS bigint[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(u.x ORDER BY u.x), '{}') FROM unnest(st.pairs) WITH ORDINALITY AS u(x, i)
    WHERE u.i % 2 = 0 AND u.x > now_ms
$$;

CREATE OR REPLACE FUNCTION @schema@.@concurrency_evaluate@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, add boolean
) RETURNS @schema@.@verdict@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  untils bigint[] := @schema@.@concurrency_live@(st, now_ms);
  live bigint := cardinality(untils);
  total bigint := live + op.cost;
  allowed boolean := total <= op.lim;
  counted bigint := CASE WHEN allowed OR add THEN total ELSE live END;
BEGIN
  RETURN ROW(
    allowed, greatest(0, op.lim - counted),
    -- Until the soonest lease ends: the latest a slot frees if its holder stops renewing.
    CASE WHEN live > 0 THEN untils[1] - now_ms WHEN counted > 0 THEN op.size_ms ELSE 0 END,
    -- Enough holders must lapse for this op to fit (all of them when it cannot fit at all).
    CASE WHEN NOT allowed AND live > 0 THEN untils[least(live, total - op.lim)::integer] - now_ms ELSE 0 END,
    counted, @schema@.@concurrency_next_id@(st, now_ms)
  )::@schema@.@verdict@;
END $$;

-- Drops the lapsed holders and takes op.cost slots from the next id on, each until now + lease.
CREATE OR REPLACE FUNCTION @schema@.@concurrency_apply@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint
) RETURNS @schema@.@state@ LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  id bigint := @schema@.@concurrency_next_id@(st, now_ms);
  held bigint[];
BEGIN
  -- The pair of the element at i: its id at i - 1 + i % 2, its lease end at i + i % 2.
  SELECT coalesce(array_agg(u.x ORDER BY u.i), '{}') INTO held
    FROM unnest(st.pairs) WITH ORDINALITY AS u(x, i)
    WHERE st.pairs[(u.i + u.i % 2)::integer] > now_ms;
  IF op.cost <= 0 THEN RETURN ROW(coalesce(st.amount, 0), NULL, held)::@schema@.@state@; END IF;
  -- New ids are above every id held: appended, the pairs stay in id order.
  SELECT held || array_agg(x ORDER BY k, j) INTO held
    FROM generate_series(0, op.cost - 1) AS k,
      LATERAL (VALUES (1, id + k), (2, now_ms + op.size_ms)) AS p(j, x);
  RETURN ROW(id + op.cost - 1, NULL, held)::@schema@.@state@;
END $$;

-- A release: the slots taken from receipt on (unknown or lapsed ones: nothing to do). The state stays (its
-- seq) until it expires, so no id is handed out twice.
CREATE OR REPLACE FUNCTION @schema@.@concurrency_refund@(
  st @schema@.@state@, op @schema@.@op@, receipt bigint
) RETURNS @schema@.@state@ LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(st.amount, NULL, coalesce(array_agg(u.x ORDER BY u.i), '{}'))::@schema@.@state@
  FROM unnest(st.pairs) WITH ORDINALITY AS u(x, i)
  WHERE st.pairs[(u.i - 1 + u.i % 2)::integer] NOT BETWEEN receipt AND receipt + op.cost - 1
$$;

-- Renews the op.cost slots taken from receipt on, each until now + lease (renewSlots): whether every one
-- was still held, and the state after. A slot released, lapsed or reset is not taken again.
CREATE OR REPLACE FUNCTION @schema@.@concurrency_renew@(
  st @schema@.@state@, op @schema@.@op@, now_ms bigint, receipt bigint, OUT held boolean,
  OUT after @schema@.@state@
) LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  xs bigint[] := st.pairs;
  found bigint := 0;
  i integer;
BEGIN
  FOR i IN 1..coalesce(cardinality(xs), 0) / 2 LOOP
    IF xs[2 * i - 1] BETWEEN receipt AND receipt + op.cost - 1 AND xs[2 * i] > now_ms THEN
      xs[2 * i] := now_ms + op.size_ms;
      found := found + 1;
    END IF;
  END LOOP;
  held := found = op.cost;
  after := ROW(st.amount, NULL, xs)::@schema@.@state@;
END $$;

-- Epoch ms from which the state means nothing: its seq's ms plus a lease, or a later lease end.
CREATE OR REPLACE FUNCTION @schema@.@concurrency_expires_at@(st @schema@.@state@, op @schema@.@op@)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(@schema@.@floor_div@(st.amount, 1024) + op.size_ms, max(u.x))
  FROM unnest(st.pairs) WITH ORDINALITY AS u(x, i) WHERE u.i % 2 = 0
$$;
