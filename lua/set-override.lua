-- Sets or clears the limit override of one rule for one identity (limiter.override), or a rule's rule-wide
-- limit (limiter.setLimit): the check and refund scripts read them for rules that have had one
-- (protocol.lua readOps). A script, not a plain SET, so that its end is on the store's clock (the
-- server's TIME, or the injected clock).
--
-- KEYS[1]     override key: <prefix>:{<identity>}:<rule>:o, beside the count key (same slot); or, with
--             ARGV[5], a rule-limits hash (keys.ts ruleLimitsKey: on a Cluster one per slot)
-- ARGV[1]     now, epoch ms; 'server' for the server's TIME
-- ARGV[2]     the limit (units); '' clears the override (or, with a window, sets the window only)
-- ARGV[3]     how long it holds, ms; '' until cleared
-- ARGV[4]     key form: the key's window size, ms, or '' (none; absent before windows); rule-wide form:
--             the field (the rule's escaped name)
-- ARGV[5]     rule-wide form only (its mark): '' (one hash: the last write wins), or the change's version (a
--             Cluster's copies: a copy keeps the highest version it was given, a clear kept as limit 0)
-- ARGV[6]     rule-wide form only: the epoch ms it ends, when an earlier copy computed it; else ''
-- Reply: the epoch ms it ends (0: until cleared, or cleared).

local protocol, overrides = require('protocol'), require('overrides')

-- The rule-wide form: the field of one rule in a rule-limits hash; expired fields of other rules go.
local function setRuleLimit(KEYS, ARGV)
  local key, field, version = KEYS[1], ARGV[4], ARGV[5]
  local nowMs = protocol.clockMs(ARGV[1])
  local untilMs = 0
  if ARGV[6] ~= '' then
    untilMs = tonumber(ARGV[6])
  elseif ARGV[3] ~= '' and ARGV[2] ~= '' then
    untilMs = nowMs + tonumber(ARGV[3])
  end
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local name, v = fields[i], fields[i + 1]
    if name == field and version ~= '' then
      -- A change raced by a later one (a higher version) that reached this copy first: it stands.
      local held = tonumber(string.match(v, '^[^:]+:[^:]+:(%d+)$') or '0')
      if held > tonumber(version) then return untilMs end
    elseif name ~= field and not overrides.readOverride(v, nowMs) and version == '' then
      redis.call('HDEL', key, name)
    end
  end
  if version == '' then
    if ARGV[2] == '' then redis.call('HDEL', key, field)
    else redis.call('HSET', key, field, overrides.overrideValue(tonumber(ARGV[2]), untilMs)) end
  else
    local limit = 0
    if ARGV[2] ~= '' then limit = tonumber(ARGV[2]) end
    redis.call('HSET', key, field, overrides.overrideValue(limit, untilMs) .. ':' .. version)
  end
  return untilMs
end

return function(KEYS, ARGV)
  if ARGV[5] then return setRuleLimit(KEYS, ARGV) end
  local windowMs = tonumber(ARGV[4] or '')
  if ARGV[2] == '' and not windowMs then
    redis.call('DEL', KEYS[1])
    return 0
  end
  -- A window-only override holds limit 0 (overrides.lua readKeyOverride).
  local limit = tonumber(ARGV[2]) or 0
  if ARGV[3] == '' then
    redis.call('SET', KEYS[1], overrides.overrideValue(limit, 0, windowMs))
    return 0
  end
  local forMs = tonumber(ARGV[3])
  local untilMs = protocol.clockMs(ARGV[1]) + forMs
  -- The value holds the end on the store's clock; the TTL only frees the key once it has passed.
  redis.call('SET', KEYS[1], overrides.overrideValue(limit, untilMs, windowMs), 'PX', forMs)
  return untilMs
end
