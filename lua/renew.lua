-- Renews held concurrency slots (lua/concurrency.lua renew): their leases end op.sizeMs from now. Sent by
-- each process for the slots it holds, one call per lease/3 (per Cluster slot group).
--
-- KEYS[i]    count key of slot i: <prefix>:{<identity>}:<rule> (all in one slot)
-- ARGV[1]    m, number of distinct ops, then the text of each (protocol.lua readOp)
-- then       now, epoch ms ('server' for the server's TIME); n, number of slots; then per slot: the index
--            of its op among the m, and its receipt (the id of its first slot, as check.lua returned it)
-- Reply: array of integers, one per slot: 1 when every unit of it was still held (renewed), else 0
--   (released, lapsed or reset: it is not taken again).

local protocol = require('protocol')
local renew = require('concurrency').renew

return function(KEYS, ARGV)
  local ops, at = protocol.readOps(ARGV, 1)
  local nowMs = protocol.clockMs(ARGV[at])
  local n = ARGV[at + 1] + 0
  at = at + 2
  local reply = {}
  for i = 1, n do
    local op = ops[ARGV[at] + 0]
    local receipt = ARGV[at + 1] + 0
    at = at + 2
    reply[i] = 0
    if renew(KEYS[i], op, nowMs, receipt) then reply[i] = 1 end
  end
  return reply
end
