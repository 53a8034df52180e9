-- Sets or clears the limit override of one rule for one identity (limiter.override): the check and
-- refund scripts read it for rules that have had one (protocol.lua readOps). A script, not a plain SET,
-- so that its end is on the store's clock (the server's TIME, or the injected clock).
--
-- KEYS[1]     override key: <prefix>:{<identity>}:<rule>:o, beside the count key (same slot)
-- ARGV[1]     now, epoch ms; 'server' for the server's TIME
-- ARGV[2]     the limit (units); '' clears the override
-- ARGV[3]     how long it holds, ms; '' until cleared
-- Reply: the epoch ms it ends (0: until cleared, or cleared).

local protocol, overrides = require('protocol'), require('overrides')

return function(KEYS, ARGV)
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
    return 0
  end
  if ARGV[3] == '' then
    redis.call('SET', KEYS[1], overrides.overrideValue(tonumber(ARGV[2]), 0))
    return 0
  end
  local forMs = tonumber(ARGV[3])
  local untilMs = protocol.clockMs(ARGV[1]) + forMs
  -- The value holds the end on the store's clock; the TTL only frees the key once it has passed.
  redis.call('SET', KEYS[1], overrides.overrideValue(tonumber(ARGV[2]), untilMs), 'PX', forMs)
  return untilMs
end
