-- The window algorithms by type (src/algorithms/index.ts), and how the drivers load a key's state.
-- A module (require('algorithms')), not a script: no KEYS, no ARGV, no reply of its own. Each algorithm
-- module is built on its first use, so a call runs only the algorithms its ops name.
-- Every algorithm is a table { load(key, op, nowMs), save(key, state, op, nowMs), evaluate(state, op, nowMs,
-- add), apply(state, op, nowMs), refund(state, op, nowMs, receipt), expiresAt(state, op) }: the
-- TypeScript twin's methods, plus load and save (state <-> Redis). Times in epoch ms. Those whose
-- state is one string (fixed, calendar, token bucket, gcra) also have decode(value) -> state and
-- encode(state, op, nowMs) -> value, TTL (ms): what load reads and save writes, for check.lua's
-- fresh-key path; the others (sliding, sliding log, concurrency) have prepare(op, nowMs) and create(key, op), which
-- write the state an op leaves on an empty key (freshAdmits). The string ones also run on a state in
-- their identity record (inRecord, algOf; identity-record.lua): one key for the rules of an identity that its
-- limiter groups.
--
-- KEYS        none: a module (require('algorithms')); load and save take a count key from the drivers
-- ARGV        none
-- Returns     { byType, algOf, loadLive, withCost, freshAdmits, readOrCreate, drop, SET_NX_GET }: algorithms
--             by window type; loadLive a state or nil; freshAdmits a boolean (op.freshValue, op.freshTtl
--             in ms set); readOrCreate a state, nil or true (created)

-- Window type -> its algorithm, from its module (built on the first require).
local function build(windowType)
  if windowType == 'fixed' then return require('fixed').fixed end
  if windowType == 'calendar' then return require('calendar').calendar end
  if windowType == 'sliding-log' then return require('sliding-log').slidingLog end
  if windowType == 'sliding' then return require('sliding').sliding end
  if windowType == 'token-bucket' then return require('token-bucket').tokenBucket end
  if windowType == 'gcra' then return require('gcra').gcra end
  if windowType == 'concurrency' then return require('concurrency').concurrency end
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

-- SET with both NX and GET: Redis 7.0 and later.
local SET_NX_GET = (redis.REDIS_VERSION_NUM or 0) >= 0x070000

-- The algorithm of an op whose rule's state is one in its identity record (op.field, the rule's
-- name; protocol.lua readOp; identity-record.lua): the same verdicts and state values as `alg`, read from and
-- written into the identity record (GET, then SET of the whole record with its TTL). No `encode` (the string
-- fast paths of check.lua: SET NX GET of the state itself); its value is `recordEncode`.
local function inRecord(alg)
  local identityRecord = require('identity-record')
  local encode, decode = alg.encode, alg.decode
  local variant = setmetatable({}, { __index = alg })
  variant.encode, variant.recordEncode, variant.field = false, encode, true
  variant.load = function(key, op)
    local found = identityRecord.read(key)
    return found and decode(found.states[op.field])
  end
  variant.save = function(key, state, op, nowMs)
    local value, ttl = encode(state, op, nowMs)
    local changed = identityRecord.live(identityRecord.read(key), nowMs)
    identityRecord.put(changed, op.field, value, ttl, nowMs)
    identityRecord.write(key, changed, nowMs)
  end
  -- freshAdmits: the value and TTL of the state an op leaves on an empty state.
  variant.prepare = function(op, nowMs)
    if alg.fresh then
      op.freshValue, op.freshTtl = alg.fresh(op, nowMs)
    else
      op.freshValue, op.freshTtl = encode(alg.apply(nil, op, nowMs), op, nowMs)
    end
  end
  variant.create = function(key, op, nowMs)
    local changed = identityRecord.live(identityRecord.read(key), nowMs)
    identityRecord.put(changed, op.field, op.freshValue, op.freshTtl, nowMs)
    identityRecord.write(key, changed, nowMs)
  end
  variant.drop = function(key, op, nowMs)
    local found = identityRecord.read(key)
    if found == nil or found.states[op.field] == nil then return end
    found.states[op.field] = nil
    identityRecord.write(key, found, nowMs)
  end
  return variant
