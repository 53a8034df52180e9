-- A request shape of check.lua, read from its text once and kept (protocol.lua memo): the mode, the
-- ops, and which keys each request of the shape sends. The text's format is in protocol.lua's header.
--
-- KEYS        none: a module (require('request-shape')), not a script
-- ARGV        none: readShape(text) reads one shape argument of check.lua
-- Returns     readShape(text) -> { mode, consumeNothing, n, ops, locks, reads, plain, keys, fields,
--             recordParts, same }: n ops (protocol.lua readOp); per op whether it has a lockout
--             (locks), reads its override (reads: false when none does) and shares the identity record
--             of the op before (same: false when none does); plain: check mode, consuming, no lockout,
--             no override (decide-plain.lua); keys: how many KEYS a request of the shape has; fields:
--             per op its rule's name when every op's state is in one identity record
--             (decide-grouped.lua), else false; recordParts: decide-grouped.lua freshRecord's pieces.

local readOp = require('protocol').readOp

-- The first byte of an op's part in a shape that shares the identity record of the op before it.
local CARET = string.byte('^')

local function parseShape(text)
  local mode, nothing
  local n, shapeOps, locks, reads, keys, same = 0, {}, {}, false, 0, false
  local fields = {}
  for part in string.gmatch(text, '[^|]+') do
    if mode == nil then
      mode = part
    elseif nothing == nil then
      nothing = part
    else
      n = n + 1
      -- '^': the op's state is in the record of the op before (same identity): its key is not sent again.
      if string.byte(part, 1) == CARET then
        part = string.sub(part, 2)
        if not same then
          same = {}
          for k = 1, n - 1 do same[k] = false end
        end
        same[n] = true
      elseif same then
        same[n] = false
      end
      local op = readOp(part)
      shapeOps[n], locks[n] = op, op.lockMs ~= 0
      -- Every op in the record, each rule once.
      if fields then
        for k = 1, n - 1 do
          if fields[k] == op.field then fields = false end
        end
      end
      if fields and op.field then fields[n] = op.field else fields = false end
      if not (same and same[n]) then keys = keys + 1 end
      if locks[n] then keys = keys + 2 end
      if op.readsOverride then
        keys = keys + 1
        if not reads then
          reads = {}
          for k = 1, n do reads[k] = false end
        end
        reads[n] = true
      elseif reads then
        reads[n] = false
      end
    end
  end
  local plain = mode == 'check' and nothing == '0' and not reads
  for i = 1, n do
    if locks[i] then plain = false end
  end
  if n == 0 then fields = false end
  local recordParts = false
  if fields then
    recordParts = {}
    for i = 1, n do recordParts[2 * i] = '|' .. fields[i] .. '=' end
  end
  return {
    mode = mode, consumeNothing = nothing == '1', n = n, ops = shapeOps, locks = locks, reads = reads,
    plain = plain, keys = keys, fields = fields, recordParts = recordParts, same = same,
  }
end

return require('protocol').memo(parseShape)
