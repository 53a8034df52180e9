-- Limit overrides (limiter.override) and rule-wide limits (limiter.setLimit): the value of an override key,
-- read by check.lua and refund.lua for the ops whose rule has had an override, and of a field of a
-- rule-limits hash (the same text, one field per rule), read for the ops whose rule has had a rule-wide
-- limit; written by set-override.lua. A module (require('overrides')), not a script: no KEYS, no ARGV,
-- no reply of its own; required only where an override is read or written, so that decisions of rules
-- without overrides never build it. Times in epoch ms (store clock).
--
-- KEYS        none: a module (require('overrides')); apply reads the override keys check.lua and refund.lua
--             pass it, limitShape the rule-limits hash
-- ARGV        none
-- Returns     { apply, limitShape, overrideValue, readKeyOverride, readOverride, withOverride }: an override is { limit
--             (units), untilMs (epoch ms; 0: until cleared), windowMs (a key's window size in ms, or nil) };
--             overrideValue gives a key's text

local num = require('protocol').num

-- An override key's value: "<limit>:<untilMs>" (untilMs epoch ms; 0: until cleared), and ":<windowMs>" when
-- the key's override sets its window (limit 0: the window only).
local function overrideValue(limit, untilMs, windowMs)
  if windowMs then return num(limit) .. ':' .. num(untilMs) .. ':' .. num(windowMs) end
  return num(limit) .. ':' .. num(untilMs)
end

-- The key's override in force in the value of its override key (nil: none) at nowMs: { limit (false: the
-- window only), untilMs, windowMs (nil: none) }.
local function readKeyOverride(v, nowMs)
  if not v then return nil end
  local limit, untilMs, windowMs = string.match(v, '^([^:]+):([^:]+):?([^:]*)$')
  untilMs, limit, windowMs = tonumber(untilMs), tonumber(limit), tonumber(windowMs)
  if untilMs ~= 0 and untilMs <= nowMs then return nil end
  if limit == 0 then
    if not windowMs then return nil end
    limit = false
  end
  return { limit = limit, untilMs = untilMs, windowMs = windowMs }
end

-- The override in force in the value of an override key or rule-limits field (nil: none) at nowMs:
-- { limit, untilMs }. A Cluster's rule-limits field has a third part, its version (set-override.lua),
-- and a cleared one limit 0: none.
local function readOverride(v, nowMs)
  if not v then return nil end
  local limit, untilMs = string.match(v, '^([^:]+):([^:]+)')
  untilMs, limit = tonumber(untilMs), tonumber(limit)
  if limit == 0 or (untilMs ~= 0 and untilMs <= nowMs) then return nil end
  return { limit = limit, untilMs = untilMs }
end

-- The op decided under an override: the same fields, its limit, its burst when that follows the limit, and
-- the key's window size when its override sets one (windowMs, nil: the op's).
local function withOverride(op, limit, windowMs)
  local copy = {}
  for k, v in pairs(op) do copy[k] = v end
  copy.limit = limit
  -- Not the original's fresh state (check.lua): that was for its limit.
  copy.freshAtMs, copy.freshAllowed = nil, nil
  if op.burstFollows then copy.burst = limit end
  if windowMs then
    -- What the algorithms made of the op's size (fixed.lua's packed fresh value and TTL) is not the copy's.
    copy.sizeMs, copy.sizeMsText = windowMs, num(windowMs)
    copy.freshValue, copy.freshTtl, copy.packedCount, copy.packedHigh, copy.packedHighText = nil, nil, nil, nil, nil
  end
  return copy
end

-- For each op i of 1..n with reads[i] (memory-store.ts OverrideTable.apply): the override in force at
-- nowMs in the value of overrideKeys[i], into found[i] (false when none), and ops[i] replaced by the op
-- at its limit (a window-only override: the op's, which is the rule-wide limit when one is in force) and
-- window. found[i] is false for the other ops.
local function apply(n, reads, ops, overrideKeys, found, nowMs)
  for i = 1, n do
    local override = false
    if reads[i] then
      override = readKeyOverride(redis.call('GET', overrideKeys[i]), nowMs)
      if override then
        override.limit = override.limit or ops[i].limit
        ops[i] = withOverride(ops[i], override.limit, override.windowMs)
      else
        override = false
      end
    end
    found[i] = override
  end
end

-- Rule-limits field values read so far -> { limit, untilMs } as readOverride reads them without the
-- time (limit 0: cleared): the same table for the same text while kept, so limitShape compares them by
-- identity. Emptied when full (a value per setLimit).
local parsedLimits, parsedCount = {}, 0

local function parseLimit(v)
  local limit, untilMs = string.match(v, '^([^:]+):([^:]+)')
  local parsed = { limit = tonumber(limit), untilMs = tonumber(untilMs) }
  if parsedCount >= 100 then parsedLimits, parsedCount = {}, 0 end
  parsedLimits[v], parsedCount = parsed, parsedCount + 1
  return parsed
end

-- limitShape's scratch: per op that reads its rule-wide limit, the one in force (parsedLimits') or false.
local inForce = {}

-- A request shape whose ops that read their rule-wide limit (shape.ruleLimits) are decided at the one in
-- force at nowMs in the hash `limitsKey` (field: the rule's name): the shape itself when none is, else
-- a copy whose such ops carry it (op.ruleWide, the result's override). The copy is kept on the shape
-- with the limits it was made for (limitedBy) for the next call that finds the same: one HGET per op
-- and call, no parse, no copy while the hash's values stay as they are.
local function limitShape(shape, limitsKey, nowMs)
  local ruleLimits, shapeOps = shape.ruleLimits, shape.ops
  local kept = shape.limitedBy
  local m, any, same = #ruleLimits, false, kept ~= nil
  for k = 1, m do
    local v = redis.call('HGET', limitsKey, shapeOps[ruleLimits[k]].ruleName)
    local wide = false
    if v then
      wide = parsedLimits[v] or parseLimit(v)
      if wide.limit == 0 or (wide.untilMs ~= 0 and wide.untilMs <= nowMs) then wide = false else any = true end
    end
    inForce[k] = wide
    if same and kept[k] ~= wide then same = false end
  end
  if not any then return shape end
  if same then return shape.limitedCopy end
  local copy, ops, by = {}, {}, {}
  for key, value in pairs(shape) do copy[key] = value end
  for i = 1, shape.n do ops[i] = shapeOps[i] end
  for k = 1, m do
    local i, wide = ruleLimits[k], inForce[k]
    by[k] = wide
    if wide then
      ops[i] = withOverride(shapeOps[i], wide.limit)
      ops[i].ruleWide = wide
    end
  end
  copy.ops, copy.limitedBy, copy.limitedCopy = ops, nil, nil
  -- What check.lua and decide-grouped.lua keep on a shape for a time (createsAll, freshRecord) was
  -- made for the shape's limits: the copy makes its own.
  copy.createsAtMs, copy.recordAtMs = nil, nil
  if shape.recordParts then
    copy.recordParts = {}
    for key, value in pairs(shape.recordParts) do copy.recordParts[key] = value end
  end
  shape.limitedBy, shape.limitedCopy = by, copy
  return copy
end

return {
  apply = apply, limitShape = limitShape, overrideValue = overrideValue, readKeyOverride = readKeyOverride,
  readOverride = readOverride, withOverride = withOverride,
}
