-- Decides a batch of requests one after the other, each exactly as its own call in that order would:
-- every request is src/stores/memory-store.ts evaluateSync, step for step: phase 1 decides each op (a
-- live lock first), phase 2 consumes all or none (check), always adds (record) or writes nothing
-- (peek); an exceeded enforced lockout rule locks its key and lists the lock in its rule's lock index,
-- in this same call. Requests are independent: one that denies or fails leaves the others as they
-- would be. All keys must hash to one slot: on a Cluster the TypeScript batches per slot, except in
-- the cross-slot form (redis-scripts.ts checkCrossSlot: allow-cross-slot-keys, Redis 7+), where the
-- keys of requests of several slots of one master follow ARGV[1] = their number, and the rest of
-- ARGV as below follows them. There each request's keys share a slot and every key a request writes
-- is read in its phase 1, so a key the node does not serve fails the request before it writes.
--
-- KEYS        per request, per op in order: the op's count key <prefix>:{<identity>}:<rule>, then, only
--             when the op reads its override (protocol.lua readOps: its rule has had one), its override
--             key <prefix>:{<identity>}:<rule>:o (value: overrides.lua overrideValue), then, only
--             when its rule has a lockout (lockout durationMs > 0), its lock key
--             <prefix>:{<identity>}:<rule>:l (value: protocol.lua lockValue) and its rule's lock index
--             (a ZSET, score = untilMs in epoch ms, member protocol.lua lockIndexMember), in the
--             identity's slot on a Cluster
-- ARGV[1]     m, number of distinct ops, then m x the 13 fields of an op (protocol.lua readOps)
-- then        s, number of distinct request shapes, then per shape:
--   now       epoch ms; 'server' (SERVER_TIME) for the server's TIME, read once per call: the requests
--             are simultaneous
--   mode      'check' | 'peek' | 'record'
--   nothing   '1': decide and lock, but consume nothing (a Cluster group after a group that denied); else '0'
--   n         number of ops, followed by the index of each op among the m
-- then        r, number of requests, then per request: the index of its shape among the s, followed by
--             the identity (the limiter's key string) of each of its ops whose rule has a lockout
-- Reply: flat array of integers: the server's time (epoch ms; 0 when no request asked for it), then
--   per request, per op: head = the sum of the Flag values that hold + LEVEL_UNIT x level; remaining
--   (units), resetMs, count (units), receipt; then retryAfterMs (ms) when Flag.RETRY_AFTER_FOLLOWS,
--   lockedUntil (epoch ms) when Flag.LOCKED_UNTIL_FOLLOWS, the limit in force (units) when
--   Flag.OVERRIDDEN (an override decided it; else the op's limit did).
--   A request whose evaluation raised an error has, in place of all this, the error's message (a string).

local protocol, values, algorithms = require('protocol'), require('values'), require('algorithms')
local clockMs, readOps, opIndex = protocol.clockMs, protocol.readOps, protocol.opIndex
local SERVER_TIME = protocol.SERVER_TIME
local num, ttlMs = values.num, values.ttlMs
local byType, loadLive, withCost = algorithms.byType, algorithms.loadLive, algorithms.withCost

-- The bits of a reply head (Flag in src/stores/redis-protocol.ts: the same names and values).
local Flag = {
  ALLOWED = 1, LOCKED = 2, LOCKED_NOW = 4, RETRY_AFTER_FOLLOWS = 8, LOCKED_UNTIL_FOLLOWS = 16, OVERRIDDEN = 32,
}
-- The level counts in multiples of this, above the flags.
local LEVEL_UNIT = 64
-- As locals: read for every result.
local ALLOWED, LOCKED, LOCKED_NOW = Flag.ALLOWED, Flag.LOCKED, Flag.LOCKED_NOW
local RETRY_AFTER_FOLLOWS, LOCKED_UNTIL_FOLLOWS = Flag.RETRY_AFTER_FOLLOWS, Flag.LOCKED_UNTIL_FOLLOWS
local OVERRIDDEN = Flag.OVERRIDDEN

-- The request being decided (upvalues of the helpers below): its ops are its shape's (a copy, in
-- `decided`, when some read an override), its other tables are reused by the next request.
-- `overrides[i]`: the override that decided op i ({ limit, untilMs }) or false; set only when the
-- request's shape has ops that read one (`reads`).
local mode, nowMs, denied
local ops, countKeys, lockKeys, indexKeys, identities, states, results = {}, {}, {}, {}, {}, {}, {}
-- Made by the first request that reads an override: a call without one pays nothing for them.
local decided, overrideKeys, overrides

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
  redis.call('DEL', countKeys[i])
  redis.call('SET', lockKeys[i], protocol.lockValue(untilMs, level, forgetAtMs), 'PX', ttlMs(forgetAtMs, nowMs))
  indexLock(i, untilMs, level)
end

-- Decides the request whose n ops are in ops, countKeys and lockKeys, leaving its results in `results`.
-- `reads`: false, or per op whether it reads its override (in overrideKeys).
local function decide(n, requestMode, consumeNothing, requestNowMs, reads)
  mode, nowMs, denied = requestMode, requestNowMs, consumeNothing
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
      local alg = byType[op.type]
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
      local alg = byType[op.type]
      local consume = mode == 'record' or (not denied and r.allowed)
      if consume and op.cost > 0 then
        alg.save(countKeys[i], alg.apply(states[i], op, nowMs), op, nowMs)
      elseif r.allowed then
        -- Admitted by its own rule but not consumed (another rule denied): report the state as it is.
        local now = alg.evaluate(states[i], withCost(op, 0), nowMs, false)
        r.remaining, r.resetMs, r.count, r.receipt = now.remaining, now.resetMs, now.count, 0
      else
        r.receipt = 0
      end
      if op.lockMs ~= 0 then lockIfExceeded(i, true) end
    end
  end
end

-- firstKey, firstArg: where the keys and the arguments described above start (1, 1 unless cross-slot).
return function(KEYS, ARGV, firstKey, firstArg)
  local distinct, at = readOps(ARGV, firstArg)
  local shapes = {}
  local shapeCount = ARGV[at] + 0
  at = at + 1
  for j = 1, shapeCount do
    local n = ARGV[at + 3] + 0
    local shapeOps, locks, reads = {}, {}, false
    for i = 1, n do
      local op = distinct[opIndex(ARGV[at + 3 + i])]
      shapeOps[i], locks[i] = op, op.lockMs ~= 0
      if op.readsOverride then
        if not reads then
          reads = {}
          for k = 1, n do reads[k] = false end
        end
        reads[i] = true
      end
    end
    local fixedNowMs = false
    if ARGV[at] ~= SERVER_TIME then fixedNowMs = ARGV[at] + 0 end
    shapes[j] = {
      nowMs = fixedNowMs, mode = ARGV[at + 1], consumeNothing = ARGV[at + 2] == '1', n = n, ops = shapeOps,
      locks = locks, reads = reads,
    }
    at = at + 4 + n
  end

  local serverMs = nil
  local reply = { 0 }
  local b = 1
  local keyAt = firstKey
  local requests = ARGV[at] + 0
  at = at + 1
  for _ = 1, requests do
    local shape = shapes[ARGV[at] + 0]
    at = at + 1
    local requestNowMs = shape.nowMs
    if not requestNowMs then
      if serverMs == nil then
        serverMs = clockMs(SERVER_TIME)
        reply[1] = serverMs
      end
      requestNowMs = serverMs
    end
    local n, locks, reads = shape.n, shape.locks, shape.reads
    ops = shape.ops
    if reads then
      if decided == nil then decided, overrideKeys, overrides = {}, {}, {} end
      -- The shape's ops stay as sent: an override changes this request's copy.
      for i = 1, n do decided[i] = ops[i] end
      ops = decided
    end
    for i = 1, n do
      countKeys[i] = KEYS[keyAt]
      keyAt = keyAt + 1
      if reads and reads[i] then
        overrideKeys[i] = KEYS[keyAt]
        keyAt = keyAt + 1
      end
      if locks[i] then
        lockKeys[i], indexKeys[i], identities[i] = KEYS[keyAt], KEYS[keyAt + 1], ARGV[at]
        keyAt = keyAt + 2
        at = at + 1
      else
        lockKeys[i] = false
      end
    end
    local ok, err = pcall(decide, n, shape.mode, shape.consumeNothing, requestNowMs, reads)
    if ok then
      -- The results, as the header says.
      for i = 1, n do
        local r = results[i]
        local retryAfterMs, lockedUntil = r.retryAfterMs, r.lockedUntil or 0
        local override = reads and overrides[i]
        local head = LEVEL_UNIT * r.level
        if override then head = head + OVERRIDDEN end
        if r.allowed then head = head + ALLOWED end
        if r.locked then head = head + LOCKED end
        if r.lockedNow then head = head + LOCKED_NOW end
        if retryAfterMs ~= 0 then head = head + RETRY_AFTER_FOLLOWS end
        if lockedUntil ~= 0 then head = head + LOCKED_UNTIL_FOLLOWS end
        reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] =
          head, r.remaining, r.resetMs, r.count, r.receipt
        b = b + 5
        if retryAfterMs ~= 0 then
          b = b + 1
          reply[b] = retryAfterMs
        end
        if lockedUntil ~= 0 then
          b = b + 1
          reply[b] = lockedUntil
        end
        if override then
          b = b + 1
          reply[b] = override.limit
        end
      end
    else
      -- redis.call raises a table { err = message } in Redis 7, a string before.
      if type(err) == 'table' then err = err.err end
      b = b + 1
      reply[b] = tostring(err)
    end
  end
  return reply
end
