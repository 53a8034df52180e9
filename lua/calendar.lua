-- Calendar window (src/algorithms/calendar.ts): a fixed window whose end is a wall-clock boundary.
-- A module (require('calendar')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm is
-- called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables. The op carries this period's end and the next one's (epoch ms, computed
-- in TypeScript from the store's clock); the script picks between them with its own now. A period in
-- progress keeps the end stored with its count (a period chosen per client: calendar.ts says why).
-- State, encoding and receipt: fixed.lua's counter.
--
-- KEYS        none: a module (require('calendar')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { calendar, periodEnd }: calendar is the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, decode, encode): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (the period's end, epoch ms) }; periodEnd(op, nowMs), epoch ms

local counter = require('fixed')
local evaluateCounter, refundCounter = counter.evaluateCounter, counter.refundCounter

-- The end of the period nowMs falls in.
local function periodEnd(op, nowMs)
  if nowMs < op.periodEndMs then return op.periodEndMs end
  return op.nextPeriodEndMs
end

-- The end of the key's period: the stored one while it lasts, else the op's.
local function windowEnd(state, op, nowMs)
  if state ~= nil and nowMs < state.endMs then return state.endMs end
  return periodEnd(op, nowMs)
end

local function countIn(state, endMs)
  if state ~= nil and state.endMs == endMs then return state.count end
  return 0
end

local calendar = {
  load = counter.loadCounter,
  save = counter.saveCounter,
  decode = counter.decodeCounter,
  encode = counter.encodeCounter,
  evaluate = function(state, op, nowMs, add)
    local endMs = windowEnd(state, op, nowMs)
    return evaluateCounter(countIn(state, endMs), endMs, op, nowMs, add)
  end,
  apply = function(state, op, nowMs)
    local endMs = windowEnd(state, op, nowMs)
    local add = state ~= nil and state.endMs == endMs and state.packed and op.costText
    return { count = countIn(state, endMs) + op.cost, endMs = endMs, add = add }
  end,
  refund = refundCounter,
  expiresAt = function(state)
    return state.endMs
  end,
}

return { calendar = calendar, periodEnd = periodEnd }
