-- GCRA (src/algorithms/gcra.ts), leaky bucket as a meter: one number per key.
-- Not a script by itself: ALG['gcra'] is called by check.lua and refund.lua with an op's count key
-- (their KEYS) and the op decoded from their ARGV (prelude.lua readOps); it returns Lua tables, not replies.
-- State: one int-encoded string at the count key: the theoretical arrival time (TAT) in whole epoch
-- microseconds. It advances by cost x size/limit per op, rounded to the nearest µs (Math.round);
-- decisions compare in units of 1/limit µs relative to now, which are exact integers. Receipt: 0.

-- Backlog (TAT - now) in µs, never negative; time never runs backwards (a TAT ahead of now stays).
local function backlogUs(state, nowMs)
  local nowUs = nowMs * 1000
  if state ~= nil and state.tatUs > nowUs then return state.tatUs - nowUs end
  return 0
end

-- µs one op of this cost takes in the bucket.
local function stepUs(op)
  return round((op.cost * op.sizeMs * 1000) / op.limit)
end

ALG['gcra'] = {
  load = function(key)
    local s = redis.call('GET', key)
    if not s then return nil end
    return { tatUs = tonumber(s) }
  end,
  save = function(key, state, _, nowMs)
    redis.call('SET', key, num(state.tatUs), 'PX', ttlMs(math.ceil(state.tatUs / 1000), nowMs))
  end,
  evaluate = function(state, op, nowMs, add)
    local burst, limit = op.burst, op.limit
    -- Scaled units: 1 = 1/limit µs, so one request unit is exactly sizeMs x 1000.
    local unit = op.sizeMs * 1000
    local capacity = burst * unit
    local base = backlogUs(state, nowMs) * limit
    local allowed = base + op.cost * unit <= capacity
    local used = base
    if allowed or add then used = base + op.cost * unit end
    local free = floorDiv(capacity - used, unit)
    local remaining = math.max(0, free)
    -- One more unit is free once the backlog drops to the multiple of a unit below it.
    local untilUnit = used - (burst - remaining - 1) * unit
    local resetMs, retryAfterMs = 0, 0
    if not (used <= 0 or remaining >= burst) then resetMs = ceilDiv(untilUnit, limit * 1000) end
    if not allowed then
      retryAfterMs = math.max(1, ceilDiv(base + math.min(op.cost, burst) * unit - capacity, limit * 1000))
    end
    return {
      allowed = allowed,
      remaining = remaining,
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = burst - free,
      receipt = 0,
    }
  end,
  apply = function(state, op, nowMs)
    local nowUs = nowMs * 1000
    local tat = nowUs
    if state ~= nil and state.tatUs > nowUs then tat = state.tatUs end
    return { tatUs = tat + stepUs(op) }
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
