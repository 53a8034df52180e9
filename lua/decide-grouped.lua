-- The decider of check.lua for a plain request whose ops all keep their state in one identity record
-- (rules its limiter grouped: identity-record.lua): the same verdicts as decide-plain.lua, with one
-- command to read the record and one to write it. When every op admits on an empty state, the record
-- they would make together is written first, optimistically (`SET key <record> NX GET PX`, encoded
-- once per shape and time), as decide-plain.lua's createAll does for keys of their own: an identity's
-- first request is one command. Else the record is read (that SET NX GET, or GET), every op decided on
-- its state, and, when the request consumes, the record written back once with the states it changed
-- (SET PX: its TTL the latest of its states' ends). A denial writes nothing.
--
-- KEYS        none of its own: the identity record <prefix>:{<identity>} comes from check.lua as
--             decide-plain.lua's countKeys[1]
-- ARGV        none
-- Returns     { decideGrouped, oneKey }: decideGrouped(ops, n, nowMs, shape) leaves each op's result in
--             decide-plain.lua's `results` (units and ms as an algorithm's verdict), or created[i] = true for
--             an op that consumed on an empty state (its result is its fresh state's); oneKey(n),
--             whether the request's count keys are one key.

local algorithms, plain, identityRecord = require('algorithms'), require('decide-plain'), require('identity-record')
local freshAdmits, algOf, SET_NX_GET = algorithms.freshAdmits, algorithms.algOf, algorithms.SET_NX_GET
local countKeys, states, results, created = plain.countKeys, plain.states, plain.results, plain.created
local evaluated, unconsumed, uncreated = plain.evaluated, plain.unconsumed, plain.uncreated
local intText, concat = identityRecord.intText, table.concat

-- The identity record a request of `shape` makes on a new identity at nowMs when every op admits on
-- an empty state: its value and TTL (ms, as text), kept on the shape for the time it was made for;
-- else false. An identity alone in a call pays this once per call: its pieces are kept on the shape
-- (recordParts: '|<rule>=' per op), the header formatted by identityRecord.intText.
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

-- Decides a plain request of `shape` whose n ops `ops` are all in the identity record countKeys[1].
local function decideGrouped(ops, n, nowMs, shape)
  local denied = false
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
  local found = identityRecord.live(identityRecord.parse(old), nowMs)
  local recordStates = found.states
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    local state = nil
    local v = recordStates[op.field]
    if v then
      state = alg.decode(v)
      if alg.expiresAt(state, op) <= nowMs then state = nil end
    end
    if state == nil and op.cost > 0 and freshAdmits(op, alg, nowMs) then
      -- Admitted on an empty state: its result is its fresh state's (no table made for it).
      created[i] = true
    elseif evaluated(i, op, alg, state, nowMs) then
      denied = true
    end
  end
  local writes = false
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    if created[i] then
      -- Nothing was written for it yet.
      if denied then
        uncreated(i, op, alg, nowMs)
      else
        identityRecord.put(found, op.field, op.freshValue, op.freshTtl, nowMs)
        writes = true
      end
    elseif not denied and results[i].allowed and op.cost > 0 then
      local value, ttl = alg.recordEncode(alg.apply(states[i], op, nowMs), op, nowMs)
      identityRecord.put(found, op.field, value, ttl, nowMs)
      writes = true
    else
      unconsumed(i, op, alg, nowMs)
    end
  end
  if writes then identityRecord.write(key, found, nowMs) end
end

-- Whether the request's n count keys are one key (the ops of one identity record).
local function oneKey(n)
  local key = countKeys[1]
  for i = 2, n do
    if countKeys[i] ~= key then return false end
  end
  return true
end

return { decideGrouped = decideGrouped, oneKey = oneKey }
