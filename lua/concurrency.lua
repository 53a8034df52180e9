-- Concurrency (src/algorithms/concurrency.ts): admitted while fewer than `limit` slots are held for the key;
-- a slot is held until released (refund) or until its lease (op.sizeMs) ends, unless renewed (renew.lua).
-- A module (require('concurrency')), not a script: no KEYS, no ARGV, no reply of its own. Its algorithm
-- is called by the drivers (check.lua, refund.lua) with an op's count key and the op decoded from their ARGV.
-- State: a ZSET at the count key: one member per held slot, its id (decimal), score = epoch ms its lease
-- ends (lapsed once <= now); and the member '#' whose score is the last slot id handed out (ids are
-- nowMs x 1024 + n, so '#' always scores above every lease end). Slot ids only grow (concurrency.ts
-- SLOT_IDS_PER_MS). Receipt: the id of the op's first slot; an op of cost c holds ids receipt .. receipt+c-1.
-- The state as loaded holds only what a decision reads (the live holders' count, the soonest and
-- latest lease ends, seq), never the whole set: a decision costs the same with 1 or 1000 holders.
--
-- KEYS        none: a module (require('concurrency')); its algorithm gets an op's count key from the drivers
-- ARGV        none
-- Returns     { concurrency, renew, release }: concurrency is the algorithm table of algorithms.lua's header (load, save, evaluate, apply, refund, expiresAt, prepare, create): a
--             verdict is { allowed, remaining (units), resetMs (ms), retryAfterMs (ms), count (units),
--             receipt (the first slot id) };
--             renew and release return 1 when every unit was still held, else 0

local protocol = require('protocol')
local num, ttlMs = protocol.num, protocol.ttlMs
local isServerMs = protocol.isServerMs

local SLOT_IDS_PER_MS = 1024
local SEQ = '#'

