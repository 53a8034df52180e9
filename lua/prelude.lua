-- Shared head of every ratekeeper script: the algorithm table, number formatting, the clock and op decoding.
-- Not a script by itself: src/stores/redis-scripts.ts concatenates prelude.lua, the six algorithm files
-- (fixed.lua first: calendar.lua reuses its counter) and one driver (check, refund, reset, lock-index).
-- KEYS / ARGV / reply: see the driver. Units: ms (epoch or relative), µs only inside gcra.lua.

-- Redis < 5 refuses writes after TIME unless effects are replicated; 5+ does so by default.
if redis.replicate_commands then redis.replicate_commands() end

-- Window type name -> { load, save, evaluate, apply, refund, expiresAt }; mirrors src/algorithms/*.ts.
local ALG = {}

-- Numbers as text Redis and tonumber() read back exactly: integers as plain digits (tostring would
-- print 1.7e+15), anything else with 17 significant digits so the double round-trips bit for bit.
local function num(x)
  if x == math.floor(x) and math.abs(x) < 9007199254740992 then return string.format('%.0f', x) end
  return string.format('%.17g', x)
end

-- JavaScript's Math.round, exactly: x - floor(x) is exact, unlike floor(x + 0.5).
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

-- floorDiv / ceilDiv of src/algorithms/int-math.ts: exact integer division. math.fmod is C's fmod,
-- the same exact truncated remainder as JavaScript's %; Lua's own % goes through a rounded a / b.
local function floorDiv(a, b)
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end

local function ceilDiv(a, b)
  return -floorDiv(-a, b)
end

-- TTL in relative ms until `atMs` (store time), at least 1: PEXPIRE rejects 0 and negatives.
local function ttlMs(atMs, nowMs)
  return math.max(1, math.ceil(atMs - nowMs))
end

-- The store's time: the injected clock when the caller sent one, else the server's clock.
local function clockMs(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Ops are sent once per distinct op of a call (rule, cost and calendar periods; OpTable in
-- src/stores/redis-codec.ts), and each use of one names it by its index, as text. ARGV[at] = m, the
-- number of distinct ops, then OP_FIELDS entries per op: type, limit, sizeMs, buckets, burst, dryRun
-- (0/1), lockout durationMs (0: no lockout), escalate, maxDurationMs (0: no cap), forgetAfterMs, cost
-- (units), periodEndMs, nextPeriodEndMs (epoch ms, calendar windows; else 0). Returns the ops keyed by
-- index text and the ARGV position after them. An op is shared by its uses: never modified.
local OP_FIELDS = 13
local function readOps(at)
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

-- The op with another cost (reporting a state as it is: cost 0).
local function withCost(op, cost)
  local copy = {}
  for k, v in pairs(op) do copy[k] = v end
  copy.cost, copy.costText = cost, tostring(cost)
  return copy
end

-- Loads a key's state, forgetting it once its algorithm says it means nothing any more (as the
-- memory store's expiry does): the TTL alone cannot be trusted when tests inject a clock.
local function loadLive(alg, key, op, nowMs)
  local state = alg.load(key, op)
  if state ~= nil and alg.expiresAt(state, op) <= nowMs then return nil end
  return state
end
