-- Token bucket (src/algorithms/token-bucket.ts): refills `limit` tokens per sizeMs, up to `burst`.
-- Not a script by itself: ALG['token-bucket'] is called by check.lua and refund.lua with an op's count key
-- (their KEYS) and the op decoded from their ARGV (prelude.lua readOps); it returns Lua tables, not replies.
-- Tokens are counted in units of 1/sizeMs token (scaled = tokens x sizeMs), so every figure is exact
-- integer arithmetic, here as in TypeScript.
-- State: one string at the count key, "<scaled>:<ts>": scaled tokens left at ts (epoch ms of the last refill).
-- Receipt: 0 (a refund puts tokens back wherever the bucket stands).

-- Scaled tokens at nowMs; time never runs backwards (a clock behind ts reads as ts).
local function refill(state, op, nowMs)
  local capacity = op.burst * op.sizeMs
  if state == nil then return { scaled = capacity, ts = nowMs } end
  local ts = math.max(nowMs, state.ts)
  -- Once full the bucket stays full; the cap keeps elapsed x limit small. Counted from the level it was
  -- left at, which a record can take below zero (a debt takes longer than capacity/limit to refill).
  local elapsed = math.min(ts - state.ts, ceilDiv(capacity - state.scaled, op.limit))
  return { scaled = math.min(capacity, state.scaled + elapsed * op.limit), ts = ts }
end

local function bucketExpiresAt(state, op)
  return state.ts + ceilDiv(op.burst * op.sizeMs - state.scaled, op.limit)
end

ALG['token-bucket'] = {
  load = function(key)
    local s = redis.call('GET', key)
    if not s then return nil end
    local colon = string.find(s, ':', 1, true)
    return { scaled = tonumber(string.sub(s, 1, colon - 1)), ts = tonumber(string.sub(s, colon + 1)) }
  end,
  save = function(key, state, op, nowMs)
    local value = num(state.scaled) .. ':' .. num(state.ts)
    redis.call('SET', key, value, 'PX', ttlMs(bucketExpiresAt(state, op), nowMs))
  end,
  evaluate = function(state, op, nowMs, add)
    local burst, limit, sizeMs = op.burst, op.limit, op.sizeMs
    local scaled = refill(state, op, nowMs).scaled
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
  apply = function(state, op, nowMs)
    local live = refill(state, op, nowMs)
    return { scaled = live.scaled - op.cost * op.sizeMs, ts = live.ts }
  end,
  refund = function(state, op, nowMs)
    local live = refill(state, op, nowMs)
    local capacity = op.burst * op.sizeMs
    local scaled = math.min(capacity, live.scaled + op.cost * op.sizeMs)
    if scaled >= capacity then return nil end
    return { scaled = scaled, ts = live.ts }
  end,
  expiresAt = bucketExpiresAt,
}
