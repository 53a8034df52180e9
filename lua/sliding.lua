-- Sliding counter (src/algorithms/sliding.ts): `buckets` sub-windows of sizeMs / buckets each.
-- A module (require('sliding')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm is
-- called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- State: a HASH at the count key, field = bucket index (floor(t / width)), value = units counted in
-- that bucket. Buckets that stopped counting are deleted whenever the key is written.
-- Receipt = the bucket index the op was counted in.
--
-- KEYS        none: a module (require('sliding')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { sliding }: the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, prepare, create): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (a bucket index) }

local num, ttlMs = require('protocol').num, require('protocol').ttlMs

local NONE = {}

local function width(op)
  return op.sizeMs / op.buckets
end

-- A bucket j counts while the current index is at most j + buckets (see sliding.ts).
local function firstLive(state, current, buckets)
  local list = NONE
  if state ~= nil then list = state.buckets end
  local i = 1
  while i <= #list and list[i].index < current - buckets do i = i + 1 end
  return i
end

-- Time never runs backwards: a clock behind the newest bucket reads as that bucket.
local function currentIndex(state, op, nowMs)
  local index = math.floor(nowMs / width(op))
  if state ~= nil then
    local last = state.buckets[#state.buckets]
    if last ~= nil and last.index > index then return last.index end
  end
  return index
end

-- Ms from now until bucket `index` stops counting.
local function expiryMs(index, op, nowMs)
  return math.max(1, math.ceil((index + op.buckets + 1) * width(op) - nowMs))
end

local sliding = {
  -- The state one op leaves on an empty key at nowMs (apply then save, for check.lua's empty keys):
  -- its bucket's field and count, and the TTL.
  prepare = function(op, nowMs)
    local index = math.floor(nowMs / width(op))
    op.freshField, op.freshCount = num(index), num(op.cost)
    op.freshTtl = ttlMs(math.ceil((index + op.buckets + 1) * width(op)), nowMs)
  end,
  create = function(key, op)
    redis.call('HSET', key, op.freshField, op.freshCount)
    redis.call('PEXPIRE', key, op.freshTtl)
  end,
  load = function(key)
    local flat = redis.call('HGETALL', key)
    if #flat == 0 then return nil end
    local list = {}
    for i = 1, #flat, 2 do list[#list + 1] = { index = tonumber(flat[i]), count = tonumber(flat[i + 1]) } end
    table.sort(list, function(a, b) return a.index < b.index end)
    return { buckets = list, dead = {}, changes = {} }
  end,
  save = function(key, state, op, nowMs)
    if #state.dead > 0 then redis.call('HDEL', key, unpack(state.dead)) end
    for _, c in ipairs(state.changes) do
      if c.count > 0 then redis.call('HSET', key, num(c.index), num(c.count))
      else redis.call('HDEL', key, num(c.index)) end
    end
    local last = state.buckets[#state.buckets]
    redis.call('PEXPIRE', key, ttlMs(math.ceil((last.index + op.buckets + 1) * width(op)), nowMs))
  end,
  evaluate = function(state, op, nowMs, add)
    local limit = op.limit
    local current = currentIndex(state, op, nowMs)
    local list = NONE
    if state ~= nil then list = state.buckets end
    local first = firstLive(state, current, op.buckets)
    local used = 0
    for i = first, #list do used = used + list[i].count end
    local total = used + op.cost
    local allowed = total <= limit
    local counted = used
    if allowed or add then counted = total end
    local oldest = nil
    if first <= #list then oldest = list[first].index elseif counted > 0 then oldest = current end
    local retryAfterMs = 0
    if not allowed then
      local freed = 0
      retryAfterMs = expiryMs(current, op, nowMs)
      for i = first, #list do
        freed = freed + list[i].count
        retryAfterMs = expiryMs(list[i].index, op, nowMs)
        if used - freed + op.cost <= limit then break end
      end
    end
    local resetMs = 0
    if oldest ~= nil then resetMs = expiryMs(oldest, op, nowMs) end
    return {
      allowed = allowed,
      remaining = math.max(0, limit - counted),
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = counted,
      receipt = current,
    }
  end,
  apply = function(state, op, nowMs)
    local current = currentIndex(state, op, nowMs)
    local list = {}
    if state ~= nil then list = state.buckets end
    local first = firstLive(state, current, op.buckets)
    local out = { dead = {}, changes = {} }
    local live = list
    if first > 1 then
      live = {}
      for i = 1, first - 1 do out.dead[i] = num(list[i].index) end
      for i = first, #list do live[#live + 1] = list[i] end
    end
    if op.cost > 0 then
      local last = live[#live]
      if last ~= nil and last.index == current then
        last.count = last.count + op.cost
      else
        last = { index = current, count = op.cost }
        live[#live + 1] = last
      end
      out.changes[1] = last
    end
    out.buckets = live
    return out
  end,
  refund = function(state, op, _, receipt)
    for i, bucket in ipairs(state.buckets) do
      if bucket.index == receipt then
        bucket.count = bucket.count - math.min(bucket.count, op.cost)
        state.changes[#state.changes + 1] = bucket
        if bucket.count == 0 then table.remove(state.buckets, i) end
        break
      end
    end
    if #state.buckets == 0 then return nil end
    return state
  end,
  expiresAt = function(state, op)
    local last = state.buckets[#state.buckets]
    if last == nil then return 0 end
    return math.ceil((last.index + op.buckets + 1) * width(op))
  end,
}

return { sliding = sliding }
