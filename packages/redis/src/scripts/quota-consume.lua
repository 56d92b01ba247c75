-- sluice: one quota rule's consume of a cost above 0, without a block, written straight down: the prelude's
-- head (TIME, the deadline, the caller's clock), the period check and quota.lua's decide and admit inlined,
-- counting first as fixed-window-consume.lua does. It reads the short call (src/wire.ts, encodeConsume):
-- ARGV the deadline, limit, the period's start and end, then the cost (absent: 1), then the caller's ms
-- (absent: Redis's clock). Its replies are the composed `apply` script's: `{ 'period', now, serverNow }`
-- when `now` lies outside the period sent, else the full form (a quota's waitMs place carries `used`). Keep
-- it in step with quota.lua: the conformance suites run every such consume through it.

local t = redis.call('TIME')
local serverNow = t[1] * 1000 + math.floor(t[2] / 1000)
if serverNow >= tonumber(ARGV[1]) then return { 'late', serverNow } end
local now, ttlSlack = serverNow, 0
if ARGV[6] then now, ttlSlack = tonumber(ARGV[6]), 1000 end
local start, finish = tonumber(ARGV[3]), tonumber(ARGV[4])
if now < start or now >= finish then return { 'period', now, serverNow } end
local costText = ARGV[5] or '1'
local key, cost, limit = KEYS[1], tonumber(costText), tonumber(ARGV[2])
-- The field is the start as the client wrote it, the digits Redis writes for the number in quota.lua.
local field = ARGV[3]
local after = redis.call('HINCRBY', key, field, costText)
local count = after - cost
if after == cost then
  -- The period's first units: as quotaBegin.
  if redis.call('HLEN', key) > 1 then
    redis.call('DEL', key)
    redis.call('HSET', key, field, after)
  end
  redis.call('PEXPIRE', key, finish - now + ttlSlack)
end
if after <= limit then return { 1, limit - after, finish - now, 0, count, '', 0, serverNow } end
-- Denied: the units go again (and with them a field this call made).
if count == 0 then
  redis.call('HDEL', key, field)
else
  redis.call('HINCRBY', key, field, -cost)
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
local resetMs = 0
if count > 0 then resetMs = finish - now end
return { 0, remaining, resetMs, resetMs, count, '', 0, serverNow }
