-- sluice: one slidingLog rule's consume of a cost above 0, without a block, written straight down: the
-- prelude's head (TIME, the deadline, the caller's clock) and slidingLogLive, slidingLogDecide and
-- slidingLogAdmit (sliding-log.lua, which explains the log's shape) inlined, so an admitted call makes no
-- closure and calls no Lua function. It reads the short call (src/wire.ts, encodeConsume): ARGV the
-- deadline, limit, windowMs, then the cost (absent: 1), then the caller's ms (absent: Redis's clock). Its
-- reply is the composed `apply` script's but for an admitted call, which gets the short one (src/wire.ts,
-- ADMITTED_REPLY); src/redis-store.ts sends it only for such a call. Keep it in step with sliding-log.lua: the
-- conformance suites run every such consume through it.
--
-- Where Redis's time goes in a script this short is turning numbers into text and back, so an admitted
-- call does neither where it can help it: every number it gives redis.call is text (a literal, an ARGV,
-- or `%d`, which writes a whole number's digits without the `%.17g` Redis 7.0 spends on a Lua number), it
-- reads no member's score, and it reads a string as a number by arithmetic (`s + 0`, once), not by
-- tonumber (which reads it twice in Lua 5.1). Only whole numbers go that way: ms, costs, limits, ranks
-- and running sums all are.

local t = redis.call('TIME')
local serverNow = t[1] * 1000 + math.floor(t[2] / 1000)
if serverNow >= ARGV[1] + 0 then return { 'late', serverNow } end
local key, limit, windowMs, cost = KEYS[1], ARGV[2] + 0, ARGV[3] + 0, 1
if ARGV[4] then cost = ARGV[4] + 0 end
-- `at`: the call's ms as the text its member is scored by; `ttl`: the key's TTL as PEXPIRE takes it (a
-- caller's clock, whole ms, gets the prelude's second of slack).
local now, at, ttl = serverNow, nil, ARGV[3]
if ARGV[5] == nil then
  at = string.format('%d', serverNow)
else
  now, at, ttl = ARGV[5] + 0, ARGV[5], string.format('%d', windowMs + 1000)
end
local logModulus = 4503599627370496 -- 2^52

-- The live part of the log, as slidingLogLive: drop up to 64 expired members (ranks 0 to `expired` - 1),
-- then the member at rank `expired` is the oldest live one, if any.
local expired = redis.call('ZCOUNT', key, '-inf', string.format('%d', now - windowMs))
if expired > 0 then
  if expired == 1 then
    redis.call('ZREMRANGEBYRANK', key, '0', '0')
    expired = 0
  elseif expired <= 64 then
    redis.call('ZREMRANGEBYRANK', key, '0', string.format('%d', expired - 1))
    expired = 0
  else
    redis.call('ZREMRANGEBYRANK', key, '0', '63')
    expired = expired - 64
  end
end
local rank = '0'
if expired > 0 then rank = string.format('%d', expired) end
local first = redis.call('ZRANGE', key, rank, rank)[1]
local total, newestEnd, seq, before = 0, 0, 0, 0
local newest = redis.call('ZRANGE', key, '-1', '-1')[1]
if newest ~= nil then
  local newestSeq, finish = string.match(newest, '^(%d+):(%d+):%d+$')
  local firstEnd, firstCost = '0', '0'
  if first ~= nil then firstEnd, firstCost = string.match(first, '^%d+:(%d+):(%d+)$') end
  if finish == nil or firstEnd == nil then
    redis.call('DEL', key)
    newest, expired = nil, 0
  else
    newestEnd = finish + 0
    if first ~= nil then
      seq = newestSeq + 1
      before = firstEnd - firstCost
      if before < 0 then before = before + logModulus end
      total = newestEnd - before
      if total < 0 then total = total + logModulus end
    end
  end
end

if total + cost <= limit then
  -- Admitted: as slidingLogAdmit.
  local finish = newestEnd + cost
  if finish >= logModulus then finish = finish - logModulus end
  redis.call('ZADD', key, at, string.format('%016d:%d:%d', seq, finish, cost))
  redis.call('PEXPIRE', key, ttl)
  -- The short reply of an admitted call (src/wire.ts, ADMITTED_REPLY).
  return { 1, limit - total - cost, windowMs, serverNow }
end

-- Denied: as slidingLogDecide, the entry whose expiry lets the call fit, by binary search over ranks. A
-- denied call found live units (no consume costs more than its rule's limit: the limiter refuses it), so
-- `first` and `newest` are members of the log's shape.
local mustExpire = total + cost - limit
local lo, hi = expired, redis.call('ZCARD', key) - 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local r = string.format('%d', mid)
  local midEnd = string.match(redis.call('ZRANGE', key, r, r)[1], '^%d+:(%d+):%d+$')
  local units = 0
  if midEnd ~= nil then
    units = midEnd - before
    if units < 0 then units = units + logModulus end
  end
  if midEnd == nil or units >= mustExpire then
    hi = mid
  else
    lo = mid + 1
  end
end
local r = string.format('%d', lo)
local oldestAt = redis.call('ZRANGE', key, r, r, 'WITHSCORES')[2] + 0
local newestAt = redis.call('ZSCORE', key, newest) + 0
local remaining = limit - total
if remaining < 0 then remaining = 0 end
return { 0, remaining, newestAt + windowMs - now, oldestAt + windowMs - now, 0, '', 0, serverNow }
