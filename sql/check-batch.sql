-- Decides a batch of requests of one rule each (src/stores/postgres/batch.ts): the common request, one op of a
-- fixed or calendar window, mode check, cost > 0 (a lockout acts only when its op is denied or its row holds a
-- lock or a remembered level, each of which goes to check.sql here). Every op of the batch has the same rule and
-- numbers (`nums`, check.sql's 13 per op) and its own key; the keys are distinct. One statement: no PL/pgSQL
-- unless an op is denied or meets a lock.
--
-- Each op is an INSERT ... ON CONFLICT DO UPDATE of its row, whose SET computes the window in SQL on the row as
-- it is when locked (the latest version: no lost update): a window in progress keeps its end (fixed, and a
-- calendar period, whatever boundary the op carries: calendar.sql), an ended one starts afresh; its WHERE admits; the override in force (the
-- key's, else the rule-wide one) is read in the same statement. An op not admitted there (over its limit, a lock or lock level on the row, or the
-- cost above the limit in force, a window its key's override sets) leaves its row locked and unchanged (or, when there was none, a new row that
-- holds nothing) and is decided by check.sql in this same statement, on the same time, so a denial is one
-- round trip too and answers exactly as check.sql does.
--
-- Concurrency: the rows are locked in check.sql's order (rule, then sha256 of the key), each batch and each
-- check call acquiring in that order, and check.sql called here only locks rows this statement holds: no
-- deadlock. READ COMMITTED: no serialization failure.
--
-- Its parameters, named once in `args` and read by those names from then on:
-- $1 now_arg   epoch ms, or NULL for the server's clock (clock_timestamp(), read once for the batch)
-- $2 rule      the rule's name
-- $3 keys      per op, the identity as UTF-8 (distinct)
-- $4 nums      check.sql's 13 numbers of the op, shared by the batch; its op (type, size_ms, cost, lim,
--              period_end, next_period_end, ...) read by op_at, as check.sql reads it
-- Returns      one row: float8[][], per op (in the order of keys) check.sql's reply of one op (the time, 9 numbers)
WITH args AS MATERIALIZED (
  SELECT $1::bigint AS now_arg, $2::text AS rule, $3::bytea[] AS keys, $4::float8[] AS nums,
    @schema@.@op_at@($4::float8[], 1) AS op
), c AS MATERIALIZED (
  SELECT coalesce(args.now_arg, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now_ms,
    args.rule, args.keys, args.nums, (args.op).type = 1 AS fixed, (args.op).size_ms, (args.op).cost,
    (args.op).lim, (args.op).period_end, (args.op).next_period_end
  FROM args
), t AS MATERIALIZED (
  SELECT u.ord, u.key, u.key_hash, c.now_ms, coalesce(x.lim, w.lim, c.lim) AS lim,
    coalesce(x.lim, w.lim) IS NOT NULL AS overridden, y.lim IS NOT NULL AS windowed,
    CASE WHEN c.fixed THEN c.now_ms + c.size_ms
      WHEN c.now_ms < c.period_end THEN c.period_end
      ELSE c.next_period_end END AS fresh_end
  FROM c
    CROSS JOIN LATERAL (
      SELECT v.key, v.ord, sha256(v.key) AS key_hash FROM unnest(c.keys) WITH ORDINALITY AS v(key, ord)
    ) u
    LEFT JOIN @schema@.@overrides@ x
      ON x.rule = c.rule AND x.key_hash = u.key_hash AND (x.until_ms IS NULL OR x.until_ms > c.now_ms)
    LEFT JOIN @schema@.@overrides@ w
      ON w.rule = c.rule AND w.key_hash = '\x'::bytea AND (w.until_ms IS NULL OR w.until_ms > c.now_ms)
    -- A window the key's override sets (check.sql): such an op is decided by check.sql.
    LEFT JOIN @schema@.@overrides@ y
      ON y.rule = c.rule AND y.key_hash = u.key_hash || '\x01'::bytea
        AND (y.until_ms IS NULL OR y.until_ms > c.now_ms)
), up AS (
  INSERT INTO @schema@.@keys@ AS k (rule, key_hash, key, amount, time_ms, expires_ms)
    SELECT c.rule, t.key_hash, t.key,
      CASE WHEN c.cost <= t.lim AND NOT t.windowed THEN c.cost END,
      CASE WHEN c.cost <= t.lim AND NOT t.windowed THEN t.fresh_end END,
      CASE WHEN c.cost <= t.lim AND NOT t.windowed THEN t.fresh_end END
    FROM t CROSS JOIN c ORDER BY t.key_hash
  ON CONFLICT (rule, key_hash) DO UPDATE SET
    amount = CASE WHEN k.expires_ms > (SELECT now_ms FROM c) AND k.time_ms > (SELECT now_ms FROM c)
        THEN k.amount ELSE 0 END + excluded.amount,
    time_ms = CASE WHEN k.expires_ms > (SELECT now_ms FROM c)
          AND k.time_ms > (SELECT now_ms FROM c) THEN k.time_ms ELSE excluded.time_ms END,
    pairs = NULL,
    expires_ms = CASE WHEN k.expires_ms > (SELECT now_ms FROM c)
          AND k.time_ms > (SELECT now_ms FROM c) THEN k.time_ms ELSE excluded.time_ms END
  WHERE excluded.amount IS NOT NULL AND k.lock_until IS NULL AND k.forget_ms IS NULL
    AND CASE WHEN k.expires_ms > (SELECT now_ms FROM c) AND k.time_ms > (SELECT now_ms FROM c)
        THEN k.amount ELSE 0 END + excluded.amount
      <= (SELECT t.lim FROM t WHERE t.key_hash = excluded.key_hash)
  RETURNING k.key_hash, k.amount, k.time_ms
)
SELECT array_agg(
  CASE WHEN u.amount IS NULL THEN @schema@.@check@('check', t.now_ms, ARRAY[c.rule], ARRAY[t.key], c.nums)
    ELSE ARRAY[t.now_ms, CASE WHEN t.overridden THEN 9 ELSE 1 END, t.lim, greatest(0, t.lim - u.amount),
      u.time_ms - t.now_ms, 0, u.amount, u.time_ms, 0, 0]::float8[] END
  ORDER BY t.ord)
FROM t CROSS JOIN c LEFT JOIN up u ON u.key_hash = t.key_hash
