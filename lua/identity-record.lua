-- An identity record: the states of an identity's grouped rules (StoreRule.grouped) in one string
-- at <prefix>:{<identity>}, read and written whole (the layout; the eval mode 'record' is another thing).
--
-- KEYS        none: a module (require('identity-record')), not a script
-- ARGV        none
-- Returns     { parse, format, read, write, live, put, intText }: records as { endMs (epoch ms, store
--             clock), states = { [rule] = state text } }; ttl arguments in ms
--
-- Value: "<endMs>|<rule>=<state>|<rule>=<state>...": endMs (epoch ms, store clock) is when the key may
-- go, the latest window end of a state written into it, and its TTL; each state is its rule's string
-- state as its own key held it (fixed.lua, calendar.lua, token-bucket.lua, gcra.lua encode), carrying
-- its own window end, so a state past its window counts as empty while the record lives on. Rule names
-- hold no '|' or '=' ([A-Za-z0-9_.~-]), states neither. One string rather than a hash: a new identity
-- is one SET NX GET PX (a hash needs HSET and PEXPIRE, and a read before them), and Redis 7.0 has no
-- TTL per hash field anyway.

local tonumber, find, sub, gmatch, concat = tonumber, string.find, string.sub, string.gmatch, table.concat
local num, ttlMs = require('protocol').num, require('protocol').ttlMs

-- An epoch ms (a whole number) as text: num, which prints it in pieces by '%d' (protocol.lua).
local intText = num

-- { endMs, states = { [rule] = state text } } of a record's value (nil: none).
local function parse(s)
  if not s then return nil end
  local bar = find(s, '|', 1, true)
  local states = {}
  if not bar then return { endMs = tonumber(s), states = states } end
  for name, state in gmatch(sub(s, bar), '|([^=|]+)=([^|]*)') do states[name] = state end
  return { endMs = tonumber(sub(s, 1, bar - 1)), states = states }
end

-- A record's value (parse's inverse).
local function format(record)
  local parts, n = { intText(record.endMs) }, 1
  for name, state in pairs(record.states) do
    parts[n + 1] = name .. '=' .. state
    n = n + 1
  end
  return concat(parts, '|')
end

-- The record at key (nil: none).
local function read(key)
  return parse(redis.call('GET', key))
end

-- Writes a record (or deletes its key when it holds no state), its TTL until its endMs.
local function write(key, record, nowMs)
  if next(record.states) == nil then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, format(record), 'PX', ttlMs(record.endMs, nowMs))
end

-- The record to change at nowMs: the one read, or a new one when there was none or it has ended (every
-- state in it then has: none ends after endMs).
local function live(record, nowMs)
  if record == nil or record.endMs <= nowMs then return { endMs = nowMs, states = {} } end
  return record
end

-- Sets one rule's state in a record, ttl ms from nowMs at the longest (its window's end): endMs moves
-- out to it, never in.
local function put(record, rule, state, ttl, nowMs)
  record.states[rule] = state
  local endMs = nowMs + tonumber(ttl)
  if endMs > record.endMs then record.endMs = endMs end
end

return {
  parse = parse, format = format, read = read, write = write, live = live, put = put, intText = intText,
}
