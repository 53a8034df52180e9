-- Gives reservations back (an outcome that does not count, or a Cluster group undone after a later
-- group denied). Never goes below empty; a state that becomes empty is deleted.
--
-- KEYS[i]     count key of refund i: <prefix>:{<identity>}:<rule> (all in one slot)
-- ARGV[1]     now, epoch ms; '' to read the server's TIME
-- ARGV[2]     n, number of refunds
-- ARGV[3 + 14(i-1) .. 15 + 14(i-1)]  op i, the 13 fields of readOp in prelude.lua
-- ARGV[16 + 14(i-1)]                 receipt of op i, as check.lua returned it
-- Reply: flat array of integers, 3 per refund: remaining (units), resetMs, count (units): the state
--   after the refund as an op of cost 0 reads it.

local nowMs = clockMs(ARGV[1])
local n = tonumber(ARGV[2])
local reply = {}
for i = 1, n do
  local base = 3 + (OP_FIELDS + 1) * (i - 1)
  local op = readOp(base)
  local receipt = tonumber(ARGV[base + OP_FIELDS])
  local key = KEYS[i]
  local alg = ALG[op.type]
  local state = loadLive(alg, key, op, nowMs)
  if state ~= nil then
    state = alg.refund(state, op, nowMs, receipt)
    if state == nil then redis.call('DEL', key) else alg.save(key, state, op, nowMs) end
  end
  local now = alg.evaluate(state, withCost(op, 0), nowMs, false)
  reply[#reply + 1] = now.remaining
  reply[#reply + 1] = now.resetMs
  reply[#reply + 1] = now.count
end
return reply
