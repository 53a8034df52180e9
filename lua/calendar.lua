-- Calendar window (src/algorithms/calendar.ts): a fixed window whose end is a wall-clock boundary.
-- Not a script by itself: ALG['calendar'] is called by check.lua and refund.lua with an op's count key
-- (their KEYS) and the op decoded from their ARGV (prelude.lua readOps); it returns Lua tables, not replies.
-- The op carries this period's end and the next one's (ARGV, epoch ms, computed in TypeScript from the
-- store's clock); the script picks between them with its own now. State and encoding: fixed.lua's counter.

local function periodEnd(op, nowMs)
  if nowMs < op.periodEndMs then return op.periodEndMs end
  return op.nextPeriodEndMs
end

local function countIn(state, endMs)
  if state ~= nil and state.endMs == endMs then return state.count end
  return 0
end

ALG['calendar'] = {
  load = counter.load,
  save = counter.save,
  evaluate = function(state, op, nowMs, add)
    local endMs = periodEnd(op, nowMs)
    return counter.evaluate(countIn(state, endMs), endMs, op, nowMs, add)
  end,
  apply = function(state, op, nowMs)
    local endMs = periodEnd(op, nowMs)
    local add = state ~= nil and state.endMs == endMs and state.packed and op.costText
    return { count = countIn(state, endMs) + op.cost, endMs = endMs, add = add }
  end,
  refund = counter.refund,
  expiresAt = counter.expiresAt,
}