-- '(' .. num(nowMs): the bound of the live slots at nowMs, formatted once per time (a call's ops share it).
local liveFromMs, liveFromText = nil, nil
local function liveFrom(nowMs)
  if nowMs ~= liveFromMs then liveFromMs, liveFromText = nowMs, '(' .. num(nowMs) end
  return liveFromText
end

-- num(x) of the last x asked for: the time and lease end of a call's decisions, formatted once.
local function memoNum()
  local lastX, lastText = nil, nil
  return function(x)
    if x ~= lastX then lastX, lastText = x, num(x) end
    return lastText
  end
end
local nowText, untilText = memoNum(), memoNum()

local function nextSlotId(state, nowMs)
  local seq = 0
  if state ~= nil then seq = state.seq end
  return math.max(seq + 1, nowMs * SLOT_IDS_PER_MS + 1)
end

-- Ends `key` at atMs (atText: its text). On the server's clock as that time: PEXPIREAT is propagated as
-- it is, where PEXPIRE is rewritten into it first (some 2,000 instructions of redis-server); an injected
-- clock's time is not the server's, so there as a TTL from nowMs, the op's size as sent when it is that.
local function expireAt(key, atMs, atText, op, nowMs)
  if isServerMs(nowMs) then
    redis.call('PEXPIREAT', key, atText)
    return
  end
  local ttl = ttlMs(atMs, nowMs)
  if ttl == op.sizeMs then ttl = op.sizeMsText else ttl = tostring(ttl) end
  redis.call('PEXPIRE', key, ttl)
end

-- The k-th soonest live lease end (k >= 1).
local function liveUntil(state, nowMs, k)
  if k == 1 and state.first ~= nil then return state.first end
  local found = redis.call('ZRANGEBYSCORE', state.key, liveFrom(nowMs), '+inf', 'WITHSCORES', 'LIMIT', tostring(k - 1), '1')
  return tonumber(found[2])
end

local concurrency = {
  -- The state one op leaves on an empty key at nowMs (apply then save): its first slot's id. The ZADD's
  -- arguments and the TTL as text, made once per op and time (every empty key of a call gets the same):
  -- numbers given to redis.call are printed on each call.
  prepare = function(op, nowMs)
    local id = nowMs * SLOT_IDS_PER_MS + 1
    local untilText = num(nowMs + op.sizeMs)
    local args = {}
    for k = 0, op.cost - 1 do
      args[#args + 1] = untilText
      args[#args + 1] = num(id + k)
    end
    args[#args + 1] = num(id + op.cost - 1)
    args[#args + 1] = SEQ
    op.freshId, op.freshArgs = id, args
    -- As expireAt decides, made once per op and time: every empty key of a call gets the same.
    if isServerMs(nowMs) then
      op.freshExpire, op.freshTtl = 'PEXPIREAT', untilText
    else
      op.freshExpire, op.freshTtl = 'PEXPIRE', tostring(ttlMs(nowMs + op.sizeMs, nowMs))
    end
  end,
  create = function(key, op)
    redis.call('ZADD', key, unpack(op.freshArgs))
    redis.call(op.freshExpire, key, op.freshTtl)
  end,
  -- { key, live, first, last, seq }: live holders at nowMs, the soonest and latest lease end among them
  -- (nil when none, or when not needed: see below), the last id handed out. nil when the key holds nothing.
  load = function(key, op, nowMs)
    -- Every write of a key writes '#' (create, save; reset keeps it): no '#', no key.
    local seq = redis.call('ZSCORE', key, SEQ)
    if not seq then return nil end
    local state = { key = key, live = 0, seq = tonumber(seq) }
    -- The latest lease end matters only to a key whose last id is older than a lease (expiresAt): a slot
    -- renewed since may outlive it. '#' is the highest score; the member below it holds that lease end.
    if math.floor(state.seq / SLOT_IDS_PER_MS) + op.sizeMs <= nowMs then
      local top = redis.call('ZRANGE', key, '-2', '-1', 'WITHSCORES')
      if #top == 4 then state.last = tonumber(top[2]) end
    end
    -- '#' scores above nowMs: counted among the live, it is not a slot.
    state.live = redis.call('ZCOUNT', key, liveFrom(nowMs), '+inf') - 1
    if state.live > 0 then state.first = liveUntil(state, nowMs, 1) end
    return state
  end,
  -- Writes what apply or refund changed: slots added (and lapsed ones dropped), slots removed.
  save = function(key, state, op, nowMs)
    if state.removes ~= nil and #state.removes > 0 then redis.call('ZREM', key, unpack(state.removes)) end
    if state.adds ~= nil then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', nowText(nowMs))
      local args = {}
      local idText
      for k = 1, #state.adds, 2 do
        idText = num(state.adds[k])
        args[#args + 1] = untilText(state.adds[k + 1])
        args[#args + 1] = idText
      end
      -- The seq is the last id added (when any was).
      if idText == nil or state.seq ~= state.adds[#state.adds - 1] then idText = num(state.seq) end
      args[#args + 1] = idText
      args[#args + 1] = SEQ
      redis.call('ZADD', key, unpack(args))
      -- The usual end is the lease end just written: its text is made already.
      expireAt(key, state.expires, untilText(state.expires), op, nowMs)
    end
  end,
  evaluate = function(state, op, nowMs, add)
    local live = 0
    if state ~= nil then live = state.live end
    local limit = op.limit
    local total = live + op.cost
    local allowed = total <= limit
    local counted = live
    if allowed or add then counted = total end
    local resetMs = 0
    if live > 0 then resetMs = state.first - nowMs elseif counted > 0 then resetMs = op.sizeMs end
    local retryAfterMs = 0
    if not allowed and live > 0 then
      retryAfterMs = liveUntil(state, nowMs, math.min(live, total - limit)) - nowMs
    end
    return {
      allowed = allowed,
      remaining = math.max(0, limit - counted),
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      count = counted,
      receipt = nextSlotId(state, nowMs),
    }
  end,
  apply = function(state, op, nowMs)
    local out = { key = state and state.key, live = 0, seq = 0, adds = {} }
    if state ~= nil then out.live, out.first, out.last, out.seq = state.live, state.first, state.last, state.seq end
    local untilMs = nowMs + op.sizeMs
    if op.cost > 0 then
      local id = nextSlotId(state, nowMs)
      for k = 0, op.cost - 1 do
        out.adds[#out.adds + 1] = id + k
        out.adds[#out.adds + 1] = untilMs
      end
      out.seq = id + op.cost - 1
      out.live = out.live + op.cost
      if out.first == nil or untilMs < out.first then out.first = untilMs end
      if out.last == nil or untilMs > out.last then out.last = untilMs end
    end
    out.expires = math.max(untilMs, math.floor(out.seq / SLOT_IDS_PER_MS) + op.sizeMs)
    return out
  end,
  -- A release: the slots taken from `receipt` on (unknown or lapsed ones: nothing to do). The state stays
  -- (its seq) until it expires, so no id is handed out twice.
  refund = function(state, op, nowMs, receipt)
    local removes = {}
    local soonest = false
    for id = receipt, receipt + op.cost - 1 do
      local member = num(id)
      local score = redis.call('ZSCORE', state.key, member)
      if score then
        removes[#removes + 1] = member
        score = tonumber(score)
        if score > nowMs then
          state.live = state.live - 1
          if score == state.first then soonest = true end
        end
      end
    end
    state.removes = removes
    if state.live == 0 then
      state.first, state.last = nil, nil
    elseif soonest then
      -- The soonest lease end left: skip the removed slots among the soonest.
      local found = redis.call('ZRANGEBYSCORE', state.key, liveFrom(nowMs), '+inf', 'WITHSCORES', 'LIMIT', '0', tostring(#removes + 1))
      local gone = {}
      for _, m in ipairs(removes) do gone[m] = true end
      for k = 1, #found, 2 do
        if not gone[found[k]] then
          state.first = tonumber(found[k + 1])
          break
        end
      end
    end
    return state
  end,
  expiresAt = function(state, op)
    local last = math.floor(state.seq / SLOT_IDS_PER_MS) + op.sizeMs
    if state.last ~= nil and state.last > last then last = state.last end
    return last
  end,
}

-- Renews the op.cost slots taken from `receipt` on, each until nowMs + op.sizeMs (renewSlots in
-- concurrency.ts): true when every one was still held. A slot released, lapsed or reset is not taken again.
local function renew(key, op, nowMs, receipt)
  local held = true
  local untilMs = num(nowMs + op.sizeMs)
  for id = receipt, receipt + op.cost - 1 do
    local member = num(id)
    local score = redis.call('ZSCORE', key, member)
    if score and tonumber(score) > nowMs then
      redis.call('ZADD', key, 'XX', untilMs, member)
    else
      held = false
    end
  end
  -- Every lease of the key ends by then, and its seq is older.
  if held then expireAt(key, nowMs + op.sizeMs, untilMs, op, nowMs) end
  return held
end

-- A release whose figures no one reads (refund.lua without a reply): the op.cost slots taken from
-- `receipt` (its text as sent, the first slot's member) on leave the key. Returns whether every one was
-- still held (its lease not ended at nowMs), as renew answers: the releasing process counts it lapsed
-- otherwise. Slots that are unknown or released already are not there to remove; the seq ('#') stays,
-- so no id is handed out twice.
local function release(key, op, nowMs, receiptText)
  -- A cost of 0 held nothing (and ZREM takes at least one member).
  if op.cost < 1 then return true end
  if op.cost == 1 then
    local score = redis.call('ZSCORE', key, receiptText)
    if not score then return false end
    redis.call('ZREM', key, receiptText)
    return tonumber(score) > nowMs
  end
  local receipt = receiptText + 0
  local members = {}
  local held = true
  for id = receipt, receipt + op.cost - 1 do
    local member = num(id)
    local score = redis.call('ZSCORE', key, member)
    if score then
      members[#members + 1] = member
      if tonumber(score) <= nowMs then held = false end
    else
      held = false
    end
  end
  if #members > 0 then redis.call('ZREM', key, unpack(members)) end
  return held
end

return { concurrency = concurrency, renew = renew, release = release }
