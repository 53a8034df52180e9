-- The full decider of check.lua: one request of any shape (modes check, peek and record, locks,
-- overrides, a Cluster group that consumes nothing), step for step src/stores/memory/memory-store.ts
-- evaluateSync: phase 1 decides each op (a live lock first), phase 2 consumes all or none (check),
-- always adds (record) or writes nothing (peek); an exceeded enforced lockout rule locks its key and
-- lists the lock in its rule's lock index, in this same call.
--
-- KEYS        none of its own: the request's keys come from check.lua in decide-plain.lua's tables (count
--             key, lock key <prefix>:{<identity>}:<rule>:l, the rule's lock index ZSET)
-- ARGV        none
-- Returns     decide(ops, n, mode, consumeNothing, nowMs, reads, overrideKeys, overrides): nothing;
--             each op's result in decide-plain.lua's `results` (remaining and count in units, resetMs,
--             retryAfterMs in ms, lockedUntil in epoch ms, level); overrides[i], the override that
--             decided op i ({ limit in units, untilMs in epoch ms }) or false, when `reads`.

local protocol, algorithms, plain = require('protocol'), require('algorithms'), require('decide-plain')
local num, ttlMs = protocol.num, protocol.ttlMs
local loadLive, algOf, drop = algorithms.loadLive, algorithms.algOf, algorithms.drop
local countKeys, lockKeys, indexKeys, identities = plain.countKeys, plain.lockKeys, plain.indexKeys, plain.identities
local states, results, unconsumed = plain.states, plain.results, plain.unconsumed

-- The request being decided (set by decide).
local ops, mode, nowMs, denied

local function lockedResult(leftMs, level, untilMs, lockedNow)
  return {
    allowed = false, remaining = 0, resetMs = leftMs, retryAfterMs = leftMs, locked = true, count = 0,
    receipt = 0, level = level, lockedUntil = untilMs, lockedNow = lockedNow,
  }
end

-- The lock of a key, or nil once its level is forgotten.
local function readLock(key)
  local v = redis.call('GET', key)
  if not v then return nil end
  local lock = protocol.readLockValue(v)
  if lock.forgetAtMs <= nowMs then return nil end
  return lock
end

-- lockDurationMs of memory-store.ts: duration x escalate^(level-1), capped.
local function lockDurationMs(op, level)
  local ms = op.lockMs * op.escalate ^ (level - 1)
  local capped = ms
  if op.maxLockMs > 0 then capped = math.min(ms, op.maxLockMs) end
  return math.ceil(math.min(capped, 1e13))
end

-- Lists a lock just placed in its rule's lock index, drops the locks that have ended and keeps the
-- index alive exactly as long as its longest lock.
local function indexLock(i, untilMs, level)
  local key = indexKeys[i]
  redis.call('ZADD', key, num(untilMs), protocol.lockIndexMember(level, identities[i]))
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(nowMs))
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, ttlMs(tonumber(last[2]), nowMs))
end

-- An enforced lockout rule whose own verdict is a denial locks its key (and forgets its count).
local function lockIfExceeded(i, write)
  local op, r = ops[i], results[i]
  if op.lockMs == 0 or op.dryRun or r.allowed or r.locked then return end
  local level = r.level + 1
  local durationMs = lockDurationMs(op, level)
  local untilMs = nowMs + durationMs
  results[i] = lockedResult(durationMs, level, untilMs, write)
  if not write then return end
  local forgetAtMs = untilMs + op.forgetAfterMs
  drop(op.alg or algOf(op), countKeys[i], op, nowMs)
  redis.call('SET', lockKeys[i], protocol.lockValue(untilMs, level, forgetAtMs), 'PX', ttlMs(forgetAtMs, nowMs))
  indexLock(i, untilMs, level)
end

-- Decides the request whose n ops are `requestOps` (their keys in decide-plain.lua's tables). `reads`:
-- false, or per op whether it reads its override (in overrideKeys); `overrides` receives them.
local function decide(requestOps, n, requestMode, consumeNothing, requestNowMs, reads, overrideKeys, overrides)
  ops, mode, nowMs, denied = requestOps, requestMode, requestNowMs, consumeNothing
  -- The ops that read their override are decided at its limit (the only cost of overrides, paid by
  -- rules that have had one); the module is built by the first request that needs it.
  if reads then require('overrides').apply(n, reads, ops, overrideKeys, overrides, nowMs) end

  -- Phase 1: decide every op, writing nothing. Rules without a lockout have no lock key to read.
  for i = 1, n do
    local op = ops[i]
    local lock = nil
    if lockKeys[i] then lock = readLock(lockKeys[i]) end
    local level = 0
    if lock ~= nil then level = lock.level end
    local r
    if lock ~= nil and nowMs < lock.untilMs then
      r = lockedResult(lock.untilMs - nowMs, level, lock.untilMs, false)
      states[i] = nil
    else
      local alg = op.alg or algOf(op)
      states[i] = loadLive(alg, countKeys[i], op, nowMs)
      r = alg.evaluate(states[i], op, nowMs, mode == 'record')
      -- Only `level` is added: locked, lockedUntil and lockedNow read as unset (false, 0, false).
      r.level = level
    end
    if not r.allowed and not op.dryRun then denied = true end
    results[i] = r
  end

  if mode == 'peek' then
    for i = 1, n do lockIfExceeded(i, false) end
    return
  end
  -- Phase 2: all consume, or none does; exceeded lockout rules lock.
  for i = 1, n do
    local op, r = ops[i], results[i]
    if not r.locked then
      local alg = op.alg or algOf(op)
      local consume = mode == 'record' or (not denied and r.allowed)
      if consume and op.cost > 0 then
        alg.save(countKeys[i], alg.apply(states[i], op, nowMs), op, nowMs)
      else
        -- Not consumed (a rule denied, or it costs nothing): its state as it is.
        unconsumed(i, op, alg, nowMs)
      end
      if op.lockMs ~= 0 then lockIfExceeded(i, true) end
    end
  end
end

return decide
