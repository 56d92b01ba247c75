-- sluice: one slidingLog rule's consume of a cost above 0, without a block, written straight down: the
-- prelude's head (TIME, the deadline, the caller's clock) and slidingLogLive, slidingLogDecide and
-- slidingLogAdmit (sliding-log.lua, which explains the log's shape) inlined, so an admitted call makes no
-- closure and calls no Lua function. Same ARGV and reply as the composed `apply` script (src/wire.ts);
-- src/plans.ts sends it only for such a call. Keep it in step with sliding-log.lua: the conformance suites
-- run every such consume through it.

local t = redis.call('TIME')
local serverNow = t[1] * 1000 + math.floor(t[2] / 1000)
if serverNow >= tonumber(ARGV[4]) then return { 'late', serverNow } end
local now, ttlSlack = serverNow, 0
if ARGV[1] ~= '' then now, ttlSlack = tonumber(ARGV[1]), 1000 end
local key, cost, limit, windowMs = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[6]), tonumber(ARGV[7])
local logModulus = 4503599627370496 -- 2^52

-- The live part of the log, as slidingLogLive.
local expired = redis.call('ZCOUNT', key, '-inf', now - windowMs)
if expired > 0 then
  local drop = expired
  if drop > 64 then drop = 64 end
  redis.call('ZREMRANGEBYRANK', key, 0, drop - 1)
  expired = expired - drop
end
local total, newestEnd, newestAt, seq, before = 0, 0, 0, 0, 0
local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if #e > 0 then
  local newestSeq, finish = string.match(e[1], '^(%d+):(%d+):%d+$')
  newestEnd, newestAt = tonumber(finish), tonumber(e[2])
  local live = newestAt > now - windowMs
  local firstEnd, firstCost = '0', '0'
  if live then
    firstEnd, firstCost = string.match(redis.call('ZRANGE', key, expired, expired)[1], '^%d+:(%d+):(%d+)$')
  end
  if newestEnd == nil or firstEnd == nil then
    redis.call('DEL', key)
    newestEnd, newestAt, expired = 0, 0, 0
  else
    if newestAt == now then seq = tonumber(newestSeq) + 1 end
    if live then
      before = tonumber(firstEnd) - tonumber(firstCost)
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
  redis.call('ZADD', key, now, string.format('%016d:%d:%d', seq, finish, cost))
  redis.call('PEXPIRE', key, windowMs + ttlSlack)
  return { 1, limit - total - cost, windowMs, 0, 0, '', 0, serverNow }
end

-- Denied: as slidingLogDecide, the entry whose expiry lets the call fit, by binary search over ranks.
local mustExpire = total + cost - limit
local lo, hi = expired, redis.call('ZCARD', key) - 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local midEnd = tonumber(string.match(redis.call('ZRANGE', key, mid, mid)[1], '^%d+:(%d+):%d+$'))
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
local oldestAt = tonumber(redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')[2])
local remaining = limit - total
if remaining < 0 then remaining = 0 end
return { 0, remaining, newestAt + windowMs - now, oldestAt + windowMs - now, 0, '', 0, serverNow }
