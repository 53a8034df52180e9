-- The Lua side of src/stores/redis-protocol.ts: how ops and the time arrive in ARGV, and the format of a
-- lock's value and of a lock-index member. A module (require('protocol')), not a script: no KEYS, no
-- reply of its own; readOps reads the drivers' ARGV as laid out here.

local num = require('values').num

-- The `now` argument that asks for the server's own clock (TIME) instead of an injected epoch ms.
local SERVER_TIME = 'server'

-- The store's time (epoch ms): the injected clock when the caller sent one, else the server's clock.
local function clockMs(arg)
  if arg ~= SERVER_TIME then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Ops are sent once per distinct op of a call (rule, cost and calendar periods; OpTable in
-- redis-protocol.ts), and each use of one names it by its index, as text. ARGV[at] = m, the number of
-- distinct ops, then OP_FIELDS entries per op: type, limit, sizeMs, buckets, burst, flags,
-- lockout durationMs (0: no lockout), escalate, maxDurationMs (0: no cap), forgetAfterMs, cost
-- (units), periodEndMs, nextPeriodEndMs (epoch ms, calendar windows; else 0). Returns the ops as an
-- array (ops[index]; a use's index text converts with opIndex) and the ARGV position after them. An
-- op is shared by its uses: never modified.
-- Every call reads its ops again, so this is on the path of every decision: `text + 0` converts a
-- number once where tonumber(text) converts it twice (Lua 5.1), and the fields an op's window type
-- or lockout does not use are not converted at all.
-- flags: '0', or '1' (dry run), when the op's rule has never had an override (its override is not
-- read: the usual case costs nothing); else 2 (read the key's override: its override key follows
-- its count key in KEYS) + 1 (dry run) + 4 (its burst follows the limit), overrideFlags in
-- redis-protocol.ts. Such an op has readsOverride = true, and burstFollows.
local OP_FIELDS = 13
local function readOps(ARGV, at)
  local ops = {}
  local m = ARGV[at] + 0
  for j = 1, m do
    local b = at + 1 + OP_FIELDS * (j - 1)
    local windowType, lockMs = ARGV[b], ARGV[b + 6] + 0
    local locks, calendar = lockMs ~= 0, windowType == 'calendar'
    local flags = ARGV[b + 5]
    local op = {
      type = windowType,
      limit = ARGV[b + 1] + 0,
      sizeMs = ARGV[b + 2] + 0,
      -- As sent, for the TTL of a window that starts now (fixed.lua): see costText.
      sizeMsText = ARGV[b + 2],
      buckets = ARGV[b + 3] + 0,
      burst = ARGV[b + 4] + 0,
      dryRun = flags == '1',
      lockMs = lockMs,
      escalate = locks and ARGV[b + 7] + 0 or 1,
      maxLockMs = locks and ARGV[b + 8] + 0 or 0,
      forgetAfterMs = locks and ARGV[b + 9] + 0 or 0,
      cost = ARGV[b + 10] + 0,
      -- The cost as sent: a numeric argument to redis.call would be printed with %.17g on every call.
      costText = ARGV[b + 10],
      periodEndMs = calendar and ARGV[b + 11] + 0 or 0,
      nextPeriodEndMs = calendar and ARGV[b + 12] + 0 or 0,
    }
    if flags ~= '0' and flags ~= '1' then
      local f = flags + 0
      op.dryRun, op.readsOverride, op.burstFollows = f % 2 == 1, true, f >= 4
    end
    ops[j] = op
  end
  return ops, at + 1 + OP_FIELDS * m
end

-- The index of an op among a call's ops (readOps) from its text in ARGV.
local function opIndex(text)
  return text + 0
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
  readOps = readOps,
  opIndex = opIndex,
  lockValue = lockValue,
  readLockValue = readLockValue,
  lockIndexMember = lockIndexMember,
}
