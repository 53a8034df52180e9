-- The wire protocol of the Redis store, both ways: how ops, request shapes and the time arrive in ARGV (the Lua side
-- of src/stores/redis/op-text.ts and keys.ts), how check.lua's results go back (read by
-- src/stores/redis/replies.ts), the format of a lock's value and of a lock-index member, and how numbers and
-- expiry times are written to Redis by every algorithm's save (num, ttlMs: no TypeScript twin, the memory
-- store keeps numbers as numbers).
--
-- KEYS        none: a module (require('protocol')), not a script
-- ARGV        none of its own: readOp and readOps read the drivers' ARGV as laid out below
-- Returns     { SERVER_TIME, clockMs, isServerMs, memo, readOp, readOps, readShape, lockValue,
--             readLockValue, lockIndexMember, putResult, putFresh, FRESH, num, ttlMs }: clockMs in epoch ms; putResult
--             and putFresh return the reply position after what they wrote; num(x) is text; ttlMs(atMs, nowMs)
--             is ms (relative, at least 1; atMs and nowMs epoch ms)
--
-- The check reply (check.lua; the one reply format, decoded by replies.ts decodeCheckReply): a flat
-- array of integers. First the server's time (epoch ms; 0 when no request asked for it), then per
-- request, per op, its result:
--   head      the sum of the Flag values that hold + LEVEL_UNIT x the lock level
--   remaining units; left out with REMAINING_DERIVED: it is max(0, the limit in force - count)
--   resetMs   ms
--   count     units
--   receipt   left out with RECEIPT_DERIVED: it is the request's time + resetMs (a window's end); a
--             concurrency op's slot id, when not 0 and the request's time is a whole ms, is sent as
--             its distance from the request's first id (id - time x SLOT_IDS_PER_MS): a few digits
--   retryAfterMs ms, only with RETRY_AFTER_FOLLOWS (else 0)
--   lockedUntil  epoch ms, only with LOCKED (else 0)
--   limit     the override's limit in force (units; the key's or the rule-wide one), only with
--             OVERRIDDEN (else the op's limit)
--   windowMs  the window size the key's override set (ms), only with WINDOWED (else the op's size)
-- An op that found its key empty, counted and was decided at its own limit (no override, no rule-wide
-- limit) has FRESH (-1) alone in place of its result: its result is its algorithm's verdict on an empty
-- state at the request's time, which the client computes from the op it sent (the reply's size is the
-- script's main cost per decision). One decided so at its rule-wide limit L (a whole number, at least 1)
-- has FRESH - L alone (below FRESH): its result is the same verdict with the op's limit (and a burst
-- that follows it) set to L, overridden.
-- A request whose evaluation raised an error has, in place of its results, the error's message (a
-- string). A figure is left out only where the client computes it exactly from integers it read.

-- Numbers and expiry times as every algorithm's save writes them (and this module's replies and values).
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

-- As locals: clockMs runs on every call.
local tonumber, floor = tonumber, math.floor

-- The `now` argument that asks for the server's own clock (TIME) instead of an injected epoch ms.
local SERVER_TIME = 'server'

-- The last time clockMs read from the server's clock (a function library keeps it between calls).
local serverMs = nil

-- The store's time (epoch ms): the injected clock when the caller sent one, else the server's clock.
local function clockMs(arg)
  if arg ~= SERVER_TIME then return tonumber(arg) end
  local t = redis.call('TIME')
  serverMs = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  return serverMs
end

-- Whether a time is the server's clock as this call read it (an absolute time the server's expiry can
-- take: PEXPIREAT), not an injected one.
local function isServerMs(ms)
  return ms == serverMs
end

