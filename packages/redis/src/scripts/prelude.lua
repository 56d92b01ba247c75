-- sluice: the head of a composed script. The rule chunks that follow (those the call uses) register
-- themselves in `rules` under a one-letter code; apply.lua, at the end, runs them all or nothing.
--
-- Lua numbers are doubles, as in JavaScript. Every rule does the same float operations in the same order
-- as its TypeScript twin in @sluice/core, so both stores agree to the last bit. Floats are stored with
-- 17 significant digits (tostring keeps only 14), and `%` is math.fmod, which is JavaScript's `%`.

local rules = {}

local function num(x)
  return string.format('%.17g', x)
end

local fmod = math.fmod
local floor = math.floor
local ceil = math.ceil

-- A key's TTL in ms, as PEXPIRE takes it. With a caller's clock (ARGV[1] not empty: tests driving a
-- trace), Redis still expires keys by its own clock, which the caller's may lag by a few ms of latency;
-- a second of slack keeps a key from vanishing before the caller's clock says it may. Keeping state past
-- its expiry is harmless: every rule's state then answers exactly as a fresh one would.
local ttlSlack = 0
if ARGV[1] ~= '' then ttlSlack = 1000 end

local function pttl(ms)
  return num(ms + ttlSlack)
end
