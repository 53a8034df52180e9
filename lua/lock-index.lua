-- Records placed locks in a rule's lock index (limiter.locked lists it; never KEYS or SCAN), drops
-- the locks that have ended and keeps the index alive exactly as long as its longest lock.
-- On a Cluster the index lives in its own slot, so it is written by this separate call.
--
-- KEYS[1]     lock index of a rule: <prefix>:locks:{<rule>}, a ZSET: score = untilMs (epoch ms),
--             member = "<level>:<identity>"
-- ARGV[1]     now, epoch ms; '' to read the server's TIME
-- ARGV[2k], ARGV[2k+1]  (k >= 1) untilMs (epoch ms) and member of each lock placed
-- Reply: integer, number of locks in the index.

local key = KEYS[1]
local nowMs = clockMs(ARGV[1])
for k = 2, #ARGV, 2 do redis.call('ZADD', key, ARGV[k], ARGV[k + 1]) end
redis.call('ZREMRANGEBYSCORE', key, '-inf', num(nowMs))
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if #last == 0 then return 0 end
redis.call('PEXPIRE', key, ttlMs(tonumber(last[2]), nowMs))
return redis.call('ZCARD', key)
