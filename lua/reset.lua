-- Clears count, lock and level of one rule for one identity (limiter.reset).
--
-- KEYS[1]     count key: <prefix>:{<identity>}:<rule>
-- KEYS[2]     lock key:  <prefix>:{<identity>}:<rule>:l, value "<untilMs>:<level>:<forgetAtMs>"
-- ARGV[1]     now, epoch ms; '' to read the server's TIME
-- Reply: array of 2 integers: wasLocked (1 when a lock was in force), level of the lock found (0: none),
--   which names the member to remove from the rule's lock index.

local nowMs = clockMs(ARGV[1])
local v = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
if not v then return { 0, 0 } end
local untilMs, level = string.match(v, '^([^:]+):([^:]+):')
local wasLocked = 0
if nowMs < tonumber(untilMs) then wasLocked = 1 end
return { wasLocked, tonumber(level) }
