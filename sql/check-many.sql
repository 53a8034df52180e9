-- Decides a batch of requests of one op each that check-batch.sql does not take (a sliding, sliding-log,
-- token-bucket or GCRA rule; src/stores/postgres/batch.ts): one check.sql call per request, in one statement,
-- so that the requests waiting share its round trip, its commit and its protocol. Each call decides its own
-- request, all or nothing, as alone.
--
-- Concurrency: the calls run in check.sql's lock order (rule, then sha256 of the key) and each locks only its
-- own row, so the statement acquires its row locks in that one order, as a call of several ops does: no
-- deadlock with another batch or call. The (rule, key) pairs are distinct.
--
-- $1 now_arg   epoch ms, or NULL for the server's clock (clock_timestamp(), read once for the batch)
-- $2 rules     per op, the rule's name
-- $3 keys      per op, the identity as UTF-8
-- $4 nums      per op check.sql's 13 numbers
-- Returns      one row: float8[][], per op (in the order given) check.sql's reply of one op (the time, 9 numbers)
WITH c AS MATERIALIZED (
  SELECT coalesce($1::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now_ms
), o AS MATERIALIZED (
  SELECT u.rule, u.key, u.ord::integer AS ord FROM unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS u(rule, key, ord)
  ORDER BY u.rule COLLATE "C", sha256(u.key)
), d AS MATERIALIZED (
  SELECT o.ord, @schema@.@check@('check', c.now_ms, ARRAY[o.rule], ARRAY[o.key],
    ($4::float8[])[13 * o.ord - 12 : 13 * o.ord]) AS r
  FROM o CROSS JOIN c
)
SELECT array_agg(d.r ORDER BY d.ord) FROM d
