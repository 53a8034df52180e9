-- Decides a batch of requests of one rule each (src/stores/postgres/batch.ts): the common request, one op of a
-- fixed or calendar window, mode check, cost > 0 (a lockout acts only when its op is denied or its row holds a
-- lock or a remembered level, each of which goes to check.sql here). Every op of the batch has the same rule and
-- numbers (`nums`, check.sql's 13 per op) and its own key; the keys are distinct. One statement: no PL/pgSQL
-- unless an op is denied or meets a lock.
--
-- Each op is an INSERT ... ON CONFLICT DO UPDATE of its row, whose SET computes the window in SQL on the row as
-- it is when locked (the latest version: no lost update), and whose WHERE admits; the override in force is read
-- in the same statement. An op not admitted there (over its limit, a lock or lock level on the row, or the
-- cost above the limit in force) leaves its row locked and unchanged (or, when there was none, a new row that
-- holds nothing) and is decided by check.sql in this same statement, on the same time, so a denial is one
-- round trip too and answers exactly as check.sql does.
--
-- Concurrency: the rows are locked in check.sql's order (rule, then sha256 of the key), each batch and each
-- check call acquiring in that order, and check.sql called here only locks rows this statement holds: no
-- deadlock. READ COMMITTED: no serialization failure.
--
-- $1 now_arg   epoch ms, or NULL for the server's clock (clock_timestamp(), read once for the batch)
-- $2 rule      the rule's name
-- $3 keys      per op, the identity as UTF-8 (distinct)
-- $4 nums      check.sql's 13 numbers of the op, shared by the batch
-- Returns      one row: float8[][], per op (in the order of keys) check.sql's reply of one op (the time, 9 numbers)
WITH c AS MATERIALIZED (
  SELECT coalesce($1::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now_ms
), t AS MATERIALIZED (
  SELECT u.ord, u.key, u.kh, c.now_ms, coalesce(x.lim, ($4::float8[])[6]::bigint) AS lim,
    x.lim IS NOT NULL AS overridden,
    CASE WHEN ($4::float8[])[1] = 1 THEN c.now_ms + ($4::float8[])[2]::bigint
      WHEN c.now_ms < ($4::float8[])[7] THEN ($4::float8[])[7]::bigint
      ELSE ($4::float8[])[8]::bigint END AS fresh_end
  FROM c
    CROSS JOIN LATERAL (
      SELECT v.key, v.ord, sha256(v.key) AS kh FROM unnest($3::bytea[]) WITH ORDINALITY AS v(key, ord)
    ) u
    LEFT JOIN @schema@.@overrides@ x
      ON x.rule = $2::text AND x.kh = u.kh AND (x.until_ms IS NULL OR x.until_ms > c.now_ms)
), up AS (
  INSERT INTO @schema@.@keys@ AS k (rule, kh, key, a, b, expires_ms)
    SELECT $2::text, t.kh, t.key,
      CASE WHEN ($4::float8[])[5] <= t.lim THEN ($4::float8[])[5]::bigint END,
      CASE WHEN ($4::float8[])[5] <= t.lim THEN t.fresh_end END,
      CASE WHEN ($4::float8[])[5] <= t.lim THEN t.fresh_end END
    FROM t ORDER BY t.kh
  ON CONFLICT (rule, kh) DO UPDATE SET
    a = CASE WHEN k.expires_ms > (SELECT now_ms FROM c) AND CASE WHEN ($4::float8[])[1] = 1
          THEN k.b > (SELECT now_ms FROM c) ELSE k.b = excluded.b END THEN k.a ELSE 0 END + excluded.a,
    b = CASE WHEN ($4::float8[])[1] = 1 AND k.expires_ms > (SELECT now_ms FROM c) AND k.b > (SELECT now_ms FROM c)
          THEN k.b ELSE excluded.b END,
    xs = NULL,
    expires_ms = CASE WHEN ($4::float8[])[1] = 1 AND k.expires_ms > (SELECT now_ms FROM c)
          AND k.b > (SELECT now_ms FROM c) THEN k.b ELSE excluded.b END
  WHERE excluded.a IS NOT NULL AND k.lock_until IS NULL AND k.forget_ms IS NULL
    AND CASE WHEN k.expires_ms > (SELECT now_ms FROM c) AND CASE WHEN ($4::float8[])[1] = 1
          THEN k.b > (SELECT now_ms FROM c) ELSE k.b = excluded.b END THEN k.a ELSE 0 END + excluded.a
      <= (SELECT t.lim FROM t WHERE t.kh = excluded.kh)
  RETURNING k.kh, k.a, k.b
)
SELECT array_agg(
  CASE WHEN u.a IS NULL THEN @schema@.@check@('check', t.now_ms, ARRAY[$2::text], ARRAY[t.key], $4::float8[])
    ELSE ARRAY[t.now_ms, CASE WHEN t.overridden THEN 9 ELSE 1 END, t.lim, greatest(0, t.lim - u.a),
      u.b - t.now_ms, 0, u.a, u.b, 0, 0]::float8[] END
  ORDER BY t.ord)
FROM t LEFT JOIN up u ON u.kh = t.kh
