-- sluice: the head of the composed script. The rule chunks that follow register themselves in `rules`
-- under a one-letter code; apply.lua, at the end, reads the call and runs them all or nothing.
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
