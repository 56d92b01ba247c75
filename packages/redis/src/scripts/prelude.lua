-- sluice: the head of a composed script. The chunks that follow define, for each rule kind the call uses,
-- `<kind>Decide`, `<kind>Admit`, `<kind>Refund` and `<kind>Penalize`; the foot, generated per sequence of
-- rule kinds and per act (src/compose.ts), calls them for each rule in turn, all or nothing, and replies.
--
-- ARGV: now ('' to use the server's TIME), mode ('1' consume, '0' peek, else the act's name: 'penalize',
-- 'refund', 'unqueue', 'release', 'return'; only '1' is read here), cost, deadline, block (see below), then
-- each rule's params and the act's extras (src/wire.ts names them all). The deadline is in the server's ms:
-- a script that starts after it counts nothing, because the caller has already answered the call some other
-- way (its timeout passed and `onStoreError` decided).
-- The reply ends with the server's ms, from which the caller keeps its estimate of the server's clock.
--
-- Lua numbers are doubles, as in JavaScript. Every rule does the same float operations in the same order
-- as its TypeScript twin in @sluice/core, so both stores agree to the last bit. Floats are stored with
-- 17 significant digits (tostring keeps only 14), and `%` is math.fmod, which is JavaScript's `%`.
-- Whole numbers (costs, ms) go to redis.call as numbers: Redis writes a number argument with 17
-- significant digits itself, so the text is the same without a string.format per call.
-- Everything a call needs is a local of this one script run: no tables of functions, no closures per
-- rule, so a call allocates next to nothing besides its reply.

local function num(x)
  return string.format('%.17g', x)
end

local fmod = math.fmod
local floor = math.floor
local ceil = math.ceil

-- The most steps a fix-up loop takes (FIXUP_STEPS in @sluice/core's rules/bounds.ts): no loop in these
-- scripts runs a number of times that depends on a rate, a span or a cost.
local fixupSteps = 2

-- A key's TTL in ms, as PEXPIRE takes it. With a caller's clock (ARGV[1] not empty: tests driving a
-- trace), Redis still expires keys by its own clock, which the caller's may lag by a few ms of latency;
-- a second of slack keeps a key from vanishing before the caller's clock says it may. Keeping state past
-- its expiry is harmless: every rule's state then answers exactly as a fresh one would.
local ttlSlack = 0
if ARGV[1] ~= '' then ttlSlack = 1000 end

local function pttl(ms)
  return ms + ttlSlack
end

local serverNow
do
  local t = redis.call('TIME')
  serverNow = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
if serverNow >= tonumber(ARGV[4]) then return { 'late', serverNow } end

local now = serverNow
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) end
local consume = ARGV[2] == '1'
local cost = tonumber(ARGV[3])

-- Blocks. ARGV[5] is '' when the limiter does not block, else 'ms:factor:maxMs:forgetMs:keep'; the key's
-- block hash { u = end, h = the starts of its last `keep` blocks, oldest first } is then the last of KEYS,
-- in the same hash slot as the rule keys. The same operations in the same order as @sluice/core's block.ts.
local block
if ARGV[5] ~= '' then
  local ms, factor, maxMs, forgetMs, keep = string.match(ARGV[5], '^([^:]+):([^:]+):([^:]+):([^:]+):([^:]+)$')
  block = {
    key = KEYS[#KEYS],
    ms = tonumber(ms),
    factor = tonumber(factor),
    maxMs = tonumber(maxMs),
    forgetMs = tonumber(forgetMs),
    keep = tonumber(keep),
  }
end

-- Whole ms the key's block has left at `now`; 0 when it is not blocked (or the limiter does not block).
local function blockLeft()
  if not block then return 0 end
  local u = tonumber(redis.call('HGET', block.key, 'u'))
  if u and u > now then return u - now end
  return 0
end

-- Begins a block at `now` (the rules have just denied a consume) and returns its length: `ms × factor^(n−1)`,
-- multiplied out step by step, rounded up, at most `maxMs`, where `n` counts the blocks begun less than
-- `forgetMs` ago, this one included. Work is bounded by `keep` (at most 63).
local function beginBlock()
  local starts = {}
  local h = redis.call('HGET', block.key, 'h')
  if h then
    for s in string.gmatch(h, '[^,]+') do
      local t = tonumber(s)
      if t > now - block.forgetMs then starts[#starts + 1] = t end
    end
  end
  local n = #starts + 1
  local d = block.ms
  local i = 1
  while i < n and d < block.maxMs do
    d = d * block.factor
    i = i + 1
  end
  d = ceil(d)
  if d > block.maxMs then d = block.maxMs end
  starts[#starts + 1] = now
  local kept = {}
  local first = #starts - block.keep + 1
  if first < 1 then first = 1 end
  for j = first, #starts do kept[#kept + 1] = num(starts[j]) end
  local ends = now + d
  redis.call('HSET', block.key, 'u', num(ends), 'h', table.concat(kept, ','))
  local expires = ends
  if block.keep > 0 and now + block.forgetMs > expires then expires = now + block.forgetMs end
  redis.call('PEXPIRE', block.key, pttl(expires - now))
  return d
end
