-- Fixed window (src/algorithms/fixed.ts): starts at the first counted hit, lasts sizeMs.
-- A module (require('fixed')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm is
-- called by the drivers (check.lua, refund.lua) with an op's count key (one of their KEYS) and the op
-- decoded from their ARGV (protocol.lua readOp); it returns Lua tables. Exports fixed, and the counter
-- calendar.lua shares, as fixed.ts does: evaluateCounter, refundCounter, and the counter's value:
-- decodeCounter, encodeCounter, loadCounter, saveCounter.
-- State: one string at the count key. Usually the integer endRel * 10^7 + count, where
-- endRel = endMs - 1577836800000 (ms since 2020-01-01) and count < 10^7, so Redis stores it as an
-- int-encoded string; when that does not fit (count >= 10^7, a fractional or far-away end),
-- the text "<endMs>:<count>". The window end lives in the value, never only in the TTL. Receipt: endMs.
--
-- KEYS        none: a module (require('fixed')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { fixed, evaluateCounter, refundCounter, decodeCounter, encodeCounter, loadCounter, saveCounter }:
--             fixed is the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, decode, encode): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (the window's end, epoch ms) }

local protocol = require('protocol')
local num, ttlMs = protocol.num, protocol.ttlMs

-- As locals: read on every fresh window (freshCounter), where a global's lookup is a third of the work.
local floor, format = math.floor, string.format

local EPOCH_2020_MS = 1577836800000
local PACK = 10000000

-- { count, endMs, packed } of a count key's value (nil: none). `packed` when the value is the integer
-- rel * 10^7 + count, which INCRBY can add to (rel > 0: no sign, no leading zero).
local function decodeCounter(s)
  if not s then return nil end
  local colon = string.find(s, ':', 1, true)
  if colon then
    return { endMs = tonumber(string.sub(s, 1, colon - 1)), count = tonumber(string.sub(s, colon + 1)) }
  end
  -- The packed value exceeds 2^53, so it is read as two pieces of text, never as one number.
  local n = #s
  local rel = 0
  if n > 7 then rel = tonumber(string.sub(s, 1, n - 7)) end
  return { endMs = rel + EPOCH_2020_MS, count = tonumber(string.sub(s, -7)), packed = rel > 0 }
end

local function loadCounter(key)
  return decodeCounter(redis.call('GET', key))
end

-- The value and TTL (ms, as text or number) a state is written with.
local function encodeCounter(state, op, nowMs)
  local rel = state.endMs - EPOCH_2020_MS
  local value
  if state.count < PACK and state.count == math.floor(state.count) and rel == math.floor(rel)
    and math.abs(rel) < 900000000000 then
    if rel >= 1000000 then
      -- In pieces below 10^6, which '%d' (a C long: 32 bits on some builds) prints exactly, in half
      -- the time '%.0f' takes.
      local high = math.floor(rel / 1000000)
      value = string.format('%d%06d%07d', high, rel - high * 1000000, state.count)
    else
      value = string.format('%.0f%07d', rel, state.count)
    end
  else
    value = num(state.endMs) .. ':' .. num(state.count)
  end
  local ttl = ttlMs(state.endMs, nowMs)
  -- A window starting now lives the op's size: sent as received (see costText in protocol.lua).
  if ttl == op.sizeMs and op.sizeMsText then ttl = op.sizeMsText end
  return value, ttl
end

-- What encodeCounter gives for the window an op starts at nowMs on an empty key (apply(nil, op, nowMs)),
-- without building that state: the digits of endRel, then the op's count as 7 digits, and the op's size
-- as sent for TTL. The count's digits and those of endRel above 10^6 (they change every 16 minutes) are
-- kept on the op. Where the value would not be packed, or the size is not a whole number of ms,
-- encodeCounter itself. A decision alone on a new key pays this once per call.
local function freshCounter(op, nowMs)
  local count = op.packedCount
  if count == nil then
    local cost, sizeMs = op.cost, op.sizeMs
    count = false
    if cost < PACK and cost == floor(cost) and sizeMs == floor(sizeMs) and sizeMs >= 1 and op.sizeMsText then
      count = format('%07d', cost)
    end
    op.packedCount = count
  end
  local rel = nowMs + op.sizeMs - EPOCH_2020_MS
  if count and rel >= 1000000 and rel < 900000000000 and rel % 1 == 0 then
    local low = rel % 1000000
    local high = (rel - low) / 1000000
    if op.packedHigh ~= high then
      op.packedHigh, op.packedHighText = high, format('%d', high)
    end
    return op.packedHighText .. format('%06d', low) .. count, op.sizeMsText
  end
  return encodeCounter({ count = op.cost, endMs = nowMs + op.sizeMs }, op, nowMs)
end

-- `state.add`, set by apply when the stored value is packed and holds the same window: the units
-- added to it, as text (the op's costText). INCRBY then writes it in place, keeping the TTL the
-- window's first write set (the same instant a new PX would name); every other change rewrites value
-- and TTL.
local function saveCounter(key, state, op, nowMs)
  if state.add and state.count < PACK then
    redis.call('INCRBY', key, state.add)
    return
  end
  local value, ttl = encodeCounter(state, op, nowMs)
  redis.call('SET', key, value, 'PX', ttl)
end

-- Counting against a window that ends at endMs; shared with calendar windows.
local function evaluateCounter(count, endMs, op, nowMs, add)
  local total = count + op.cost
  local allowed = total <= op.limit
  local counted = count
  if allowed or add then counted = total end
  local untilEnd = endMs - nowMs
  local resetMs, retryAfterMs = 0, 0
  if counted > 0 then resetMs = untilEnd end
  if not allowed then retryAfterMs = untilEnd end
  return {
    allowed = allowed,
    remaining = math.max(0, op.limit - counted),
    resetMs = resetMs,
    retryAfterMs = retryAfterMs,
    count = counted,
    receipt = endMs,
  }
end

-- Gives a reservation back; shared with calendar windows. Only the window it was made in can.
local function refundCounter(state, op, nowMs, receipt)
  if state.endMs ~= receipt or nowMs >= state.endMs then return state end
  local count = math.max(0, state.count - op.cost)
  if count == 0 then return nil end
  return { count = count, endMs = state.endMs }
end

local fixed = {
  load = loadCounter,
  save = saveCounter,
  decode = decodeCounter,
  encode = encodeCounter,
  fresh = freshCounter,
  evaluate = function(state, op, nowMs, add)
    -- A missing or ended window reads as a fresh one starting now.
    if state ~= nil and nowMs < state.endMs then
      return evaluateCounter(state.count, state.endMs, op, nowMs, add)
    end
    return evaluateCounter(0, nowMs + op.sizeMs, op, nowMs, add)
  end,
  apply = function(state, op, nowMs)
    -- In place, as fixed.ts: the state was loaded for this op alone.
    if state ~= nil and nowMs < state.endMs then
      state.count = state.count + op.cost
      state.add = state.packed and op.costText
      return state
    end
    return { count = op.cost, endMs = nowMs + op.sizeMs }
  end,
  refund = refundCounter,
  expiresAt = function(state)
    return state.endMs
  end,
}

return {
  fixed = fixed,
  evaluateCounter = evaluateCounter,
  refundCounter = refundCounter,
  decodeCounter = decodeCounter,
  encodeCounter = encodeCounter,
  loadCounter = loadCounter,
  saveCounter = saveCounter,
}
