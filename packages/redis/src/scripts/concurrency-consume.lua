-- sluice: one concurrency rule's consume of a cost above 0, without a block, written straight down: the
-- prelude's head (TIME, the deadline, the caller's clock), concurrencyDecide and concurrencyAdmit
-- (concurrency.lua) inlined, so a call makes no closure and calls no Lua function. It reads the short call
-- (src/wire.ts, encodeConsume): ARGV the deadline, limit, leaseMs, the lease id, then the cost (absent: 1),
-- then the caller's ms (absent: Redis's clock). Its reply is the composed `apply` script's but for an
-- admitted call, which gets the short one (wire.ts `ADMITTED_REPLY`), since the lease it holds is the one
-- the caller sent, which need not come back. src/redis-store.ts sends it only for such a call. Keep it in step
-- with concurrency.lua: the conformance suites run every such consume through it.
--
-- As sliding-log-consume.lua, every number an admitted call gives redis.call is text (a literal, an ARGV or
-- `%d`: Redis 7.0 writes a Lua number with `%.17g`, a few thousand instructions each), and a string is read
-- as a number by arithmetic (`s + 0`) rather than tonumber. Only whole numbers go that way: ms, costs,
-- limits and ranks all are.

local t = redis.call('TIME')
local serverNow = t[1] * 1000 + math.floor(t[2] / 1000)
if serverNow >= ARGV[1] + 0 then return { 'late', serverNow } end
local now, ttlSlack = serverNow, 0
if ARGV[6] then now, ttlSlack = ARGV[6] + 0, 1000 end
local key, cost, limit, leaseMs = KEYS[1], 1, ARGV[2] + 0, ARGV[3] + 0
if ARGV[5] then cost = ARGV[5] + 0 end
-- The leases in the order they end, as many as can be ended (64 at most go per call: concurrencyMaxDrop)
-- and live (at most `limit`, the factory bounds it): one command where the composed script runs ZCOUNT
-- then ZRANGEBYSCORE. Should more than that be kept (64 ended leases or more, or live ones of cost 0
-- beyond), the rest is read as the composed script reads it.
local leases = redis.call('ZRANGE', key, '0', string.format('%d', limit + 63), 'WITHSCORES')
local ended = 0
for i = 2, #leases, 2 do
  if leases[i] + 0 > now then break end
  ended = ended + 1
end
local live, first = leases, 2 * ended + 1
if ended >= 64 or #leases == 2 * (limit + 64) then
  -- now as the composed script writes it (num(now)).
  local at = string.format('%.17g', now)
  ended = redis.call('ZCOUNT', key, '-inf', at)
  if ended > 64 then ended = 64 end
  live, first = redis.call('ZRANGEBYSCORE', key, '(' .. at, '+inf', 'WITHSCORES'), 1
end
if ended > 0 then redis.call('ZREMRANGEBYRANK', key, '0', string.format('%d', ended - 1)) end
local leased = 0
for i = first, #live, 2 do leased = leased + string.match(live[i], ':(%d+)$') end
if leased + cost <= limit then
  redis.call('ZADD', key, string.format('%d', now + leaseMs), ARGV[4])
  local ttl = ARGV[3]
  if ttlSlack > 0 then ttl = string.format('%d', leaseMs + ttlSlack) end
  redis.call('PEXPIRE', key, ttl)
  -- The newest lease is this call's: the caller knows its id (ARGV[4]), so the short reply.
  return { 1, limit - leased - cost, leaseMs, serverNow }
end
-- Denied: the call fits once enough of the oldest leases have ended (a release can come sooner).
local freed, retryAt = 0, now
for i = first, #live, 2 do
  freed = freed + tonumber(string.match(live[i], ':(%d+)$'))
  retryAt = tonumber(live[i + 1])
  if leased - freed + cost <= limit then break end
end
local remaining = limit - leased
if remaining < 0 then remaining = 0 end
return { 0, remaining, tonumber(live[#live]) - now, retryAt - now, 0, '', 0, serverNow }
