-- Token bucket (src/algorithms/token-bucket.ts): refills `limit` tokens per sizeMs, up to `burst`.
-- A module (require('token-bucket')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm
-- is called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- Tokens are counted in units of 1/sizeMs token (scaled = tokens x sizeMs), so every figure is exact
-- integer arithmetic, here as in TypeScript.
-- State: one string at the count key, "<scaled>:<ts>:<size>": scaled tokens left at ts (epoch ms of the last
-- refill), counted in units of 1/size token (size: the window size in ms; absent in a key of an earlier
-- release: the op's). A request of another size (a size chosen per client) refills at the state's size up
-- to now, then keeps its whole tokens in its own size, as token-bucket.ts says.
-- Receipt: 0 (a refund puts tokens back wherever the bucket stands).
--
-- KEYS        none: a module (require('token-bucket')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { tokenBucket }: the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, decode, encode): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (0) }

local intMath, protocol = require('int-math'), require('protocol')
local ceilDiv, floorDiv, num, ttlMs = intMath.ceilDiv, intMath.floorDiv, protocol.num, protocol.ttlMs

-- Time of the refill at nowMs: time never runs backwards (a clock behind ts reads as ts).
local function refillTs(state, nowMs)
  if state == nil then return nowMs end
  return math.max(nowMs, state.ts)
end

-- Scaled tokens at nowMs (see refillTs), in units of 1/sizeMs token (the op's size when sizeMs is nil).
local function refilled(state, op, nowMs, sizeMs)
  local capacity = op.burst * (sizeMs or op.sizeMs)
  if state == nil then return capacity end
  -- Once full the bucket stays full; the cap keeps elapsed x limit small. Counted from the level it was
  -- left at, which a record can take below zero (a debt takes longer than capacity/limit to refill).
  local elapsed = math.min(refillTs(state, nowMs) - state.ts, ceilDiv(capacity - state.scaled, op.limit))
  return math.min(capacity, state.scaled + elapsed * op.limit)
end

local function expiresAt(state, op)
  return state.ts + ceilDiv(op.burst * (state.sizeMs or op.sizeMs) - state.scaled, op.limit)
end

-- The bucket in the op's size (token-bucket.ts inOpSize).
local function inOpSize(state, op, nowMs)
  if state == nil or state.sizeMs == nil or state.sizeMs == op.sizeMs then return state end
  local whole = floorDiv(refilled(state, op, nowMs, state.sizeMs), state.sizeMs)
  return { scaled = whole * op.sizeMs, ts = refillTs(state, nowMs), sizeMs = op.sizeMs }
end

-- The state of a count key's value (nil: none).
local function decode(s)
  if not s then return nil end
  local colon = string.find(s, ':', 1, true)
  local second = string.find(s, ':', colon + 1, true)
  if not second then
    return { scaled = tonumber(string.sub(s, 1, colon - 1)), ts = tonumber(string.sub(s, colon + 1)) }
  end
  return {
    scaled = tonumber(string.sub(s, 1, colon - 1)), ts = tonumber(string.sub(s, colon + 1, second - 1)),
    sizeMs = tonumber(string.sub(s, second + 1)),
  }
end

-- The value and TTL (ms) a state is written with (its size as sent, when it is the op's).
local function encode(state, op, nowMs)
  local value = num(state.scaled) .. ':' .. num(state.ts)
  if state.sizeMs == op.sizeMs and op.sizeMsText then
    value = value .. ':' .. op.sizeMsText
  elseif state.sizeMs then
    value = value .. ':' .. num(state.sizeMs)
  end
  return value, ttlMs(expiresAt(state, op), nowMs)
end

local tokenBucket = {
  decode = decode,
  encode = encode,
  load = function(key)
    return decode(redis.call('GET', key))
  end,
  save = function(key, state, op, nowMs)
    local value, ttl = encode(state, op, nowMs)
    redis.call('SET', key, value, 'PX', ttl)
  end,
  evaluate = function(stored, op, nowMs, add)
    local state = inOpSize(stored, op, nowMs)
    local burst, limit, sizeMs = op.burst, op.limit, op.sizeMs
    local scaled = refilled(state, op, nowMs)
    local need = op.cost * sizeMs
    local allowed = scaled >= need
    local after = scaled
    if allowed or add then after = scaled - need end
    local whole = floorDiv(after, sizeMs)
    -- Until one more whole token is there (0 when the bucket is full).
    local nextUnit = math.max(1, whole + 1) * sizeMs
    local resetMs, retryAfterMs = 0, 0
    if after < burst * sizeMs then resetMs = ceilDiv(nextUnit - after, limit) end
    -- A cost above the burst never fits; the best answer is the time until the bucket is full.
    if not allowed then retryAfterMs = ceilDiv(math.min(op.cost, burst) * sizeMs - scaled, limit) end
    return {
      allowed = allowed,
      remaining = math.max(0, whole),
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = burst - whole,
      receipt = 0,
    }
  end,
  apply = function(stored, op, nowMs)
    local state = inOpSize(stored, op, nowMs)
    return {
      scaled = refilled(state, op, nowMs) - op.cost * op.sizeMs, ts = refillTs(state, nowMs), sizeMs = op.sizeMs,
    }
  end,
  refund = function(state, op, nowMs)
    -- The tokens go back in the bucket's own size (token-bucket.ts).
    local sizeMs = state.sizeMs or op.sizeMs
    local capacity = op.burst * sizeMs
    local scaled = math.min(capacity, refilled(state, op, nowMs, sizeMs) + op.cost * sizeMs)
    if scaled >= capacity then return nil end
    return { scaled = scaled, ts = refillTs(state, nowMs), sizeMs = state.sizeMs }
  end,
  expiresAt = expiresAt,
}

return { tokenBucket = tokenBucket }
