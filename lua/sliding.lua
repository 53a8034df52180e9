-- Sliding counter (src/algorithms/sliding.ts): `buckets` sub-windows of sizeMs / buckets each.
-- A module (require('sliding')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm is
-- called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- State: a HASH at the count key, field = bucket index (floor(t / width)), value = units counted in
-- that bucket, and field 's' = the window size (ms) the buckets count in (absent in a key of an earlier
-- release: the op's). Buckets that stopped counting are deleted whenever the key is written. A request of
-- another size (a size chosen per client) re-files the buckets into its own width, as sliding.ts says.
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

-- The state as buckets of the op's size (sliding.ts inOpSize): a state of another size has each bucket
-- still counting re-filed into the op's width, and is marked to be written whole (refiled).
local function inOpSize(state, op, nowMs)
  if state == nil or state.sizeMs == nil or state.sizeMs == op.sizeMs then return state end
  local buckets = op.buckets
  local fromWidth, to = state.sizeMs / buckets, width(op)
  local current = math.floor(nowMs / fromWidth)
  local list = {}
  for _, bucket in ipairs(state.buckets) do
    if bucket.index >= current - buckets then
      local index = math.ceil((bucket.index + buckets + 1) * fromWidth / to) - buckets - 1
      local last = list[#list]
      if last ~= nil and last.index == index then
        last.count = last.count + bucket.count
      else
        list[#list + 1] = { index = index, count = bucket.count }
      end
    end
  end
  return { buckets = list, sizeMs = op.sizeMs, dead = {}, changes = {}, refiled = true }
end

-- The op's size as text, for the state's 's' field (as sent, when the op came from the wire).
local function sizeText(op)
  return op.sizeMsText or num(op.sizeMs)
end

-- Epoch ms at which the state's newest bucket stops counting, in the size its buckets count in.
local function stateEnd(state, op)
  local last = state.buckets[#state.buckets]
  if last == nil then return 0 end
  return math.ceil((last.index + op.buckets + 1) * ((state.sizeMs or op.sizeMs) / op.buckets))
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
    redis.call('HSET', key, op.freshField, op.freshCount, 's', sizeText(op))
    redis.call('PEXPIRE', key, op.freshTtl)
  end,
  load = function(key)
    local flat = redis.call('HGETALL', key)
    if #flat == 0 then return nil end
    local list, sizeMs = {}, nil
    for i = 1, #flat, 2 do
      if flat[i] == 's' then
        sizeMs = tonumber(flat[i + 1])
      else
        list[#list + 1] = { index = tonumber(flat[i]), count = tonumber(flat[i + 1]) }
      end
    end
    table.sort(list, function(a, b) return a.index < b.index end)
    return { buckets = list, sizeMs = sizeMs, dead = {}, changes = {} }
  end,
  save = function(key, state, op, nowMs)
    if state.refiled then
      -- Re-filed into another size, or anew: every field anew.
      redis.call('DEL', key)
      for _, b in ipairs(state.buckets) do redis.call('HSET', key, num(b.index), num(b.count)) end
    else
      if #state.dead > 0 then redis.call('HDEL', key, unpack(state.dead)) end
      for _, c in ipairs(state.changes) do
        if c.count > 0 then redis.call('HSET', key, num(c.index), num(c.count))
        else redis.call('HDEL', key, num(c.index)) end
      end
    end
    if state.writeSize then
      local text = sizeText(op)
      if state.sizeMs ~= op.sizeMs then text = num(state.sizeMs) end
      redis.call('HSET', key, 's', text)
    end
    redis.call('PEXPIRE', key, ttlMs(stateEnd(state, op), nowMs))
  end,
  evaluate = function(stored, op, nowMs, add)
    local state = inOpSize(stored, op, nowMs)
    local limit = op.limit
    local current = math.floor(nowMs / width(op))
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
  apply = function(stored, op, nowMs)
    local state = inOpSize(stored, op, nowMs)
    local current = math.floor(nowMs / width(op))
    local list = {}
    if state ~= nil then list = state.buckets end
    local first = firstLive(state, current, op.buckets)
    local out = { dead = {}, changes = {}, sizeMs = op.sizeMs }
    -- Written whole: re-filed, or on a key whose state has ended (its dead fields may be of another size).
    out.refiled = state == nil or state.refiled
    -- A new key, or one of an earlier release or of another size, gets its size written.
    out.writeSize = state == nil or state.sizeMs ~= op.sizeMs or out.refiled
    local live = list
    if first > 1 then
      live = {}
      for i = 1, first - 1 do out.dead[i] = num(list[i].index) end
      for i = first, #list do live[#live + 1] = list[i] end
    end
    if op.cost > 0 then
      -- Oldest first: a bucket re-filed from a longer size, or written on a clock ahead, may come after this one.
      local at = #live + 1
      while at > 1 and live[at - 1].index > current do at = at - 1 end
      local before = live[at - 1]
      if before ~= nil and before.index == current then
        before.count = before.count + op.cost
        out.changes[1] = before
      else
        local bucket = { index = current, count = op.cost }
        table.insert(live, at, bucket)
        out.changes[1] = bucket
      end
    end
    out.buckets = live
    return out
  end,
  refund = function(state, op, _, receipt)
    -- A receipt is a bucket of its op's size: one re-filed into another size since is not found again.
    if state.sizeMs ~= nil and state.sizeMs ~= op.sizeMs then return state end
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
  expiresAt = stateEnd,
}

return { sliding = sliding }