end

-- Window type -> its algorithm on an identity record's state (inRecord), built on first use.
local byField = setmetatable({}, {
  __index = function(known, windowType)
    local found = inRecord(byType[windowType])
    rawset(known, windowType, found)
    return found
  end,
})

-- The algorithm an op is decided by: its window type's, on its own key or in its identity record.
-- Kept on the op (op.alg; its copies keep it too), so that the drivers read `op.alg or algOf(op)`: a
-- field, not a call, on every use after the first.
local function algOf(op)
  local alg
  if op.field then alg = byField[op.type] else alg = byType[op.type] end
  op.alg = alg
  return alg
end

-- Deletes an op's state: its key, or its state in the identity record.
local function drop(alg, key, op, nowMs)
  if alg.drop then
    alg.drop(key, op, nowMs)
  else
    redis.call('DEL', key)
  end
end

-- Loads a key's state, forgetting it once its algorithm says it means nothing any more (as the
-- memory store's expiry does): the TTL alone cannot be trusted when tests inject a clock.
local function loadLive(alg, key, op, nowMs)
  local state = alg.load(key, op, nowMs)
  if state ~= nil and alg.expiresAt(state, op) <= nowMs then return nil end
  return state
end

-- The op with another cost (reporting a state as it is: cost 0). Ops are shared by their uses: never modified.
local function withCost(op, cost)
  local copy = {}
  for k, v in pairs(op) do copy[k] = v end
  copy.cost, copy.costText = cost, tostring(cost)
  -- Not the original's fresh state (check.lua): that was for its cost.
  copy.freshAtMs, copy.freshAllowed = nil, nil
  return copy
end

-- Whether an op admits on an empty state (its cost fits its limit or burst: the same at any time, for
-- every algorithm), and when it does, its fresh state at nowMs made ready to write: op.freshValue and
-- op.freshTtl (algorithms with encode: the value and TTL of the state after the op), or what the
-- algorithm's prepare sets for its create. Every empty key the op meets at nowMs gets that state
-- (check.lua). Kept on the op (which a function library keeps between calls) for the time it was
-- made for: encoded once per op and time.
local function freshAdmits(op, alg, nowMs)
  local allowed = op.freshAllowed
  if allowed == nil then
    allowed = alg.evaluate(nil, op, nowMs, false).allowed
    op.freshAllowed = allowed
  end
  if allowed and op.freshAtMs ~= nowMs then
    op.freshAtMs = nowMs
    if alg.fresh then
      op.freshValue, op.freshTtl = alg.fresh(op, nowMs)
    elseif alg.encode then
      op.freshValue, op.freshTtl = alg.encode(alg.apply(nil, op, nowMs), op, nowMs)
    else
      alg.prepare(op, nowMs)
    end
  end
  return allowed
end

-- For an op that freshAdmits: the live state its key holds (nil: none, or ended), or true when the key
-- was empty and now holds the op's fresh state. One command for a string state (SET NX GET: written
-- only when empty; before Redis 7, GET then SET); a read, then the create's writes, for the others.
local function readOrCreate(op, alg, key, nowMs)
  local state
  if alg.encode then
    local old
    if SET_NX_GET then
      old = redis.call('SET', key, op.freshValue, 'NX', 'GET', 'PX', op.freshTtl)
    else
      old = redis.call('GET', key)
      if not old then redis.call('SET', key, op.freshValue, 'PX', op.freshTtl) end
    end
    if not old then return true end
    state = alg.decode(old)
  else
    state = alg.load(key, op, nowMs)
    if state == nil then
      alg.create(key, op, nowMs)
      return true
    end
  end
  if alg.expiresAt(state, op) <= nowMs then return nil end
  return state
end

return {
  byType = byType, loadLive = loadLive, withCost = withCost, freshAdmits = freshAdmits, readOrCreate = readOrCreate,
  SET_NX_GET = SET_NX_GET, algOf = algOf, drop = drop,
}
