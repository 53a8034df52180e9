-- How numbers and expiry times are written to Redis by every algorithm's save (no TypeScript twin: the
-- memory store keeps numbers as numbers). A module (require('values')), not a script: no KEYS, no ARGV,
-- no reply. Units: ms (epoch for atMs and nowMs, relative for the TTL returned).
--
-- KEYS        none: a module (require('values'))
-- ARGV        none
-- Returns     { num, ttlMs }: num(x) is text; ttlMs(atMs, nowMs) is ms (relative, at least 1)

local floor, fmod, sformat = math.floor, math.fmod, string.format
local MILLION = 1000000

-- Numbers as text Redis and tonumber() read back exactly: integers as plain digits (tostring would
-- print 1.7e+15), anything else with 17 significant digits so the double round-trips bit for bit.
-- A whole number below 2^53 goes in pieces below 10^6, each printed by '%d' (a C long: 32 bits on some
-- builds): '%.0f' of an epoch ms or a slot id costs redis-server some 4,000 instructions, this a few
-- hundred. math.fmod is exact, and so is each quotient (a whole number of millions, divided).
local function num(x)
  if x ~= floor(x) or x <= -9007199254740992 or x >= 9007199254740992 then return sformat('%.17g', x) end
  -- -0 too (1/x is -inf): the twin's numbers print as they are.
  if x < 0 or (x == 0 and 1 / x < 0) then return '-' .. num(-x) end
  if x < MILLION then return sformat('%d', x) end
  local low = fmod(x, MILLION)
  local high = (x - low) / MILLION
  if high < MILLION then return sformat('%d%06d', high, low) end
  local mid = fmod(high, MILLION)
  return sformat('%d%06d%06d', (high - mid) / MILLION, mid, low)
end

-- TTL in relative ms until `atMs` (store time), at least 1: PEXPIRE rejects 0 and negatives.
local function ttlMs(atMs, nowMs)
  return math.max(1, math.ceil(atMs - nowMs))
end

return { num = num, ttlMs = ttlMs }
