-- The foot of the composed script: applies every rule of one call to one key, all or nothing.
--
-- KEYS: one per rule, all in one hash slot.
-- ARGV: now ('' to use the server's TIME), mode ('1' consume, '0' peek), cost,
--       then for each rule its code and its params; a rule reads its params from ARGV[a + 1] on, where
--       ARGV[a] is its code.
-- Reply: five integers per rule: allowed (1 or 0), remaining, resetMs, retryAfterMs, waitMs.

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local consume = ARGV[2] == '1'
local cost = tonumber(ARGV[3])

local n = #KEYS
local algs, offsets, states = {}, {}, {}
local out = {}
local admitted = true
local a = 4
for i = 1, n do
  local alg = rules[ARGV[a]]
  if alg == nil then return redis.error_reply('ERR sluice: unknown rule code ' .. tostring(ARGV[a])) end
  local st, allowed, remaining, resetMs, retryAfterMs, waitMs = alg.decide(KEYS[i], a, now, cost)
  algs[i], offsets[i], states[i] = alg, a, st
  a = a + alg.params + 1
  local o = i * 5 - 4
  if allowed then out[o] = 1 else out[o] = 0; admitted = false end
  out[o + 1] = remaining
  out[o + 2] = resetMs
  out[o + 3] = retryAfterMs
  out[o + 4] = waitMs
end

if not admitted and n > 1 then
  -- Nothing is counted: the rules that would have admitted the call report what they have left.
  for i = 1, n do
    local o = i * 5 - 4
    if out[o] == 1 then
      local _, _, remaining, resetMs = algs[i].decide(KEYS[i], offsets[i], now, 0)
      out[o + 1] = remaining
      out[o + 2] = resetMs
      out[o + 3] = 0
      out[o + 4] = 0
    end
  end
elseif consume and admitted then
  for i = 1, n do algs[i].admit(KEYS[i], offsets[i], now, cost, states[i]) end
end
return out
