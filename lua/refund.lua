-- Gives reservations back (an outcome that does not count, or a Cluster group undone after a later
-- group denied). Never goes below empty; a state that becomes empty is deleted.
--
-- KEYS[i]    count key of refund i: <prefix>:{<identity>}:<rule>, or its identity's hash
--            <prefix>:{<identity>} when its op's rule is grouped (protocol.lua readOp: field), all in
--            one slot; after the n count
--            keys, the override key (<count key>:o) of each refund whose op reads its override, in order;
--            last, when an op reads its rule-wide limit, the slot's rule-limits hash (check.lua's)
-- ARGV[1]    m, number of distinct ops, then the text of each (protocol.lua readOp)
-- then       now, epoch ms ('server' for the server's TIME); n, number of refunds; then per refund: the
--            index of its op among the m, and its receipt, as check.lua returned it
-- then       optionally 'quiet': no figures wanted (a release, a report, a settle: RedisStore.refund);
--            after it, when the refunds free concurrency slots, the free channel (redis-keys.ts
--            freeChannel) and the announcement to publish there once they are freed (redis-frees.ts)
-- Reply: flat array of integers, 3 per refund: remaining (units), resetMs, count (units): the state
--   after the refund as an op of cost 0 reads it; quiet: one per refund, 1 when what it gave back was
--   still held, 0 for a concurrency op's slots not all held any more (released, lapsed or reset: the
--   release counts as lapsed), and a concurrency op's release only removes its slots (concurrency.lua
--   release), its state not read.

local protocol, algorithms = require('protocol'), require('algorithms')
local algOf, drop, loadLive, withCost = algorithms.algOf, algorithms.drop, algorithms.loadLive, algorithms.withCost
local QUIET = 'quiet'
local release = require('concurrency').release

return function(KEYS, ARGV)
  local ops, at = protocol.readOps(ARGV, 1)
  local nowMs = protocol.clockMs(ARGV[at])
  local n = ARGV[at + 1] + 0
  at = at + 2
  local reply = {}
  local quiet = ARGV[at + 2 * n] == QUIET
  -- The free channel and the announcement of the slots released (redis-frees.ts), or nil.
  local channel, freed = ARGV[at + 2 * n + 1], ARGV[at + 2 * n + 2]
  local overrideAt = n + 1
  for i = 1, n do
    local op = ops[ARGV[at] + 0]
    local receiptText = ARGV[at + 1]
    at = at + 2
    local key = KEYS[i]
    if quiet and op.type == 'concurrency' then
      -- A release frees slots whatever the limit: its override is not read.
      if op.readsOverride then overrideAt = overrideAt + 1 end
      if release(key, op, nowMs, receiptText) then reply[i] = 1 else reply[i] = 0 end
    else
      local receipt = receiptText + 0
      -- Given back at the limit in force, as the memory store does.
      local found = false
      if op.readsOverride then
        local overrides = require('overrides')
        found = overrides.readKeyOverride(redis.call('GET', KEYS[overrideAt]), nowMs)
        overrideAt = overrideAt + 1
        if found then op = overrides.withOverride(op, found.limit or op.limit, found.windowMs) end
      end
      -- The key's override first, then the rule-wide limit (check.lua's order); a window-only override
      -- leaves the limit to the rule-wide one.
      if op.ruleName and not (found and found.limit) then
        local overrides = require('overrides')
        local wide = overrides.readOverride(redis.call('HGET', KEYS[#KEYS], op.ruleName), nowMs)
        if wide then op = overrides.withOverride(op, wide.limit) end
      end
      local alg = op.alg or algOf(op)
      local state = loadLive(alg, key, op, nowMs)
      if state ~= nil then
        state = alg.refund(state, op, nowMs, receipt)
        if state == nil then drop(alg, key, op, nowMs) else alg.save(key, state, op, nowMs) end
      end
      if quiet then
        reply[i] = 1
      else
        local now = alg.evaluate(state, withCost(op, 0), nowMs, false)
        reply[#reply + 1] = now.remaining
        reply[#reply + 1] = now.resetMs
        reply[#reply + 1] = now.count
      end
    end
  end
  -- Heard by the processes waiting for a slot of these keys, after the slots are free.
  if quiet and channel then redis.call('PUBLISH', channel, freed) end
  return reply
end