-- An op travels as one text (opText in src/stores/redis/op-text.ts): its 13 fields joined by ',': type, limit,
-- sizeMs, buckets, burst, flags, lockout durationMs (0: no lockout), escalate, maxDurationMs (0: no cap),
-- forgetAfterMs, cost (units), periodEndMs, nextPeriodEndMs (epoch ms, calendar windows; else 0), and
-- a 14th, the rule's name, when flags has 8 or 16.
-- flags: '0', or '1' (dry run), when the op's rule has never had an override (its override is not
-- read: the usual case costs nothing) and keeps its own count key; else the sum of 1 (dry run), 2
-- (read the key's override: its override key follows its count key in KEYS), 4 (with 2 or 16: its
-- burst follows the limit), 8 (the rule's state is a field of its identity's hash, named by the 14th
-- field: its "count key" in KEYS is that hash, <prefix>:{<identity>}) and 16 (read the rule-wide
-- limit: the field named by the 14th field of the call's rule-limits hash, the call's last key,
-- overrides.lua limitShape), ruleFlags in op-text.ts.
-- Such an op has readsOverride, burstFollows, field (the rule's name, or nil) and ruleName (the rule's
-- name, or nil) as those say.
-- Ops and request shapes are read from their text once and kept (memo): in a function library (FCALL)
-- the next calls find them, so a decision parses nothing; a script (EVAL) keeps them for its call.
-- A kept op is shared by its uses: never modified, but for its fresh-state memos (algorithms.lua freshAdmits).
local function parseOp(text)
  local f, k = {}, 0
  for field in string.gmatch(text, '[^,]+') do
    k = k + 1
    f[k] = field
  end
  local windowType, lockMs = f[1], f[7] + 0
  local locks, calendar = lockMs ~= 0, windowType == 'calendar'
  local flags = f[6]
  local op = {
    type = windowType,
    limit = f[2] + 0,
    sizeMs = f[3] + 0,
    -- As sent, for the TTL of a window that starts now (fixed.lua): see costText.
    sizeMsText = f[3],
    buckets = f[4] + 0,
    burst = f[5] + 0,
    dryRun = flags == '1',
    lockMs = lockMs,
    escalate = locks and f[8] + 0 or 1,
    maxLockMs = locks and f[9] + 0 or 0,
    forgetAfterMs = locks and f[10] + 0 or 0,
    cost = f[11] + 0,
    -- The cost as sent: a numeric argument to redis.call would be printed with %.17g on every call.
    costText = f[11],
    periodEndMs = calendar and f[12] + 0 or 0,
    nextPeriodEndMs = calendar and f[13] + 0 or 0,
  }
  if flags ~= '0' and flags ~= '1' then
    local bits = flags + 0
    op.dryRun, op.readsOverride, op.burstFollows = bits % 2 == 1, bits % 4 >= 2, bits % 8 >= 4
    -- Kept in its identity's hash (algorithms.lua byField), field = the rule's name.
    if bits % 16 >= 8 then op.field = f[14] end
    if bits >= 16 then op.ruleName = f[14] end
  end
  return op
end

