-- The window algorithms by type (src/algorithms/index.ts), and how the drivers load a key's state.
-- A module (require('algorithms')), not a script: no KEYS, no ARGV, no reply of its own. Each algorithm
-- module is built on its first use, so a call runs only the algorithms its ops name.
-- Every algorithm is a table { load(key, op), save(key, state, op, nowMs), evaluate(state, op, nowMs,
-- add), apply(state, op, nowMs), refund(state, op, nowMs, receipt), expiresAt(state, op) }: the
-- TypeScript twin's methods, plus load and save (state <-> Redis). Times in epoch ms.

-- Window type -> its algorithm, from its module (built on the first require).
local function build(windowType)
  if windowType == 'fixed' then return require('fixed').fixed end
  if windowType == 'calendar' then return require('calendar').calendar end
  if windowType == 'sliding-log' then return require('sliding-log').slidingLog end
  if windowType == 'sliding' then return require('sliding').sliding end
  if windowType == 'token-bucket' then return require('token-bucket').tokenBucket end
  if windowType == 'gcra' then return require('gcra').gcra end
  error('unknown window type ' .. tostring(windowType))
end

-- Window type -> algorithm: a plain table lookup (the drivers do one per op), each algorithm built
-- on its first use. One function rather than a table of six: every call builds this module again.
local byType = setmetatable({}, {
  __index = function(known, windowType)
    local found = build(windowType)
    rawset(known, windowType, found)
    return found
  end,
})

-- Loads a key's state, forgetting it once its algorithm says it means nothing any more (as the
-- memory store's expiry does): the TTL alone cannot be trusted when tests inject a clock.
local function loadLive(alg, key, op, nowMs)
  local state = alg.load(key, op)
  if state ~= nil and alg.expiresAt(state, op) <= nowMs then return nil end
  return state
end

-- The op with another cost (reporting a state as it is: cost 0). Ops are shared by their uses: never modified.
local function withCost(op, cost)
  local copy = {}
  for k, v in pairs(op) do copy[k] = v end
  copy.cost, copy.costText = cost, tostring(cost)
  return copy
end

return { byType = byType, loadLive = loadLive, withCost = withCost }
