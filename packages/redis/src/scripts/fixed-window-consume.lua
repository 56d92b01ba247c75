-- sluice: one fixedWindow rule's consume of a cost above 0, without a block, written straight down: the
-- prelude's head (TIME, the deadline, the caller's clock) and fixedWindowConsume with fixedWindowBegin
-- (fixed-window.lua) inlined, so a call makes no closure and calls no Lua function. It reads the short call
-- (src/wire.ts, encodeConsume): ARGV the deadline, limit, windowMs, then the cost (absent: 1), then the
-- caller's ms (absent: Redis's clock). Its reply is the composed `apply` script's but for an admitted call,
-- which gets the short one (src/wire.ts, ADMITTED_REPLY); src/redis-store.ts sends it only for such a call. Keep
-- it in step with fixed-window.lua: the conformance suites run every such consume through it.

local t = redis.call('TIME')
local serverNow = t[1] * 1000 + math.floor(t[2] / 1000)
if serverNow >= tonumber(ARGV[1]) then return { 'late', serverNow } end
local now, ttlSlack = serverNow, 0
if ARGV[5] then now, ttlSlack = tonumber(ARGV[5]), 1000 end
local costText = ARGV[4] or '1'
local key, cost, limit, windowMs = KEYS[1], tonumber(costText), tonumber(ARGV[2]), tonumber(ARGV[3])
local start = now - math.fmod(now, windowMs)
-- The field is named as Redis writes the number `start` (the composed scripts pass it as one): with Redis's
-- clock it is a whole ms far below 2^53, whose digits `%d` writes faster. The cost goes as the text the
-- caller sent.
local field = start
if ttlSlack == 0 then field = string.format('%d', start) end
local after = redis.call('HINCRBY', key, field, costText)
if after == cost then
  -- The window's first units: as fixedWindowBegin.
  if redis.call('HLEN', key) > 1 then
    local o = redis.call('HMGET', key, 's', 'c')
    if tonumber(o[1]) == start then after = after + tonumber(o[2]) end
    redis.call('DEL', key)
    redis.call('HSET', key, start, after)
  end
  redis.call('PEXPIRE', key, start + windowMs - now + ttlSlack)
end
-- Admitted: the short reply (src/wire.ts, ADMITTED_REPLY).
if after <= limit then return { 1, limit - after, start + windowMs - now, serverNow } end
-- Denied: the units go again (and with them a field this call made).
local count = after - cost
if count == 0 then
  redis.call('HDEL', key, start)
else
  redis.call('HINCRBY', key, start, -cost)
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
local resetMs = 0
if count > 0 then resetMs = start + windowMs - now end
return { 0, remaining, resetMs, resetMs, 0, '', 0, serverNow }
