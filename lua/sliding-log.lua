-- Sliding log (src/algorithms/sliding-log.ts): exact; a hit at t counts until t + sizeMs.
-- A module (require('sliding-log')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm
-- is called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their
-- ARGV; it returns Lua tables.
-- State: a ZSET at the count key, one member per distinct millisecond: score = ts (epoch ms),
-- member "<ts>:<cost>" (units hit at that ms). A hit at an ms already logged replaces its member. The
-- size (ms) the entries count in is the member "s:<size>" at score +inf (absent in a key of an earlier
-- release: the op's). A request of another size (a size chosen per client) moves every entry's time so that
-- it leaves when it would have, as sliding-log.ts says, and writes the log anew.
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

-- The log in the op's size (sliding-log.ts inOpSize), marked to be written whole (refiled).
local function inOpSize(state, op)
  if state == nil or state.sizeMs == nil or state.sizeMs == op.sizeMs then return state end
  local shift = state.sizeMs - op.sizeMs
  local entries = {}
  for i, e in ipairs(state.entries) do entries[i] = { ts = e.ts + shift, cost = e.cost } end
  return { entries = entries, sizeMs = op.sizeMs, changes = {}, refiled = true }
end

-- The size member of a log counting in the op's size ("s:<size>", as sent when the op came from the wire).
local function sizeMember(op, sizeMs)
  if sizeMs == op.sizeMs and op.sizeMsText then return 's:' .. op.sizeMsText end
  return 's:' .. num(sizeMs)
end

-- Epoch ms at which the newest entry leaves, in the size the entries count in.
local function stateEnd(state, op)
  local last = state.entries[#state.entries]
  if last == nil then return 0 end
  return last.ts + (state.sizeMs or op.sizeMs)
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
    redis.call('ZADD', key, op.freshScore, op.freshMember, '+inf', sizeMember(op, op.sizeMs))
    redis.call('PEXPIRE', key, op.freshTtl)
  end,
  load = function(key)
    local members = redis.call('ZRANGE', key, 0, -1)
    if #members == 0 then return nil end
    local entries, sizeMs = {}, nil
    for i = 1, #members do
      local m = members[i]
      local colon = string.find(m, ':', 1, true)
      if colon == 2 and string.byte(m, 1) == 115 then
        -- "s:<size>", last (score +inf).
        sizeMs = tonumber(string.sub(m, 3))
      else
        entries[i] = { ts = tonumber(string.sub(m, 1, colon - 1)), cost = tonumber(string.sub(m, colon + 1)) }
      end
    end
    return { entries = entries, sizeMs = sizeMs, changes = {} }
  end,
  -- Writes change by change: the log can hold `limit` entries, rewriting it all would be O(limit).
  save = function(key, state, op, nowMs)
    if state.refiled then
      -- Moved into another size, or anew: every member anew.
      redis.call('DEL', key)
      for _, e in ipairs(state.entries) do redis.call('ZADD', key, num(e.ts), num(e.ts) .. ':' .. num(e.cost)) end
    else
      if state.dropUpTo ~= nil then redis.call('ZREMRANGEBYSCORE', key, '-inf', num(state.dropUpTo)) end
      for _, c in ipairs(state.changes) do
        if c.old > 0 then redis.call('ZREM', key, num(c.ts) .. ':' .. num(c.old)) end
        if c.new > 0 then redis.call('ZADD', key, num(c.ts), num(c.ts) .. ':' .. num(c.new)) end
      end
    end
    if state.writeSize then redis.call('ZADD', key, '+inf', sizeMember(op, state.sizeMs)) end
    redis.call('PEXPIRE', key, ttlMs(stateEnd(state, op), nowMs))
  end,
  evaluate = function(stored, op, nowMs, add)
    local state = inOpSize(stored, op)
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
  apply = function(stored, op, nowMs)
    local state = inOpSize(stored, op)
    local entries = {}
    if state ~= nil then entries = state.entries end
    local first = firstLive(entries, nowMs, op.sizeMs)
    local live = entries
    -- Written whole: moved into another size, or on a key whose state has ended (its dead entries may be
    -- of another size); a key of an earlier release gets its size.
    local out = { changes = {}, sizeMs = op.sizeMs, refiled = state == nil or state.refiled }
    out.writeSize = out.refiled or state.sizeMs ~= op.sizeMs
    if first > 1 then
      out.dropUpTo = entries[first - 1].ts
      live = {}
      for i = first, #entries do live[#live + 1] = entries[i] end
    end
    if op.cost > 0 then
      -- Oldest first: an entry moved from a longer size, or logged on a clock ahead, may come after this one.
      local at = #live + 1
      while at > 1 and live[at - 1].ts > nowMs do at = at - 1 end
      local before = live[at - 1]
      if before ~= nil and before.ts == nowMs then
        out.changes[1] = { ts = nowMs, old = before.cost, new = before.cost + op.cost }
        before.cost = before.cost + op.cost
      else
        table.insert(live, at, { ts = nowMs, cost = op.cost })
        out.changes[1] = { ts = nowMs, old = 0, new = op.cost }
      end
    end
    out.entries = live
    return out
  end,
  refund = function(state, op, _, receipt)
    -- A receipt is an entry's time in its op's size: one moved into another size since is not found again.
    if state.sizeMs ~= nil and state.sizeMs ~= op.sizeMs then return state end
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
  expiresAt = stateEnd,
}

return { slidingLog = slidingLog }
