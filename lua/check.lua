-- Decides every op of one request together (src/stores/memory-store.ts evaluateSync, step for step):
-- phase 1 decides each op (a live lock first), phase 2 consumes all or none (check), always adds
-- (record) or writes nothing (peek); an exceeded enforced lockout rule locks its key.
-- All keys must hash to one slot: the TypeScript sends one call per identity slot.
--
-- KEYS[2i-1]  count key of op i: <prefix>:{<identity>}:<rule>
-- KEYS[2i]    lock key of op i:  <prefix>:{<identity>}:<rule>:l, value "<untilMs>:<level>:<forgetAtMs>"
-- ARGV[1]     mode: 'check' | 'peek' | 'record'
-- ARGV[2]     '1': decide and lock, but consume nothing (a Cluster group after a group that denied); else '0'
-- ARGV[3]     now, epoch ms; '' to read the server's TIME
-- ARGV[4]     n, number of ops
-- ARGV[5 + 13(i-1) .. 17 + 13(i-1)]  op i, the 13 fields of readOp in prelude.lua
-- Reply: flat array of integers: nowMs (epoch ms), then 10 per op: allowed (0/1), remaining (units),
--   resetMs, retryAfterMs, locked (0/1), count (units), receipt, level, lockedUntil (epoch ms, 0 when
--   not locked), lockedNow (0/1: this call placed the lock).

local mode = ARGV[1]
local nowMs = clockMs(ARGV[3])
local n = tonumber(ARGV[4])
local denied = ARGV[2] == '1'
local ops, states, results = {}, {}, {}

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
  local untilMs, level, forgetAtMs = string.match(v, '^([^:]+):([^:]+):([^:]+)$')
  local lock = { untilMs = tonumber(untilMs), level = tonumber(level), forgetAtMs = tonumber(forgetAtMs) }
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
  redis.call('DEL', op.key)
  redis.call('SET', op.lockKey, num(untilMs) .. ':' .. num(level) .. ':' .. num(forgetAtMs), 'PX', ttlMs(forgetAtMs, nowMs))
end

-- Phase 1: decide every op, writing nothing.
for i = 1, n do
  local op = readOp(5 + OP_FIELDS * (i - 1))
  op.key, op.lockKey = KEYS[2 * i - 1], KEYS[2 * i]
  ops[i] = op
  local lock = readLock(op.lockKey)
  local level = 0
  if lock ~= nil then level = lock.level end
  local r
  if lock ~= nil and nowMs < lock.untilMs then
    r = lockedResult(lock.untilMs - nowMs, level, lock.untilMs, false)
  else
    local alg = ALG[op.type]
    states[i] = loadLive(alg, op.key, op, nowMs)
    r = alg.evaluate(states[i], op, nowMs, mode == 'record')
    r.locked, r.level, r.lockedUntil, r.lockedNow = false, level, 0, false
  end
  if not r.allowed and not op.dryRun then denied = true end
  results[i] = r
end

if mode == 'peek' then
  for i = 1, n do lockIfExceeded(i, false) end
else
  -- Phase 2: all consume, or none does; exceeded lockout rules lock.
  for i = 1, n do
    local op, r = ops[i], results[i]
    if not r.locked then
      local alg = ALG[op.type]
      local consume = mode == 'record' or (not denied and r.allowed)
      if consume and op.cost > 0 then
        alg.save(op.key, alg.apply(states[i], op, nowMs), op, nowMs)
      elseif r.allowed then
        -- Admitted by its own rule but not consumed (another rule denied): report the state as it is.
        local now = alg.evaluate(states[i], withCost(op, 0), nowMs, false)
        r.remaining, r.resetMs, r.count, r.receipt = now.remaining, now.resetMs, now.count, 0
      else
        r.receipt = 0
      end
      lockIfExceeded(i, true)
    end
  end
end

local function flag(b)
  if b then return 1 end
  return 0
end

local reply = { nowMs }
for i = 1, n do
  local r = results[i]
  local base = #reply
  reply[base + 1] = flag(r.allowed)
  reply[base + 2] = r.remaining
  reply[base + 3] = r.resetMs
  reply[base + 4] = r.retryAfterMs
  reply[base + 5] = flag(r.locked)
  reply[base + 6] = r.count
  reply[base + 7] = r.receipt
  reply[base + 8] = r.level
  reply[base + 9] = r.lockedUntil
  reply[base + 10] = flag(r.lockedNow)
end
return reply
