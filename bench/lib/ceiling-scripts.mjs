/**
 * @module The Redis ceilings: for each algorithm, the least a script doing the same job can do. Same data
 * layout as sluice's script (one hash or sorted set per key, same TTLs), same time source (`TIME`), same
 * five numbers back, one rule, written straight down with no helpers. Sent as a raw EVALSHA through
 * ioredis, they show what the network, the client and Redis cost without sluice's code around them.
 * ARGV: cost, then the rule's numbers (concurrency: then the lease id; every lease holds one unit, so its id
 * carries no cost, and its releases go by `CEILING_RELEASES_LUA`).
 */

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost = tonumber(ARGV[1])
`

export const CEILING_LUA = {
  fixedWindow: `${NOW}
local limit, windowMs = tonumber(ARGV[2]), tonumber(ARGV[3])
local start = now - math.fmod(now, windowMs)
local h = redis.call('HMGET', KEYS[1], 's', 'c')
local count = 0
if tonumber(h[1]) == start then count = tonumber(h[2]) end
local resetMs = start + windowMs - now
if count + cost > limit then return { 0, limit - count, resetMs, resetMs, 0 } end
if count > 0 then
  redis.call('HINCRBY', KEYS[1], 'c', cost)
else
  redis.call('HSET', KEYS[1], 's', start, 'c', cost)
  redis.call('PEXPIRE', KEYS[1], resetMs)
end
return { 1, limit - count - cost, resetMs, 0, 0 }`,

  slidingLog: `${NOW}
local limit, windowMs = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - windowMs)
local total = redis.call('ZCARD', KEYS[1])
if total + cost > limit then
  local oldest = redis.call('ZRANGE', KEYS[1], total + cost - limit - 1, total + cost - limit - 1, 'WITHSCORES')
  return { 0, limit - total, windowMs, tonumber(oldest[2]) + windowMs - now, 0 }
end
local seq = redis.call('ZCOUNT', KEYS[1], now, now)
redis.call('ZADD', KEYS[1], now, now .. ':' .. seq)
redis.call('PEXPIRE', KEYS[1], windowMs)
return { 1, limit - total - cost, windowMs, 0, 0 }`,

  slidingWindow: `${NOW}
