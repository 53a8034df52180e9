-- How numbers and expiry times are written to Redis by every algorithm's save (no TypeScript twin: the
-- memory store keeps numbers as numbers). A module (require('values')), not a script: no KEYS, no ARGV,
-- no reply. Units: ms (epoch for atMs and nowMs, relative for the TTL returned).

-- Numbers as text Redis and tonumber() read back exactly: integers as plain digits (tostring would
-- print 1.7e+15), anything else with 17 significant digits so the double round-trips bit for bit.
local function num(x)
  if x == math.floor(x) and math.abs(x) < 9007199254740992 then return string.format('%.0f', x) end
  return string.format('%.17g', x)
end

-- TTL in relative ms until `atMs` (store time), at least 1: PEXPIRE rejects 0 and negatives.
local function ttlMs(atMs, nowMs)
  return math.max(1, math.ceil(atMs - nowMs))
end

return { num = num, ttlMs = ttlMs }
