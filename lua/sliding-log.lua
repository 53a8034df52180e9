-- Sliding log (src/algorithms/sliding-log.ts): exact; a hit at t counts until t + sizeMs.
-- A module (require('sliding-log')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm
-- is called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- State: a ZSET at the count key, one member per distinct millisecond: score = ts (epoch ms),
-- member "<ts>:<cost>" (units hit at that ms). A hit at an ms already logged replaces its member.
-- Receipt = ts of the entry the op was added to.
--
-- KEYS        none: a module (require('sliding-log')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { slidingLog }: the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, prepare, create): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (an entry's epoch ms) }

local num, ttlMs = require('protocol').num, require('protocol').ttlMs

-- Index of the first entry still inside the window at nowMs.
local function firstLive(entries, nowMs, sizeMs)
  local i = 1
  while i <= #entries and entries[i].ts + sizeMs <= nowMs do i = i + 1 end
  return i
end

-- Time never runs backwards inside the log: a clock behind the newest entry reads as that entry's time.
local function clamp(state, nowMs)
  if state ~= nil then
    local last = state.entries[#state.entries]
    if last ~= nil and last.ts > nowMs then return last.ts end
  end
  return nowMs
end

local slidingLog = {
  -- The state one op leaves on an empty key at nowMs (apply then save, for check.lua's empty keys):
  -- its entry's score and member, and the TTL.
  prepare = function(op, nowMs)
    op.freshScore = num(nowMs)
    op.freshMember = op.freshScore .. ':' .. num(op.cost)
    op.freshTtl = ttlMs(nowMs + op.sizeMs, nowMs)
  end,
  create = function(key, op)
    redis.call('ZADD', key, op.freshScore, op.freshMember)
    redis.call('PEXPIRE', key, op.freshTtl)
  end,
  load = function(key)
    local members = redis.call('ZRANGE', key, 0, -1)
    if #members == 0 then return nil end
    local entries = {}
    for i = 1, #members do
      local m = members[i]
      local colon = string.find(m, ':', 1, true)
      entries[i] = { ts = tonumber(string.sub(m, 1, colon - 1)), cost = tonumber(string.sub(m, colon + 1)) }
    end
    return { entries = entries, changes = {} }
  end,
  -- Writes change by change: the log can hold `limit` entries, rewriting it all would be O(limit).
  save = function(key, state, op, nowMs)
    if state.dropUpTo ~= nil then redis.call('ZREMRANGEBYSCORE', key, '-inf', num(state.dropUpTo)) end
    for _, c in ipairs(state.changes) do
      if c.old > 0 then redis.call('ZREM', key, num(c.ts) .. ':' .. num(c.old)) end
      if c.new > 0 then redis.call('ZADD', key, num(c.ts), num(c.ts) .. ':' .. num(c.new)) end
    end
    local last = state.entries[#state.entries]
    redis.call('PEXPIRE', key, ttlMs(last.ts + op.sizeMs, nowMs))
  end,
  evaluate = function(state, op, now, add)
    local nowMs = clamp(state, now)
    local sizeMs, limit = op.sizeMs, op.limit
    local entries = {}
    if state ~= nil then entries = state.entries end
    local first = firstLive(entries, nowMs, sizeMs)
    local used = 0
    for i = first, #entries do used = used + entries[i].cost end
    local total = used + op.cost
    local allowed = total <= limit
    local counted = used
    if allowed or add then counted = total end
    local oldest = nil
    if first <= #entries then oldest = entries[first].ts elseif counted > 0 then oldest = nowMs end
    local retryAfterMs = 0
    if not allowed then
      -- Walk the oldest entries until enough units have expired for this op to fit.
      local freed = 0
      retryAfterMs = sizeMs
      for i = first, #entries do
        freed = freed + entries[i].cost
        retryAfterMs = entries[i].ts + sizeMs - nowMs
        if used - freed + op.cost <= limit then break end
      end
    end
    local resetMs = 0
    if oldest ~= nil then resetMs = oldest + sizeMs - nowMs end
    return {
      allowed = allowed,
      remaining = math.max(0, limit - counted),
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = counted,
      receipt = nowMs,
    }
  end,
  apply = function(state, op, now)
    local nowMs = clamp(state, now)
    local entries = {}
    if state ~= nil then entries = state.entries end
    local first = firstLive(entries, nowMs, op.sizeMs)
    local live = entries
    local out = { changes = {} }
    if first > 1 then
      out.dropUpTo = entries[first - 1].ts
      live = {}
      for i = first, #entries do live[#live + 1] = entries[i] end
    end
    if op.cost > 0 then
      local last = live[#live]
      if last ~= nil and last.ts == nowMs then
        out.changes[1] = { ts = nowMs, old = last.cost, new = last.cost + op.cost }
        last.cost = last.cost + op.cost
      else
        live[#live + 1] = { ts = nowMs, cost = op.cost }
        out.changes[1] = { ts = nowMs, old = 0, new = op.cost }
      end
    end
    out.entries = live
    return out
  end,
  refund = function(state, op, _, receipt)
    for i, entry in ipairs(state.entries) do
      if entry.ts == receipt then
        local old = entry.cost
        entry.cost = entry.cost - math.min(entry.cost, op.cost)
        state.changes[#state.changes + 1] = { ts = entry.ts, old = old, new = entry.cost }
        if entry.cost == 0 then table.remove(state.entries, i) end
        break
      end
    end
    if #state.entries == 0 then return nil end
    return state
  end,
  expiresAt = function(state, op)
    local last = state.entries[#state.entries]
    if last == nil then return 0 end
    return last.ts + op.sizeMs
  end,
}

return { slidingLog = slidingLog }
