-- The decider of check.lua for a request of a plain shape (mode check, consuming, no lockout, no
-- override: most requests): the same verdicts as decide.lua without its lock and override steps.
-- A key whose state is one string is written first, optimistically: `SET key <fresh state> NX GET PX`
-- creates it when it was empty (the fresh state is encoded once per op and time: algorithms.lua
-- freshAdmits), or returns what it held, written nothing; a request that then denies deletes the keys
-- it created, which were empty. Needs Redis 7 (SET NX GET); before, GET then SET. The request's tables
-- (per op i: its count key or identity record, lock key, lock index, identity, loaded state, result,
-- whether it created its empty key, what a fast loop found in a key it could not create) live here, and
-- so do the verdict steps decide.lua and decide-grouped.lua share with it; check.lua fills the keys and
-- reads the results. They are reused by the next request of the call.
--
-- KEYS        none of its own: each op's count key <prefix>:{<identity>}:<rule> comes from check.lua
--             in countKeys
-- ARGV        none
-- Returns     { decidePlain, createsAll, createAll, distinctKeys, the request's tables (countKeys,
--             lockKeys, indexKeys, identities, states, results, created, held, NONE), evaluated,
--             unconsumed, uncreated }: decidePlain(ops, n, nowMs, optimistic) leaves each op's result in
--             `results` (an algorithm's verdict: remaining and count in units, resetMs and
--             retryAfterMs in ms, receipt, level), or created[i] = true for an op that created its
--             empty key (its result is its fresh state's); the others return booleans (see each).

local algorithms = require('algorithms')
local loadLive, freshAdmits, readOrCreate = algorithms.loadLive, algorithms.freshAdmits, algorithms.readOrCreate
local algOf, drop, SET_NX_GET, withCost = algorithms.algOf, algorithms.drop, algorithms.SET_NX_GET, algorithms.withCost

local countKeys, states, results, created, held = {}, {}, {}, {}, {}
-- In `held`: the key held no live state.
local NONE = {}
-- Phase 1 on op i's live state (nil: none), not created: its verdict at nowMs (no lock level), kept
-- with the state. Returns whether it denies the request (a denial that is not a dry run).
local function evaluated(i, op, alg, state, nowMs)
  local r = alg.evaluate(state, op, nowMs, false)
  r.level = 0
  states[i], results[i] = state, r
  return not r.allowed and not op.dryRun
end

-- Phase 2 for op i of a request that does not consume it (it denied, another rule did, or it costs
-- nothing): its result reports its state as it is, nothing received.
local function unconsumed(i, op, alg, nowMs)
  local r = results[i]
  if r.allowed then
    local now = alg.evaluate(states[i], withCost(op, 0), nowMs, false)
    r.remaining, r.resetMs, r.count, r.receipt = now.remaining, now.resetMs, now.count, 0
  else
    r.receipt = 0
  end
end

-- Phase 2 for op i that created its state (created[i]) in a request another rule denied: the state it
-- made is taken back by the caller; its result reports the empty state.
local function uncreated(i, op, alg, nowMs)
  created[i] = false
  local now = alg.evaluate(nil, withCost(op, 0), nowMs, false)
  now.receipt, now.level = 0, 0
  results[i] = now
end


-- The state a fast loop left in held[i] for op i (check.lua, createAll): the value SET NX GET returned,
-- the state readOrCreate read, NONE, or an error (raised).
local function heldState(h, op, alg, nowMs)
  if type(h) == 'string' then
    local state = alg.decode(h)
    if alg.expiresAt(state, op) <= nowMs then return nil end
    return state
  end
  if h == NONE then return nil end
  if h.err then error(h) end
  return h
end

-- Decides a request of a plain shape: its n ops `ops`, at nowMs; `optimistic`, its count keys are
-- distinct (a key written optimistically is read by no other op).
local function decidePlain(ops, n, nowMs, optimistic)
  local denied = false
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
      held[i] = nil
      state = heldState(h, op, alg, nowMs)
    elseif optimistic and op.cost > 0 and freshAdmits(op, alg, nowMs) then
      state = readOrCreate(op, alg, key, nowMs)
    else
      state = loadLive(alg, key, op, nowMs)
    end
    if state == true then
      created[i] = true
    elseif evaluated(i, op, alg, state, nowMs) then
      denied = true
    end
  end
  -- Phase 2: all consume, or none does (a created key is deleted: it was empty).
  for i = 1, n do
    local op = ops[i]
    local alg = op.alg or algOf(op)
    if created[i] then
      if denied then
        drop(alg, countKeys[i], op, nowMs)
        uncreated(i, op, alg, nowMs)
      end
    elseif not denied and results[i].allowed and op.cost > 0 then
      alg.save(countKeys[i], alg.apply(states[i], op, nowMs), op, nowMs)
    else
      unconsumed(i, op, alg, nowMs)
    end
  end
end

-- Whether every op of a plain shape creates an empty key with SET NX GET at nowMs (string states whose
-- fresh state admits); kept on the shape for the time it was made for.
local function createsAll(shape, nowMs)
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
-- one finds its key held (or fails: held[i] then has what decidePlain reads). Returns whether every
-- key was empty (now created).
local function createAll(ops, n)
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

-- Whether the request's n count keys are distinct.
local function distinctKeys(n)
  for i = 2, n do
    for k = 1, i - 1 do
      if countKeys[i] == countKeys[k] then return false end
    end
  end
  return true
end

return {
  decidePlain = decidePlain, createsAll = createsAll, createAll = createAll, distinctKeys = distinctKeys,
  countKeys = countKeys, lockKeys = {}, indexKeys = {}, identities = {}, states = states, results = results,
  created = created, held = held, NONE = NONE, evaluated = evaluated, unconsumed = unconsumed, uncreated = uncreated,
}
