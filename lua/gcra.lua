-- GCRA (src/algorithms/gcra.ts), leaky bucket as a meter: one number per key.
-- A module (require('gcra')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm is
-- called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- State: one int-encoded string at the count key: the theoretical arrival time (TAT) in whole epoch
-- microseconds, at most 2^53 - 1. It advances by cost x size/limit per op, rounded to the nearest µs (Math.round);
-- decisions count whole units relative to now, exactly (unitsIn). The state is time, so a key whose
-- limit changes between requests keeps its backlog, counted in units of the new limit. Receipt: 0.
-- The op's limit and burst: ARGV fields of each op (burst = the explicit one, else the op's limit).
--
-- KEYS        none: a module (require('gcra')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { gcra }: the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, decode, encode): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (0) }

local intMath, protocol = require('int-math'), require('protocol')
local ceilDiv, floorDiv, round = intMath.ceilDiv, intMath.floorDiv, intMath.round
local num, ttlMs = protocol.num, protocol.ttlMs

-- Backlog (TAT - now) in µs, never negative; time never runs backwards (a TAT ahead of now stays).
local function backlogUs(state, nowMs)
  local nowUs = nowMs * 1000
  if state ~= nil and state.tatUs > nowUs then return state.tatUs - nowUs end
  return 0
end

-- The latest TAT a state holds, 2^53 - 1 µs (MAX_TAT_US in src/algorithms/gcra.ts): every TAT stays an
-- exact integer in a double, as in sql/gcra.sql's bigint. Only a debt reaches it.
local MAX_TAT_US = 9007199254740991

-- How far an op moves the TAT: cost x size/limit, rounded to the nearest µs, at most MAX_TAT_US.
local function stepUs(op)
  return math.min(MAX_TAT_US, round((op.cost * op.sizeMs * 1000) / op.limit))
end

-- Units a backlog of backlogUs holds at `limit` (one unit takes unitUs / limit µs): ceil(backlog x
-- limit / unitUs), without forming backlog x limit, which passes 2^53 when the limit of a key grows.
local function unitsIn(backlog, limit, unitUs)
  local whole = floorDiv(backlog, unitUs)
  return whole * limit + ceilDiv((backlog - whole * unitUs) * limit, unitUs)
end

-- Ms until (backlog x limit + units x unitUs) µs·limit have drained at limit x 1000 per ms, rounded up.
local function msUntil(backlog, units, op)
  local ms = floorDiv(backlog, 1000)
  return ms + ceilDiv((backlog - ms * 1000) * op.limit + units * op.sizeMs * 1000, op.limit * 1000)
end

-- The state of a count key's value (nil: none).
local function decode(s)
  if not s then return nil end
  return { tatUs = tonumber(s) }
end

-- The value and TTL (ms) a state is written with.
local function encode(state, _, nowMs)
  return num(state.tatUs), ttlMs(math.ceil(state.tatUs / 1000), nowMs)
end

local gcra = {
  decode = decode,
  encode = encode,
  load = function(key)
    return decode(redis.call('GET', key))
  end,
  save = function(key, state, op, nowMs)
    local value, ttl = encode(state, op, nowMs)
    redis.call('SET', key, value, 'PX', ttl)
  end,
  evaluate = function(state, op, nowMs, add)
    local burst = op.burst
    local backlog = backlogUs(state, nowMs)
    -- Units in use, rounded up: the backlog's, plus this op's when it counts.
    local inUse = unitsIn(backlog, op.limit, op.sizeMs * 1000)
    local allowed = inUse + op.cost <= burst
    local added = 0
    if allowed or add then added = op.cost end
    local counted = inUse + added
    local remaining = math.max(0, burst - counted)
    local resetMs, retryAfterMs = 0, 0
    -- One more unit is free once the backlog drops to the multiple of a unit below it.
    if counted ~= 0 then resetMs = msUntil(backlog, added - burst + remaining + 1, op) end
    if not allowed then retryAfterMs = math.max(1, msUntil(backlog, math.min(op.cost, burst) - burst, op)) end
    return {
      allowed = allowed,
      remaining = remaining,
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = counted,
      receipt = 0,
    }
  end,
  apply = function(state, op, nowMs)
    local nowUs = nowMs * 1000
    local tat = nowUs
    if state ~= nil and state.tatUs > nowUs then tat = state.tatUs end
    return { tatUs = math.min(MAX_TAT_US, tat + stepUs(op)) }
  end,
  refund = function(state, op, nowMs)
    local tatUs = state.tatUs - stepUs(op)
    if tatUs <= nowMs * 1000 then return nil end
    return { tatUs = tatUs }
  end,
  expiresAt = function(state)
    return math.ceil(state.tatUs / 1000)
  end,
}

return { gcra = gcra }
