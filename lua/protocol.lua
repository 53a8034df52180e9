-- The Lua side of src/stores/redis/op-text.ts and redis-keys.ts: how ops and the time arrive in ARGV,
-- and the format of a lock's value and of a lock-index member. A module (require('protocol')), not a
-- script: no KEYS, no reply of its own; readOps and readOp read the drivers' ARGV as laid out here.

local num = require('values').num
-- As locals: clockMs runs on every call.
local tonumber, floor = tonumber, math.floor

-- The `now` argument that asks for the server's own clock (TIME) instead of an injected epoch ms.
local SERVER_TIME = 'server'

-- The last time clockMs read from the server's clock (a function library keeps it between calls).
local serverMs = nil

-- The store's time (epoch ms): the injected clock when the caller sent one, else the server's clock.
local function clockMs(arg)
  if arg ~= SERVER_TIME then return tonumber(arg) end
  local t = redis.call('TIME')
  serverMs = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  return serverMs
end

-- Whether a time is the server's clock as this call read it (an absolute time the server's expiry can
-- take: PEXPIREAT), not an injected one.
local function isServerMs(ms)
  return ms == serverMs
end

-- An op travels as one text (opText in redis-op-text.ts): its 13 fields joined by ',': type, limit,
-- sizeMs, buckets, burst, flags, lockout durationMs (0: no lockout), escalate, maxDurationMs (0: no cap),
-- forgetAfterMs, cost (units), periodEndMs, nextPeriodEndMs (epoch ms, calendar windows; else 0), and
-- a 14th, the rule's name, when flags has 8.
-- flags: '0', or '1' (dry run), when the op's rule has never had an override (its override is not
-- read: the usual case costs nothing) and keeps its own count key; else the sum of 1 (dry run), 2
-- (read the key's override: its override key follows its count key in KEYS), 4 (with 2: its burst
-- follows the limit) and 8 (the rule's state is a field of its identity's hash, named by the 14th
-- field: its "count key" in KEYS is that hash, <prefix>:{<identity>}), ruleFlags in redis-op-text.ts.
-- Such an op has readsOverride, burstFollows and field (the rule's name, or nil) as those say.
-- Ops and request shapes are read from their text once and kept (memo): in a function library (FCALL)
-- the next calls find them, so a decision parses nothing; a script (EVAL) keeps them for its call.
-- A kept op is shared by its uses: never modified, but for the fresh-state memo of check.lua.
local function parseOp(text)
  local f, k = {}, 0
  for field in string.gmatch(text, '[^,]+') do
    k = k + 1
    f[k] = field
  end
  local windowType, lockMs = f[1], f[7] + 0
  local locks, calendar = lockMs ~= 0, windowType == 'calendar'
  local flags = f[6]
  local op = {
    type = windowType,
    limit = f[2] + 0,
    sizeMs = f[3] + 0,
    -- As sent, for the TTL of a window that starts now (fixed.lua): see costText.
    sizeMsText = f[3],
    buckets = f[4] + 0,
    burst = f[5] + 0,
    dryRun = flags == '1',
    lockMs = lockMs,
    escalate = locks and f[8] + 0 or 1,
    maxLockMs = locks and f[9] + 0 or 0,
    forgetAfterMs = locks and f[10] + 0 or 0,
    cost = f[11] + 0,
    -- The cost as sent: a numeric argument to redis.call would be printed with %.17g on every call.
    costText = f[11],
    periodEndMs = calendar and f[12] + 0 or 0,
    nextPeriodEndMs = calendar and f[13] + 0 or 0,
  }
  if flags ~= '0' and flags ~= '1' then
    local bits = flags + 0
    op.dryRun, op.readsOverride, op.burstFollows = bits % 2 == 1, bits % 4 >= 2, bits % 8 >= 4
    -- Kept in its identity's hash (algorithms.lua byField), field = the rule's name.
    if bits >= 8 then op.field = f[14] end
  end
  return op
end

-- Texts read so far -> what they read as. Emptied when full: a limit per identity (or a calendar
-- period's end) makes new texts without end.
local MEMO_LIMIT = 1000

-- A reader of texts that keeps what `parse` made of each.
local function memo(parse)
  local known, size = {}, 0
  return function(text)
    local found = known[text]
    if found then return found end
    found = parse(text)
    if size >= MEMO_LIMIT then known, size = {}, 0 end
    known[text] = found
    size = size + 1
    return found
  end
end

local readOp = memo(parseOp)

-- ARGV[at] = m, the number of distinct ops, then the text of each. Returns the ops as an array and the
-- ARGV position after them.
local function readOps(ARGV, at)
  local ops = {}
  local m = ARGV[at] + 0
  for j = 1, m do ops[j] = readOp(ARGV[at + j]) end
  return ops, at + 1 + m
end

-- A lock key's value: "<untilMs>:<level>:<forgetAtMs>" (epoch ms, level >= 1).
local function lockValue(untilMs, level, forgetAtMs)
  return num(untilMs) .. ':' .. num(level) .. ':' .. num(forgetAtMs)
end

-- { untilMs, level, forgetAtMs } of a lock key's value.
local function readLockValue(v)
  local untilMs, level, forgetAtMs = string.match(v, '^([^:]+):([^:]+):([^:]+)$')
  return { untilMs = tonumber(untilMs), level = tonumber(level), forgetAtMs = tonumber(forgetAtMs) }
end

-- A member of a lock index (ZSET, score = untilMs): "<level>:<identity>" (parseLockIndexMember in TS).
local function lockIndexMember(level, identity)
  return num(level) .. ':' .. identity
end

return {
  SERVER_TIME = SERVER_TIME,
  clockMs = clockMs,
  isServerMs = isServerMs,
  memo = memo,
  readOp = readOp,
  readOps = readOps,
  lockValue = lockValue,
  readLockValue = readLockValue,
  lockIndexMember = lockIndexMember,
}