-- Texts read so far -> what they read as. Emptied when full: a limit per identity (or a calendar
-- period's end) makes new texts without end.
local MEMO_LIMIT = 1000

-- A reader of texts that keeps what `parse` made of each.
local function memo(parse)
  local known, size = {}, 0
  return function(text)
    local found = known[text]
    if found then return found end
    found = parse(text)
    if size >= MEMO_LIMIT then known, size = {}, 0 end
    known[text] = found
    size = size + 1
    return found
  end
end

local readOp = memo(parseOp)

-- ARGV[at] = m, the number of distinct ops, then the text of each. Returns the ops as an array and the
-- ARGV position after them.
local function readOps(ARGV, at)
  local ops = {}
  local m = ARGV[at] + 0
  for j = 1, m do ops[j] = readOp(ARGV[at + j]) end
  return ops, at + 1 + m
end

-- The first byte of an op's part in a shape that shares the identity record of the op before it.
local CARET = string.byte('^')

-- A request shape of check.lua from its text (check.lua's header: ARGV shape), read once and kept:
-- { mode, consumeNothing, n, ops, locks, reads, plain, keys, fields, recordParts, same, ruleLimits }: n
-- ops (readOp); per op whether it has a lockout (locks), reads its override (reads: false when none does)
-- and shares the identity record of the op before (same: false when none does); plain: check mode,
-- consuming, no lockout, no override (decide-plain.lua); keys: how many KEYS a request of the shape
-- has; fields: per op its rule's name when every op's state is in one identity record
-- (decide-grouped.lua), else false; recordParts: decide-grouped.lua freshRecord's pieces; ruleLimits:
-- the indexes of the ops that read their rule-wide limit (overrides.lua limitShape), or false.
local function parseShape(text)
  local mode, nothing
  local n, shapeOps, locks, reads, keys, same, ruleLimits = 0, {}, {}, false, 0, false, false
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
      if op.ruleName then
        ruleLimits = ruleLimits or {}
        ruleLimits[#ruleLimits + 1] = n
      end
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
    plain = plain, keys = keys, fields = fields, recordParts = recordParts, same = same, ruleLimits = ruleLimits,
  }
end

local readShape = memo(parseShape)

-- A lock key's value: "<untilMs>:<level>:<forgetAtMs>" (epoch ms, level >= 1).
local function lockValue(untilMs, level, forgetAtMs)
  return num(untilMs) .. ':' .. num(level) .. ':' .. num(forgetAtMs)
end

-- { untilMs, level, forgetAtMs } of a lock key's value.
local function readLockValue(v)
  local untilMs, level, forgetAtMs = string.match(v, '^([^:]+):([^:]+):([^:]+)$')
  return { untilMs = tonumber(untilMs), level = tonumber(level), forgetAtMs = tonumber(forgetAtMs) }
end

-- A member of a lock index (ZSET, score = untilMs): "<level>:<identity>" (parseLockIndexMember in TS).
local function lockIndexMember(level, identity)
  return num(level) .. ':' .. identity
end

-- The bits of a check reply head (Flag in src/stores/redis/replies.ts: the same names and values).
local Flag = {
  ALLOWED = 1, LOCKED = 2, LOCKED_NOW = 4, RETRY_AFTER_FOLLOWS = 8, OVERRIDDEN = 16, REMAINING_DERIVED = 32,
  RECEIPT_DERIVED = 64, WINDOWED = 128,
}
-- As locals: read for every result.
local ALLOWED, LOCKED, LOCKED_NOW, RETRY_AFTER_FOLLOWS = Flag.ALLOWED, Flag.LOCKED, Flag.LOCKED_NOW, Flag.RETRY_AFTER_FOLLOWS
local OVERRIDDEN, REMAINING_DERIVED, RECEIPT_DERIVED = Flag.OVERRIDDEN, Flag.REMAINING_DERIVED, Flag.RECEIPT_DERIVED
local WINDOWED = Flag.WINDOWED
-- The lock level counts in multiples of this, above the flags.
local LEVEL_UNIT = 256
-- Slot ids per ms (concurrency.lua, src/algorithms/concurrency.ts).
local SLOT_IDS_PER_MS = 1024

-- Appends result r of an op whose limit was `limit` at requestNowMs to the reply at b (see the header);
-- `override`: the override (the key's, or the rule-wide limit) that decided it ({ limit }) or false; `slotIds`: a concurrency op. Returns
-- the new end.
local function putResult(reply, b, r, override, limit, requestNowMs, slotIds)
  local retryAfterMs, locked = r.retryAfterMs, r.locked
  local remaining, resetMs, count, receipt = r.remaining, r.resetMs, r.count, r.receipt
  local head = LEVEL_UNIT * r.level
  if override then
    head = head + OVERRIDDEN
    limit = override.limit
    if override.windowMs then head = head + WINDOWED end
  end
  if r.allowed then head = head + ALLOWED end
  if locked then head = head + LOCKED end
  if r.lockedNow then head = head + LOCKED_NOW end
  if retryAfterMs ~= 0 then head = head + RETRY_AFTER_FOLLOWS end
  local derivedRemaining = count % 1 == 0 and remaining == math.max(0, limit - count)
  local derivedReceipt = resetMs % 1 == 0 and receipt == requestNowMs + resetMs
  if derivedRemaining then head = head + REMAINING_DERIVED end
  if derivedReceipt then head = head + RECEIPT_DERIVED end
  b = b + 1
  reply[b] = head
  if not derivedRemaining then
    b = b + 1
    reply[b] = remaining
  end
  reply[b + 1], reply[b + 2] = resetMs, count
  b = b + 2
  if not derivedReceipt then
    if slotIds and receipt ~= 0 and requestNowMs % 1 == 0 then receipt = receipt - requestNowMs * SLOT_IDS_PER_MS end
    b = b + 1
    reply[b] = receipt
  end
  if retryAfterMs ~= 0 then
    b = b + 1
    reply[b] = retryAfterMs
  end
  if locked then
    b = b + 1
    reply[b] = r.lockedUntil
  end
  if override then
    b = b + 1
    reply[b] = override.limit
    if override.windowMs then
      b = b + 1
      reply[b] = override.windowMs
    end
  end
  return b
end

-- The head of a fresh result (putFresh): below 0, which no result's head is.
local FRESH = -1

-- Appends the result of an op that found its key empty and counted: its algorithm's verdict on an
-- empty state, which the client computes from the op and the time. An op at its own limit is answered
-- FRESH, one at a rule-wide limit (op.ruleWide, overrides.lua limitShape) FRESH less that limit, which
-- the client does not know. check.lua writes it itself in its loops.
local function putFresh(reply, b, op)
  local wide = op.ruleWide
  if wide then reply[b + 1] = FRESH - wide.limit else reply[b + 1] = FRESH end
  return b + 1
end

return {
  putResult = putResult,
  putFresh = putFresh,
  FRESH = FRESH,
  SERVER_TIME = SERVER_TIME,
  clockMs = clockMs,
  isServerMs = isServerMs,
  memo = memo,
  readOp = readOp,
  readOps = readOps,
  readShape = readShape,
  lockValue = lockValue,
  readLockValue = readLockValue,
  lockIndexMember = lockIndexMember,
  num = num,
  ttlMs = ttlMs,
}
