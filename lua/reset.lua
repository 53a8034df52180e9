-- Clears count, lock and level of one rule for one identity (limiter.reset), and takes the lock off its
-- rule's lock index, in one call. A concurrency key loses its holders and keeps its last slot id.
--
-- KEYS[1]     count key: <prefix>:{<identity>}:<rule>
-- KEYS[2]     lock key:  <prefix>:{<identity>}:<rule>:l (value: protocol.lua lockValue)
-- KEYS[3]     the rule's lock index (ZSET, score = untilMs, member protocol.lua lockIndexMember), in
--             the identity's slot on a Cluster
-- ARGV[1]     now, epoch ms; 'server' for the server's TIME
-- ARGV[2]     the identity (the limiter's key string)
-- ARGV[3]     when the rule is grouped (its state one of the identity record's, identity-record.lua): the rule's
--             name, and KEYS[1] is the identity record <prefix>:{<identity>}; else absent
-- ARGV[4]     with ARGV[3]: 'clear' takes the rule's state only (store.clear), lock and level stay
-- Reply: array of 2 integers: wasLocked (1 when a lock was in force, else 0), level of the lock found
--   (0: none).

local protocol = require('protocol')

return function(KEYS, ARGV)
  local nowMs = protocol.clockMs(ARGV[1])
  local field = ARGV[3]
  if field then
    -- The rule's state alone: the identity's other rules keep theirs.
    local identityRecord = require('identity-record')
    local found = identityRecord.read(KEYS[1])
    if found and found.states[field] then
      found.states[field] = nil
      identityRecord.write(KEYS[1], found, nowMs)
    end
    -- `clear`: the count only.
    if ARGV[4] == 'clear' then return { 0, 0 } end
  end
  local v = redis.call('GET', KEYS[2])
  if field then
    redis.call('DEL', KEYS[2])
  else
    -- Other windows keep a string or another set there: ZSCORE fails or finds nothing.
    local seq = redis.pcall('ZSCORE', KEYS[1], '#')
    if type(seq) == 'string' then
      -- A concurrency key (lua/concurrency.lua): its holders go, the last slot id stays, so that no id
      -- is handed out twice (a holder released after the reset frees nothing).
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. seq)
      redis.call('DEL', KEYS[2])
    else
      redis.call('DEL', KEYS[1], KEYS[2])
    end
  end
  if not v then return { 0, 0 } end
  local lock = protocol.readLockValue(v)
  redis.call('ZREM', KEYS[3], protocol.lockIndexMember(lock.level, ARGV[2]))
  local wasLocked = 0
  if nowMs < lock.untilMs then wasLocked = 1 end
  return { wasLocked, lock.level }
end