local limit, windowMs, bucketMs = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local current = now - math.fmod(now, bucketMs)
local oldest = current - windowMs + bucketMs
local h = redis.call('HGETALL', KEYS[1])
local total = 0
local stale = {}
for i = 1, #h, 2 do
  local s = tonumber(h[i])
  if s >= oldest then total = total + tonumber(h[i + 1]) else stale[#stale + 1] = h[i] end
end
if total + cost > limit then return { 0, limit - total, windowMs, bucketMs, 0 } end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
redis.call('HINCRBY', KEYS[1], current, cost)
redis.call('PEXPIRE', KEYS[1], current + windowMs - now)
return { 1, limit - total - cost, current + windowMs - now, 0, 0 }`,

  tokenBucket: `${NOW}
local capacity, refill = tonumber(ARGV[2]), tonumber(ARGV[3])
local full = capacity * 1000
local h = redis.call('HMGET', KEYS[1], 'm', 'l')
local milli, last = full, now
if h[1] then milli = tonumber(h[1]); last = tonumber(h[2]) end
if now > last then milli = math.min(milli + (now - last) * refill, full); last = now end
if milli < cost * 1000 then return { 0, math.floor(milli / 1000), math.ceil((full - milli) / refill), math.ceil((cost * 1000 - milli) / refill), 0 } end
milli = milli - cost * 1000
local resetMs = math.ceil((full - milli) / refill)
redis.call('HSET', KEYS[1], 'm', string.format('%.17g', milli), 'l', last)
redis.call('PEXPIRE', KEYS[1], resetMs + 1)
return { 1, math.floor(milli / 1000), resetMs, 0, 0 }`,

  leakyBucket: `${NOW}
local rate, maxQueueMs, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HMGET', KEYS[1], 's', 'u')
local start, units = -math.huge, 0
if h[1] then start = tonumber(h[1]); units = tonumber(h[2]) end
local ahead = math.ceil(((units + cost) * 1000) / rate) - (now - start)
if ahead > maxQueueMs then return { 0, 0, ahead, ahead - maxQueueMs, 0 } end
if ahead > 0 then units = units + cost else start = now; units = 0 end
local waitMs = 0
if ahead > 0 then waitMs = ahead end
redis.call('HSET', KEYS[1], 's', start, 'u', units)
redis.call('PEXPIRE', KEYS[1], start + math.ceil(((units + limit) * 1000) / rate) - now)
return { 1, limit, waitMs, 0, waitMs }`,

  // A lease per admitted call, scored by when it ends; ARGV[4] is the lease id the client made. Every lease
  // holds one unit (the bench's cost), so ZCARD counts the units held.
  concurrency: `${NOW}
local limit, leaseMs = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held + cost > limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return { 0, limit - held, tonumber(oldest[2]) - now, tonumber(oldest[2]) - now, 0 }
end
redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[4])
redis.call('PEXPIRE', KEYS[1], leaseMs)
return { 1, limit - held - cost, leaseMs, 0, 0 }`,
}

/**
 * The concurrency ceiling's release: the leases ended in one turn of the client, in one call (each lease's
 * key declared, as Redis Cluster needs; ARGV the ids, in the order of the keys).
 */
export const CEILING_RELEASES_LUA = `for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[i]) end
return 1`

/**
 * The smallest scripts that still do each algorithm's Redis work, with none of its arithmetic: the floor of
 * what a script costs inside Redis (`INFO commandstats` usec_per_call), beside which sluice's is measured
 * (bench/redis-time.mjs). fixedWindow: INCR + PEXPIRE. slidingLog: TIME, ZREMRANGEBYSCORE, ZCARD, INCR (a
 * sequence for the member, in the same slot), ZADD, PEXPIRE. concurrency: TIME, ZCARD, ZADD, PEXPIRE, and
 * its release's ZREM (CEILING_RELEASES_LUA): each lease scored by its end on Redis's clock, never read or
 * dropped (the bench releases every lease). Same ARGV as the ceilings.
 */
export const MINIMAL_LUA = {
  fixedWindow: `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return { 1, tonumber(ARGV[2]) - c, 0, 0, 0 }`,

  slidingLog: `${NOW}
local limit, windowMs = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - windowMs)
local total = redis.call('ZCARD', KEYS[1])
if total + cost > limit then return { 0, limit - total, windowMs, windowMs, 0 } end
local seq = redis.call('INCR', KEYS[1] .. ':seq')
redis.call('ZADD', KEYS[1], now, seq)
redis.call('PEXPIRE', KEYS[1], windowMs)
return { 1, limit - total - cost, windowMs, 0, 0 }`,

  concurrency: `${NOW}
local limit, leaseMs = tonumber(ARGV[2]), tonumber(ARGV[3])
local held = redis.call('ZCARD', KEYS[1])
if held + cost > limit then return { 0, limit - held, leaseMs, leaseMs, 0 } end
redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[4])
redis.call('PEXPIRE', KEYS[1], leaseMs)
return { 1, limit - held - cost, leaseMs, 0, 0 }`,
}

/** The ARGV after cost for each algorithm, from the rule the bench uses. */
export function ceilingArgs(rule) {
  switch (rule.kind) {
    case 'fixedWindow':
    case 'slidingLog':
      return [rule.limit, rule.windowMs]
    case 'concurrency':
      return [rule.limit, rule.leaseMs]
    case 'slidingWindow':
      return [rule.limit, rule.windowMs, rule.bucketMs]
    case 'tokenBucket':
      return [rule.capacity, rule.refillPerSecond]
    case 'leakyBucket':
      return [rule.ratePerSecond, rule.maxQueueMs, rule.limit]
  }
}
