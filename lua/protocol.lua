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
-- distinct ops, then OP_FIELDS entries per op: type, limit, sizeMs, buckets, burst, dryRun (0/1),
-- lockout durationMs (0: no lockout), escalate, maxDurationMs (0: no cap), forgetAfterMs, cost
-- (units), periodEndMs, nextPeriodEndMs (epoch ms, calendar windows; else 0). Returns the ops keyed by
-- index text and the ARGV position after them. An op is shared by its uses: never modified.
local OP_FIELDS = 13
local function readOps(ARGV, at)
  local byIndex = {}
  local m = tonumber(ARGV[at])
  for j = 1, m do
    local b = at + 1 + OP_FIELDS * (j - 1)
    byIndex[tostring(j)] = {
      type = ARGV[b],
      limit = tonumber(ARGV[b + 1]),
      sizeMs = tonumber(ARGV[b + 2]),
      buckets = tonumber(ARGV[b + 3]),
      burst = tonumber(ARGV[b + 4]),
      dryRun = ARGV[b + 5] == '1',
      lockMs = tonumber(ARGV[b + 6]),
      escalate = tonumber(ARGV[b + 7]),
      maxLockMs = tonumber(ARGV[b + 8]),
      forgetAfterMs = tonumber(ARGV[b + 9]),
      cost = tonumber(ARGV[b + 10]),
      -- The cost as sent: a numeric argument to redis.call would be printed with %.17g on every call.
      costText = ARGV[b + 10],
      periodEndMs = tonumber(ARGV[b + 11]),
      nextPeriodEndMs = tonumber(ARGV[b + 12]),
    }
  end
  return byIndex, at + 1 + OP_FIELDS * m
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
  lockValue = lockValue,
  readLockValue = readLockValue,
  lockIndexMember = lockIndexMember,
}
