-- slidingLog (params: limit, windowMs). A sorted set, one member per admitted unit, scored by
-- its time. Members at one score are "<time>:0", "<time>:1", ...: entries leave only a whole score at a
-- time (or with the key), so counting the members at `now` numbers new ones uniquely, however many
-- processes land in the same ms. The key lives until its newest entry stops counting.

local function slidingLogDecide(key, now, cost, limit, windowMs)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now - windowMs))
  local total = redis.call('ZCARD', key)
  if total + cost <= limit then
    -- The newest entry is this call's, or with cost 0 the newest already logged.
    local resetMs = windowMs
    if cost == 0 then
      resetMs = 0
      if total > 0 then resetMs = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) + windowMs - now end
    end
    return true, limit - total - cost, resetMs, 0, 0
  end
  -- Denied: the call fits once the oldest `mustExpire` units have expired.
  local mustExpire = total + cost - limit
  local oldest = redis.call('ZRANGE', key, mustExpire - 1, mustExpire - 1, 'WITHSCORES')
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return false, limit - total, tonumber(newest[2]) + windowMs - now, tonumber(oldest[2]) + windowMs - now, 0
end

local function slidingLogAdmit(key, now, cost, _limit, windowMs)
  local at = num(now)
  local seq = redis.call('ZCOUNT', key, at, at)
  if cost == 1 then
    redis.call('ZADD', key, at, at .. ':' .. seq)
    redis.call('PEXPIRE', key, pttl(windowMs))
    return
  end
  local batch = {}
  local n = 0
  for i = 0, cost - 1 do
    batch[n + 1] = at
    batch[n + 2] = at .. ':' .. (seq + i)
    n = n + 2
    if n == 1000 then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
      n = 0
    end
  end
  if n > 0 then redis.call('ZADD', key, unpack(batch)) end
  redis.call('PEXPIRE', key, pttl(windowMs))
end
