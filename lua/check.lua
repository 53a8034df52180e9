-- Decides a batch of requests one after the other, each exactly as its own call in that order would
-- (src/stores/memory/memory-store.ts evaluateSync, step for step). Requests are independent: one that
-- denies or fails leaves the others as they would be. This file reads the arguments and writes the
-- reply; each request goes to one of three deciders by its shape (protocol.lua readShape): decide-plain.lua
-- (mode check, consuming, no lockout, no override: most requests), decide-grouped.lua (such a request
-- whose ops all keep their state in one identity record) and decide.lua (everything else: locks,
-- overrides, peek and record modes). All keys must hash to one slot: on a Cluster the TypeScript
-- batches per slot, except in the cross-slot form (src/stores/redis/scripts.ts checkCrossSlot:
-- allow-cross-slot-keys, Redis 7+), where the keys of requests of several slots of one master follow
-- ARGV[1] = their number, and the rest of ARGV as below follows them. There each request's keys share
-- a slot and every key a request writes is read in its phase 1, so a key the node does not serve fails
-- the request before it writes.
--
-- KEYS        per request, per op in order: the op's count key <prefix>:{<identity>}:<rule> (its
--             identity record <prefix>:{<identity>} when the op's rule is grouped: protocol.lua
--             readOp's field names its state there, identity-record.lua; not sent again for an op
--             marked '^' in the shape: the record of the op before), then, only when the op reads its
--             override (protocol.lua readOp: its rule has had one), its override key
--             <prefix>:{<identity>}:<rule>:o (value: overrides.lua overrideValue), then, only when its
--             rule has a lockout (lockout durationMs > 0), its lock key <prefix>:{<identity>}:<rule>:l
--             (value: protocol.lua lockValue) and its rule's lock index (a ZSET, score = untilMs in
--             epoch ms, member protocol.lua lockIndexMember), in the identity's slot on a Cluster;
--             after every request's keys, only when a shape has an op that reads its rule-wide limit
--             (protocol.lua readShape ruleLimits), the call's rule-limits hash: <prefix>:limits, or on a
--             Cluster <prefix>:{<slot tag>}:limits of the call's slot (one per slot, each holding the
--             same fields: field = the rule's name, value = overrides.lua overrideValue)
-- ARGV        when every request has the same shape (the usual call): now, shape, then per request the
--             identity (the limiter's key string) of each of its ops whose rule has a lockout; the
--             requests are as many as their keys make. Else: 'shapes', s (the number of distinct
--             shapes), s x (now, shape), r (the number of requests), then per request the index of its
--             shape among the s, followed by those identities.
--   now       epoch ms; 'server' (SERVER_TIME) for the server's TIME, read once per call: the requests
--             are simultaneous
--   shape     text: mode ('check' | 'peek' | 'record'), '|', '1' (decide and lock, but consume
--             nothing: a Cluster group after a group that denied) or '0', then per op '|' and the op's
--             text (protocol.lua readOp), after '^' when the op is grouped and its identity the op's
--             before (a grouped rule too): its identity record is that op's
-- Reply       protocol.lua's check reply: the server's time (epoch ms), then per request, per op, its
--             result (units, ms, epoch ms), or the request's error message

local protocol, algorithms = require('protocol'), require('algorithms')
local decide, plain, grouped = require('decide'), require('decide-plain'), require('decide-grouped')
local clockMs, readShape, putResult, putFresh = protocol.clockMs, protocol.readShape, protocol.putResult, protocol.putFresh
local FRESH = protocol.FRESH
local SERVER_TIME = protocol.SERVER_TIME
local freshAdmits, readOrCreate, algOf, drop = algorithms.freshAdmits, algorithms.readOrCreate, algorithms.algOf, algorithms.drop
local decidePlain, createsAll, createAll, distinctKeys = plain.decidePlain, plain.createsAll, plain.createAll, plain.distinctKeys
local decideGrouped, oneKey = grouped.decideGrouped, grouped.oneKey
local countKeys, lockKeys, indexKeys, identities = plain.countKeys, plain.lockKeys, plain.indexKeys, plain.identities
local results, created, held, NONE = plain.results, plain.created, plain.held, plain.NONE
-- SET with both NX and GET: Redis 7.0 and later (algorithms.lua readOrCreate uses GET then SET before).
local SET_NX_GET = algorithms.SET_NX_GET
-- ARGV[1] of a call whose requests have several shapes.
local SHAPES = 'shapes'
-- overrides.lua limitShape, once a call reads a rule-wide limit (a call without one never builds it).
local limitShape

-- Made by the first request that reads an override: a call without one pays nothing for them.
-- `decided`: the request's copy of its shape's ops (an override changes it); overrides[i]: the
-- override that decided op i, or false.
local decided, overrideKeys, overrides

-- Decides one request of `shape` at requestNowMs: its keys from KEYS[keyAt], its lockout identities
-- from ARGV[at]; its results appended to the reply at b. Returns the next keyAt, at and b.
local function decideRequest(shape, requestNowMs, KEYS, keyAt, ARGV, at, reply, b)
  local n, locks, reads, same = shape.n, shape.locks, shape.reads, shape.same
  local ops = shape.ops
  local ok, err
  if shape.plain then
    for i = 1, n do
      -- The op's key, or the record of the op before (protocol.lua readShape's `same`).
      if same and same[i] then countKeys[i] = countKeys[i - 1] else countKeys[i], keyAt = KEYS[keyAt], keyAt + 1 end
      created[i] = false
    end
    local distinct = n == 1 or distinctKeys(n)
    if shape.fields and oneKey(n) then
      ok, err = pcall(decideGrouped, ops, n, requestNowMs, shape)
      -- A failed request wrote nothing.
      if not ok then
        for i = 1, n do created[i] = false end
      end
    elseif held[1] == nil and distinct and createsAll(shape, requestNowMs) and createAll(ops, n) then
      -- Every key was empty: each op's result is its fresh state's.
      ok = true
    else
      ok, err = pcall(decidePlain, ops, n, requestNowMs, distinct)
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
    ok, err = pcall(decide, ops, n, shape.mode, shape.consumeNothing, requestNowMs, reads, overrideKeys, overrides)
  end
  if not ok then
    -- redis.call raises a table { err = message } in Redis 7, a string before.
    if type(err) == 'table' then err = err.err end
    b = b + 1
    reply[b] = tostring(err)
    return keyAt, at, b
  end
  -- The results; a created op's is its fresh state's (protocol.lua putFresh), FRESH written here when no
  -- op reads a rule-wide limit (a call per op costs as much as its reply).
  local ruleLimits = shape.ruleLimits
  for i = 1, n do
    if not created[i] then
      local op = ops[i]
      b = putResult(reply, b, results[i], (reads and overrides[i]) or op.ruleWide or false, op.limit, requestNowMs, op.type == 'concurrency')
    elseif ruleLimits then
      b = putFresh(reply, b, ops[i])
    else
      b = b + 1
      reply[b] = FRESH
    end
  end
  return keyAt, at, b
