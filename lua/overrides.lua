-- Limit overrides (limiter.override): the value of an override key, read by check.lua and refund.lua for
-- the ops whose rule has had an override, written by set-override.lua. A module (require('overrides')), not a
-- script: no KEYS, no ARGV, no reply of its own; required only where an override is read or written,
-- so that decisions of rules without overrides never build it. Times in epoch ms (store clock).
--
-- KEYS        none: a module (require('overrides')); apply reads the override keys check.lua and refund.lua pass it
-- ARGV        none
-- Returns     { apply, overrideValue, readOverride, withOverride }: an override is { limit (units), untilMs
--             (epoch ms; 0: until cleared) }; overrideValue gives a key's text

local num = require('protocol').num

-- An override key's value: "<limit>:<untilMs>" (untilMs epoch ms; 0: until cleared).
local function overrideValue(limit, untilMs)
  return num(limit) .. ':' .. num(untilMs)
end

-- The override in force in the value of an override key (nil: none) at nowMs: { limit, untilMs }.
local function readOverride(v, nowMs)
  if not v then return nil end
  local limit, untilMs = string.match(v, '^([^:]+):([^:]+)$')
  untilMs = tonumber(untilMs)
  if untilMs ~= 0 and untilMs <= nowMs then return nil end
  return { limit = tonumber(limit), untilMs = untilMs }
end

-- The op decided under an override: the same fields, its limit, and its burst when that follows the limit.
local function withOverride(op, limit)
  local copy = {}
  for k, v in pairs(op) do copy[k] = v end
  copy.limit = limit
  -- Not the original's fresh state (check.lua): that was for its limit.
  copy.freshAtMs, copy.freshAllowed, copy.freshReplyAtMs = nil, nil, nil
  if op.burstFollows then copy.burst = limit end
  return copy
end

-- For each op i of 1..n with reads[i] (memory-store.ts OverrideTable.apply): the override in force at
-- nowMs in the value of overrideKeys[i], into found[i] (false when none), and ops[i] replaced by the op
-- at its limit. found[i] is false for the other ops.
local function apply(n, reads, ops, overrideKeys, found, nowMs)
  for i = 1, n do
    local override = false
    if reads[i] then
      override = readOverride(redis.call('GET', overrideKeys[i]), nowMs)
      if override then ops[i] = withOverride(ops[i], override.limit) else override = false end
    end
    found[i] = override
  end
end

return { apply = apply, overrideValue = overrideValue, readOverride = readOverride, withOverride = withOverride }
