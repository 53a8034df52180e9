-- Exact integer arithmetic for the algorithms: src/algorithms/int-math.ts, and JavaScript's Math.round.
-- A module (require('int-math')), not a script: no KEYS, no ARGV, no reply. All figures are whole numbers
-- below 2^53, in whatever unit the caller counts (ms, µs, scaled tokens).
--
-- KEYS        none: a module (require('int-math'))
-- ARGV        none
-- Returns     { floorDiv, ceilDiv, round }: whole numbers below 2^53, in the caller's unit

-- floorDiv(a, b): floor(a / b) for integers, b > 0, exact. math.fmod is C's fmod, the same exact
-- truncated remainder as JavaScript's %; Lua's own % goes through a rounded a / b.
local function floorDiv(a, b)
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end

-- ceilDiv(a, b): ceil(a / b) for integers, b > 0, exact.
local function ceilDiv(a, b)
  return -floorDiv(-a, b)
end

-- JavaScript's Math.round, exactly: x - floor(x) is exact, unlike floor(x + 0.5).
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

return { floorDiv = floorDiv, ceilDiv = ceilDiv, round = round }