end

-- One op per request, no lock, no override, its fresh state admitting at now: each key created at
-- once when empty (its result the fresh state's), the others decided in full with what was read.
local function decideSingles(shape, op, alg, now, KEYS, keyAt, last, ARGV, at, reply, b)
  local encodes, value, ttl = SET_NX_GET and alg.encode, op.freshValue, op.freshTtl
  -- The fresh result of every key it creates, putFresh's written here (a call per key costs as much
  -- as the reply): FRESH, or at a rule-wide limit FRESH less that limit.
  local head = FRESH
  if op.ruleWide then head = FRESH - op.ruleWide.limit end
  while keyAt <= last do
    -- false: the key was empty and now holds the op's fresh state; else what decidePlain reads in
    -- decide-plain.lua's `held`.
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
      reply[b] = head
    else
      held[1] = found
      keyAt, at, b = decideRequest(shape, now, KEYS, keyAt, ARGV, at, reply, b)
    end
  end
  return reply
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
    -- The rule-wide limits in force, read once for the call (the last key: not a request's).
    if shape.ruleLimits then
      limitShape = limitShape or require('overrides').limitShape
      shape = limitShape(shape, KEYS[last], now)
      last = last - 1
    end
    if shape.plain and shape.n == 1 then
      local op = shape.ops[1]
      local alg = op.alg or algOf(op)
      -- A rule kept in its identity record takes decideGrouped's path (decideRequest).
      if not op.field and op.cost > 0 and freshAdmits(op, alg, now) then
        return decideSingles(shape, op, alg, now, KEYS, keyAt, last, ARGV, at, reply, b)
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
  for j = 1, shapeCount do
    if shapes[j].ruleLimits then
      -- Read once for the call, at the time its requests decide at (the last key: not a request's).
      if not nows[j] and serverMs == nil then
        serverMs = clockMs(SERVER_TIME)
        reply[1] = serverMs
      end
      limitShape = limitShape or require('overrides').limitShape
      shapes[j] = limitShape(shapes[j], KEYS[firstKey + keyCount - 1], nows[j] or serverMs)
    end
  end
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
