-- The request check.lua is deciding: the tables its deciders (decide.lua, decide-plain.lua,
-- decide-grouped.lua) fill and check.lua reads back, and the verdict steps they share.
--
-- KEYS        none: a module (require('request')), not a script
-- ARGV        none
-- Returns     { countKeys, lockKeys, indexKeys, identities, states, results, created, held, NONE,
--             evaluated, unconsumed, uncreated }: per op i of the request, its count key (or its
--             identity record), lock key, lock index, identity, loaded state, result (an algorithm's
--             verdict: remaining and count in units, resetMs and retryAfterMs in ms, receipt, level),
--             whether it created its empty key (its result is then its fresh state's), and what a fast
--             loop found in a key it could not create. Reused by the next request of the call.

local withCost = require('algorithms').withCost

local results, states, created = {}, {}, {}

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

return {
  countKeys = {}, lockKeys = {}, indexKeys = {}, identities = {}, states = states, results = results,
  created = created, held = {},
  -- In `held`: the key held no live state.
  NONE = {},
  evaluated = evaluated, unconsumed = unconsumed, uncreated = uncreated,
}
