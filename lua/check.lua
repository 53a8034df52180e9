-- Decides a batch of requests one after the other, each exactly as its own call in that order would:
-- every request is src/stores/memory/memory-store.ts evaluateSync, step for step: phase 1 decides each op (a
-- live lock first), phase 2 consumes all or none (check), always adds (record) or writes nothing
-- (peek); an exceeded enforced lockout rule locks its key and lists the lock in its rule's lock index,
-- in this same call. Requests are independent: one that denies or fails leaves the others as they
-- would be. All keys must hash to one slot: on a Cluster the TypeScript batches per slot, except in
-- the cross-slot form (redis-scripts.ts checkCrossSlot: allow-cross-slot-keys, Redis 7+), where the
-- keys of requests of several slots of one master follow ARGV[1] = their number, and the rest of
-- ARGV as below follows them. There each request's keys share a slot and every key a request writes
-- is read in its phase 1, so a key the node does not serve fails the request before it writes.
--
-- KEYS        per request, per op in order: the op's count key <prefix>:{<identity>}:<rule> (the
--             identity's record <prefix>:{<identity>} when the op's rule is grouped: protocol.lua
--             readOp's field names its state there, record.lua; not sent again for an op marked '^' in
--             the shape: the record of the op before), then, only
--             when the op reads its override (protocol.lua readOp: its rule has had one), its override
--             key <prefix>:{<identity>}:<rule>:o (value: overrides.lua overrideValue), then, only
--             when its rule has a lockout (lockout durationMs > 0), its lock key
--             <prefix>:{<identity>}:<rule>:l (value: protocol.lua lockValue) and its rule's lock index
--             (a ZSET, score = untilMs in epoch ms, member protocol.lua lockIndexMember), in the
--             identity's slot on a Cluster
-- ARGV        when every request has the same shape (the usual call): now, shape, then per request the
--             identity (the limiter's key string) of each of its ops whose rule has a lockout; the
--             requests are as many as their keys make. Else: 'shapes', s (the number of distinct
--             shapes), s x (now, shape), r (the number of requests), then per request the index of its
--             shape among the s, followed by those identities.
--   now       epoch ms; 'server' (SERVER_TIME) for the server's TIME, read once per call: the requests
--             are simultaneous
--   shape     text: mode ('check' | 'peek' | 'record'), '|', nothing ('1': decide and lock, but consume
--             nothing (a Cluster group after a group that denied); else '0'), then per op '|' and the
--             op's text (protocol.lua readOp), after '^' when the op is grouped and its identity the
--             op's before (a grouped rule too): its record key is that op's; read once and kept
--             (protocol.lua memo)
-- Reply: flat array of integers: the server's time (epoch ms; 0 when no request asked for it), then
--   per request, per op: head = the sum of the Flag values that hold + LEVEL_UNIT x level; then, unless
--   Flag.FRESH, remaining (units) unless Flag.REMAINING_DERIVED, resetMs, count (units), receipt unless
--   Flag.RECEIPT_DERIVED; then retryAfterMs (ms) when Flag.RETRY_AFTER_FOLLOWS, lockedUntil (epoch ms)
--   when Flag.LOCKED_UNTIL_FOLLOWS, the limit in force (units) when Flag.OVERRIDDEN (an override decided
--   it; else the op's limit did). A derived figure is left out because the client computes it exactly:
--   remaining = max(0, limit in force - count), receipt = the request's time + resetMs (a window's end).
--   A concurrency op's receipt that is sent, when not 0 and the request's time is a whole ms, is its
--   slot id less the request's time x 1024 (SLOT_IDS_PER_MS): a few digits rather than 16.
--   Every integer a reply element holds costs the client more to read than these few comparisons here.
--   Flag.FRESH alone: the op's key held no state, and the op was counted: its result is its
--   algorithm's verdict on an empty state at the request's time (the TypeScript twin's, which the
--   parity test holds equal), and nothing else follows.
--   A request whose evaluation raised an error has, in place of all this, the error's message (a string).
--
-- Requests of a plain shape (mode check, consuming, no lockout, no override: most requests) take a
-- path of their own (decidePlain): the same verdicts without the lock and override steps. There a
-- key whose state is one string is written first, optimistically: `SET key <fresh state> NX GET PX`
-- creates it when it was empty (the fresh state is encoded once per op and call: every new key of the
-- call gets the same value), or returns what it held, written nothing; a request that then denies
-- deletes the keys it created, which were empty. Needs Redis 7 (SET NX GET); before, GET then SET.
-- A plain request whose ops all keep their state in one identity's record (rules its limiter grouped:
-- their "count key" in KEYS is the record <prefix>:{<identity>}, the field the rule's name) is decided
-- by decideGrouped: one SET NX GET PX of the identity's record (record.lua) for a new identity, else
-- that (or a GET) and one SET PX.

local protocol, values, algorithms = require('protocol'), require('values'), require('algorithms')
local clockMs, readOp, memo = protocol.clockMs, protocol.readOp, protocol.memo
local SERVER_TIME = protocol.SERVER_TIME
-- ARGV[1] of a call whose requests have several shapes.
local SHAPES = 'shapes'
local num, ttlMs = values.num, values.ttlMs
local byType, loadLive, withCost = algorithms.byType, algorithms.loadLive, algorithms.withCost
local freshAdmits, readOrCreate = algorithms.freshAdmits, algorithms.readOrCreate
local algOf, drop = algorithms.algOf, algorithms.drop
local record = require('record')
local intText, concat = record.intText, table.concat
-- SET with both NX and GET: Redis 7.0 and later (algorithms.lua readOrCreate uses GET then SET before).
local SET_NX_GET = algorithms.SET_NX_GET

-- The bits of a reply head (Flag in src/stores/redis/replies.ts: the same names and values).
local Flag = {
  ALLOWED = 1, LOCKED = 2, LOCKED_NOW = 4, RETRY_AFTER_FOLLOWS = 8, LOCKED_UNTIL_FOLLOWS = 16, OVERRIDDEN = 32,
  FRESH = 64, REMAINING_DERIVED = 128, RECEIPT_DERIVED = 256,
}
-- The level counts in multiples of this, above the flags.
local LEVEL_UNIT = 512
-- Slot ids per ms (concurrency.lua, src/algorithms/concurrency.ts).
local SLOT_IDS_PER_MS = 1024
-- As locals: read for every result.
local ALLOWED, LOCKED, LOCKED_NOW = Flag.ALLOWED, Flag.LOCKED, Flag.LOCKED_NOW
local RETRY_AFTER_FOLLOWS, LOCKED_UNTIL_FOLLOWS = Flag.RETRY_AFTER_FOLLOWS, Flag.LOCKED_UNTIL_FOLLOWS
local OVERRIDDEN, FRESH = Flag.OVERRIDDEN, Flag.FRESH
local REMAINING_DERIVED, RECEIPT_DERIVED = Flag.REMAINING_DERIVED, Flag.RECEIPT_DERIVED

-- The request being decided (upvalues of the helpers below): its ops are its shape's (a copy, in
-- `decided`, when some read an override), its other tables are reused by the next request.
-- `overrides[i]`: the override that decided op i ({ limit, untilMs }) or false; set only when the
-- request's shape has ops that read one (`reads`).
local mode, nowMs, denied
local ops, countKeys, lockKeys, indexKeys, identities, states, results = {}, {}, {}, {}, {}, {}, {}
-- decidePlain: per op, whether it created its key (its result is then its fresh state's), and what
-- createAll's SET NX GET found in a key it could not create (its value, or an error).
local created, held = {}, {}
-- In `held`: the key held no live state.
local NONE = {}
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
  drop(op.alg or algOf(op), countKeys[i], op, nowMs)
  redis.call('SET', lockKeys[i], protocol.lockValue(untilMs, level, forgetAtMs), 'PX', ttlMs(forgetAtMs, nowMs))
  indexLock(i, untilMs, level)
end

-- Phase 2 for op i of a request that does not consume it (it denied, another rule did, or it costs
-- nothing): its result reports its state as it is, nothing received.
local function unconsumed(i, op, alg)
  local r = results[i]
  if r.allowed then
    local now = alg.evaluate(states[i], withCost(op, 0), nowMs, false)
    r.remaining, r.resetMs, r.count, r.receipt = now.remaining, now.resetMs, now.count, 0
  else
    r.receipt = 0
  end
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
        unconsumed(i, op, alg)
      end
      if op.lockMs ~= 0 then lockIfExceeded(i, true) end
    end
  end
end

-- Phase 2 for op i that created its state (created[i]) in a request another rule denied: the state it
-- made is taken back by the caller; its result reports the empty state.
local function uncreated(i, op, alg)
  created[i] = false
  local now = alg.evaluate(nil, withCost(op, 0), nowMs, false)
  now.receipt, now.level = 0, 0
  results[i] = now
end

-- Phase 1 of decidePlain and decideGrouped for op i on its live state (nil: none), not created: its
-- result (no lock level), kept with the state; a denial (not a dry run) denies the request.
local function evaluated(i, op, alg, state)
  local r = alg.evaluate(state, op, nowMs, false)
  r.level = 0
  if not r.allowed and not op.dryRun then denied = true end
  states[i], results[i] = state, r
end

-- decide() for a request of a plain shape (see the header): `optimistic`, its count keys are distinct
-- (and SET NX GET is there, for string states). Results in `results`, or created[i] for an op that
-- created its key.
local function decidePlain(n, requestNowMs, optimistic)
  nowMs, denied = requestNowMs, false
  -- Phase 1: decide every op; only keys that were empty are written (created).
  for i = 1, n do
    local op, key = ops[i], countKeys[i]
    local alg = op.alg or algOf(op)
    local state
    local h = held[i]
    if created[i] then
      -- Created by the fast loop (createAll).
      state = true
    elseif h ~= nil then
      -- What a fast loop found: the value SET NX GET returned, or the state readOrCreate read (false:
      -- none), or an error.
      held[i] = nil
      if type(h) == 'string' then
        state = alg.decode(h)
        if alg.expiresAt(state, op) <= nowMs then state = nil end
      elseif h == NONE then
        state = nil
      elseif h.err then
        error(h)
      else
        state = h
      end
    elseif optimistic and op.cost > 0 and freshAdmits(op, alg, nowMs) then
      state = readOrCreate(op, alg, key, nowMs)
    else
      state = loadLive(alg, key, op, nowMs)
    end
    if state == true then
      created[i] = true
    else
      evaluated(i, op, alg, state)
    end
  end
  -- Phase 2: all consume, or none does (a created key is deleted: it was empty).
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    if created[i] then
      if denied then
        drop(alg, countKeys[i], op, nowMs)
        uncreated(i, op, alg)
      end
    elseif not denied and results[i].allowed and op.cost > 0 then
      alg.save(countKeys[i], alg.apply(states[i], op, nowMs), op, nowMs)
    else
      unconsumed(i, op, alg)
    end
  end
end

-- The record a request of `shape` makes on a new identity at nowMs when every op admits on an empty
-- state: its value (record.lua) and TTL, kept on the shape for the time it was made for; else false.
-- An identity alone in a call pays this once per call: its pieces are kept on the shape
-- (recordParts: '|<rule>=' per op), the header formatted by record.intText.
local function freshRecord(shape, nowMs)
  if shape.recordAtMs == nowMs then return shape.recordValue, shape.recordTtl end
  shape.recordAtMs = nowMs
  local n, shapeOps, parts = shape.n, shape.ops, shape.recordParts
  local ttl, ttlText = 0, nil
  for i = 1, n do
    local op = shapeOps[i]
    if not (SET_NX_GET and op.cost > 0 and freshAdmits(op, op.alg or algOf(op), nowMs)) then
      shape.recordValue = false
      return false
    end
    local keep = op.freshTtl
    -- A window that starts now lives its size, sent as text (fixed.lua): no text to read.
    local keepMs
    if keep == op.sizeMsText then keepMs = op.sizeMs else keepMs = keep + 0 end
    if keepMs > ttl then ttl, ttlText = keepMs, keep end
    parts[2 * i + 1] = op.freshValue
  end
  parts[1] = intText(nowMs + ttl)
  shape.recordValue, shape.recordTtl = concat(parts, '', 1, 2 * n + 1), ttlText
  return shape.recordValue, ttlText
end

-- decidePlain for a request whose ops all keep their state in one identity's record (their rules are
-- grouped: protocol.lua readOp's field; record.lua), its key countKeys[1]: the same verdicts, with one
-- command to read the record and one to write it. When every op admits on an empty state, the record
-- they would make together is written first, optimistically (`SET key <record> NX GET PX`, encoded
-- once per shape and time), as createAll does for keys of their own: an identity's first request is
-- one command. Else the record is read (that SET NX GET, or GET), every op decided on its state, and,
-- when the request consumes, the record written back once with the states it changed (SET PX: its
-- TTL the latest of its states' ends). A denial writes nothing. Results in `results`, or created[i] for
-- an op that consumed on an empty state (its result is its fresh state's).
local function decideGrouped(n, requestNowMs, shape)
  nowMs, denied = requestNowMs, false
  local key = countKeys[1]
  local old
  local fresh, freshTtl = freshRecord(shape, nowMs)
  if fresh then
    old = redis.call('SET', key, fresh, 'NX', 'GET', 'PX', freshTtl)
    if not old then
      for i = 1, n do created[i] = true end
      return
    end
  else
    old = redis.call('GET', key)
  end
  local found = record.live(record.parse(old), nowMs)
  local states_ = found.states
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    local state = nil
    local v = states_[op.field]
    if v then
      state = alg.decode(v)
      if alg.expiresAt(state, op) <= nowMs then state = nil end
    end
    if state == nil and op.cost > 0 and freshAdmits(op, alg, nowMs) then
      -- Admitted on an empty state: its result is its fresh state's (no table made for it).
      created[i] = true
    else
      evaluated(i, op, alg, state)
    end
  end
  local writes = false
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    if created[i] then
      -- Nothing was written for it yet.
      if denied then
        uncreated(i, op, alg)
      else
        record.put(found, op.field, op.freshValue, op.freshTtl, nowMs)
        writes = true
      end
    elseif not denied and results[i].allowed and op.cost > 0 then
      local value, ttl = alg.recordEncode(alg.apply(states[i], op, nowMs), op, nowMs)
      record.put(found, op.field, value, ttl, nowMs)
      writes = true
    else
      unconsumed(i, op, alg)
    end
  end
  if writes then record.write(key, found, nowMs) end
end

-- Whether the request's n count keys are one key (the ops of one identity's hash).
local function oneKey(n)
  local key = countKeys[1]
  for i = 2, n do
    if countKeys[i] ~= key then return false end
  end
  return true
end

-- A request shape from its text (see the header): { mode, consumeNothing, n, ops, locks, reads, plain,
-- keys }; `keys`: how many KEYS each request of the shape has.
-- The first byte of an op's part in a shape that shares the record of the op before it.
local CARET = string.byte('^')

local readShape = memo(function(text)
  local mode, nothing
  local n, shapeOps, locks, reads, keys, same = 0, {}, {}, false, 0, false
  -- Per op its rule's name when every op's state is in one identity's record (decideGrouped), else false.
  local fields = {}
  for part in string.gmatch(text, '[^|]+') do
    if mode == nil then
      mode = part
    elseif nothing == nil then
      nothing = part
    else
      n = n + 1
      -- '^': the op's state is in the record of the op before (same identity): its key is not sent again.
      if string.byte(part, 1) == CARET then
        part = string.sub(part, 2)
        if not same then
          same = {}
          for k = 1, n - 1 do same[k] = false end
        end
        same[n] = true
      elseif same then
        same[n] = false
      end
      local op = readOp(part)
      shapeOps[n], locks[n] = op, op.lockMs ~= 0
      -- Every op in the record, each rule once.
      if fields then
        for k = 1, n - 1 do
          if fields[k] == op.field then fields = false end
        end
      end
      if fields and op.field then fields[n] = op.field else fields = false end
      if not (same and same[n]) then keys = keys + 1 end
      if locks[n] then keys = keys + 2 end
      if op.readsOverride then
        keys = keys + 1
        if not reads then
          reads = {}
          for k = 1, n do reads[k] = false end
        end
        reads[n] = true
      elseif reads then
        reads[n] = false
      end
    end
  end
  local plain = mode == 'check' and nothing == '0' and not reads
  for i = 1, n do
    if locks[i] then plain = false end
  end
  if n == 0 then fields = false end
  -- freshRecord's pieces: the header, then per op '|<rule>=' and its fresh state.
  local recordParts = false
  if fields then
    recordParts = {}
    for i = 1, n do recordParts[2 * i] = '|' .. fields[i] .. '=' end
  end
  return {
    mode = mode, consumeNothing = nothing == '1', n = n, ops = shapeOps, locks = locks, reads = reads,
    plain = plain, keys = keys, fields = fields, recordParts = recordParts, same = same,
  }
end)

-- Whether the request's n count keys are distinct (a key written optimistically is read by no other op).
local function distinctKeys(n)
  for i = 2, n do
    for k = 1, i - 1 do
      if countKeys[i] == countKeys[k] then return false end
    end
  end
  return true
end

-- Appends the result r of an op whose limit was `limit` (an override's when it decided) at requestNowMs
-- to the reply at b (see the header); returns the new end. A figure is derived only from integers: the
-- reply carries integers, and the client must compute from what it reads exactly what was left out.
local function put(reply, b, r, override, limit, requestNowMs, slotIds)
  local retryAfterMs, lockedUntil = r.retryAfterMs, r.lockedUntil or 0
  local remaining, resetMs, count, receipt = r.remaining, r.resetMs, r.count, r.receipt
  local head = LEVEL_UNIT * r.level
  if override then
    head = head + OVERRIDDEN
    limit = override.limit
  end
  if r.allowed then head = head + ALLOWED end
  if r.locked then head = head + LOCKED end
  if r.lockedNow then head = head + LOCKED_NOW end
  if retryAfterMs ~= 0 then head = head + RETRY_AFTER_FOLLOWS end
  if lockedUntil ~= 0 then head = head + LOCKED_UNTIL_FOLLOWS end
  local derivedRemaining = count % 1 == 0 and remaining == math.max(0, limit - count)
  local derivedReceipt = resetMs % 1 == 0 and receipt == requestNowMs + resetMs
  if derivedRemaining then head = head + REMAINING_DERIVED end
  if derivedReceipt then head = head + RECEIPT_DERIVED end
  b = b + 1
  reply[b] = head
  if not derivedRemaining then
    b = b + 1
    reply[b] = remaining
  end
  reply[b + 1], reply[b + 2] = resetMs, count
  b = b + 2
  if not derivedReceipt then
    -- A slot id (nowMs x 1024 + n, 16 digits) as its distance from the request's first id: a few digits.
    if slotIds and receipt ~= 0 and requestNowMs % 1 == 0 then receipt = receipt - requestNowMs * SLOT_IDS_PER_MS end
    b = b + 1
    reply[b] = receipt
  end
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
  return b
end

-- Whether every op of a plain shape creates an empty key with SET NX GET at nowMs (string states whose
-- fresh state admits); kept on the shape for the time it was made for.
local function createsAll(shape)
  if shape.createsAtMs == nowMs then return shape.creates end
  local creates = SET_NX_GET
  for i = 1, shape.n do
    local op = shape.ops[i]
    local alg = op.alg or algOf(op)
    if not (alg.encode and op.cost > 0 and freshAdmits(op, alg, nowMs)) then creates = false end
  end
  shape.createsAtMs, shape.creates = nowMs, creates
  return creates
end

-- The fast loop of a request whose ops all create (createsAll), keys distinct: SET NX GET per op until
-- one finds its key held (or fails). Returns whether every key was empty (now created).
local function createAll(n)
  for i = 1, n do
    local op = ops[i]
    local old = redis.pcall('SET', countKeys[i], op.freshValue, 'NX', 'GET', 'PX', op.freshTtl)
    if old then
      held[i] = old
      return false
    end
    created[i] = true
  end
  return true
end

-- Decides one request of `shape` at requestNowMs: its keys from KEYS[keyAt], its lockout identities
-- from ARGV[at]; its results appended to the reply at b. Returns the next keyAt, at and b.
local function decideRequest(shape, requestNowMs, KEYS, keyAt, ARGV, at, reply, b)
  local n, locks, reads = shape.n, shape.locks, shape.reads
  ops = shape.ops
  local ok, err
  local same = shape.same
  if shape.plain then
    for i = 1, n do
      -- The op's key, or the record of the op before (readShape's `same`).
      if same and same[i] then countKeys[i] = countKeys[i - 1] else countKeys[i], keyAt = KEYS[keyAt], keyAt + 1 end
      created[i] = false
    end
    nowMs = requestNowMs
    local distinct = n == 1 or distinctKeys(n)
    if shape.fields and oneKey(n) then
      ok, err = pcall(decideGrouped, n, requestNowMs, shape)
      -- A failed request wrote nothing.
      if not ok then
        for i = 1, n do created[i] = false end
      end
    elseif held[1] == nil and distinct and createsAll(shape) and createAll(n) then
      -- Every key was empty: each op's result is its fresh state's.
      for i = 1, n do
        b = b + 1
        reply[b] = FRESH
      end
      return keyAt, at, b
    else
      ok, err = pcall(decidePlain, n, requestNowMs, distinct)
      if not ok then
        -- A failed request leaves nothing: the keys it created were empty.
        for i = 1, n do
          if created[i] then pcall(drop, algOf(ops[i]), countKeys[i], ops[i], requestNowMs) end
          created[i], held[i] = false, nil
        end
      end
    end
  else
    if reads then
      if decided == nil then decided, overrideKeys, overrides = {}, {}, {} end
      -- The shape's ops stay as sent: an override changes this request's copy.
      for i = 1, n do decided[i] = ops[i] end
      ops = decided
    end
    for i = 1, n do
      if same and same[i] then countKeys[i] = countKeys[i - 1] else countKeys[i], keyAt = KEYS[keyAt], keyAt + 1 end
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
      created[i] = false
    end
    ok, err = pcall(decide, n, shape.mode, shape.consumeNothing, requestNowMs, reads)
  end
  if not ok then
    -- redis.call raises a table { err = message } in Redis 7, a string before.
    if type(err) == 'table' then err = err.err end
    b = b + 1
    reply[b] = tostring(err)
    return keyAt, at, b
  end
  for i = 1, n do
    if created[i] then
      b = b + 1
      reply[b] = FRESH
    else
      local op = ops[i]
      b = put(reply, b, results[i], reads and overrides[i], op.limit, requestNowMs, op.type == 'concurrency')
    end
  end
  return keyAt, at, b
end

-- firstKey, firstArg: where the keys and the arguments described above start (1, 1 unless cross-slot);
-- keyCount: how many keys there are.
return function(KEYS, ARGV, firstKey, firstArg, keyCount)
  local reply = { 0, 0 }
  local at = firstArg
  local now = ARGV[at]
  if now ~= SHAPES then
    -- One shape, whose requests fill KEYS (the usual call).
    local shape = readShape(ARGV[at + 1])
    if now == SERVER_TIME then
      now = clockMs(SERVER_TIME)
      reply[1] = now
    else
      now = now + 0
    end
    local b, keyAt, last = 1, firstKey, firstKey + keyCount - 1
    at = at + 2
    nowMs = now
    if shape.plain and shape.n == 1 then
      -- One op per request, no lock, no override: each key created at once when empty, the others
      -- decided in full with what was read.
      local op = shape.ops[1]
      local alg = op.alg or algOf(op)
      -- A rule kept in its identity's hash takes decideGrouped's path (decideRequest).
      if not op.field and op.cost > 0 and freshAdmits(op, alg, now) then
        local encodes, value, ttl = SET_NX_GET and alg.encode, op.freshValue, op.freshTtl
        while keyAt <= last do
          -- false: the key was empty and now holds the op's fresh state; else what decidePlain reads
          -- in `held` (see there).
          local found
          if encodes then
            found = redis.pcall('SET', KEYS[keyAt], value, 'NX', 'GET', 'PX', ttl)
          else
            local ok, state = pcall(readOrCreate, op, alg, KEYS[keyAt], now)
            if not ok then
              found = type(state) == 'table' and state or { err = tostring(state) }
            elseif state == true then
              found = false
            else
              found = state or NONE
            end
          end
          if found == false then
            keyAt, b = keyAt + 1, b + 1
            reply[b] = FRESH
          else
            held[1] = found
            keyAt, at, b = decideRequest(shape, now, KEYS, keyAt, ARGV, at, reply, b)
          end
        end
        return reply
      end
    end
    while keyAt <= last do
      keyAt, at, b = decideRequest(shape, now, KEYS, keyAt, ARGV, at, reply, b)
    end
    return reply
  end
  local shapes, nows = {}, {}
  local shapeCount = ARGV[at + 1] + 0
  at = at + 2
  for j = 1, shapeCount do
    local fixedNowMs = false
    if ARGV[at] ~= SERVER_TIME then fixedNowMs = ARGV[at] + 0 end
    nows[j], shapes[j] = fixedNowMs, readShape(ARGV[at + 1])
    at = at + 2
  end
  local serverMs = nil
  local b, keyAt = 1, firstKey
  local requests = ARGV[at] + 0
  at = at + 1
  for _ = 1, requests do
    local j = ARGV[at] + 0
    at = at + 1
    local requestNowMs = nows[j]
    if not requestNowMs then
      if serverMs == nil then
        serverMs = clockMs(SERVER_TIME)
        reply[1] = serverMs
      end
      requestNowMs = serverMs
    end
    keyAt, at, b = decideRequest(shapes[j], requestNowMs, KEYS, keyAt, ARGV, at, reply, b)
  end
  return reply
end
