-- slidingWindow (params: limit, windowMs, bucketMs). A hash from bucket start to count.
-- A bucket starting at `s` counts while `now < s + windowMs`. Each call reads every field, and an admitted
-- call deletes the buckets that no longer count, so a key holds at most `buckets` + 1 fields and no call
-- loops over the time that passed.

local function slidingWindowDecide(key, now, cost, limit, windowMs, bucketMs)
  local current = now - fmod(now, bucketMs)
  local oldest = current - windowMs + bucketMs
  local h = redis.call('HGETALL', key)
  local live = {}
  local stale = {}
  local total = 0
  local newest = -math.huge
  for i = 1, #h, 2 do
    local s = tonumber(h[i])
    local c = tonumber(h[i + 1])
    if s >= oldest and s <= current and c > 0 then
      total = total + c
      if s > newest then newest = s end
      live[s] = c
    elseif s < oldest then
      stale[#stale + 1] = h[i]
    end
  end
  if total + cost <= limit then
    -- The newest counted bucket is this call's, or with cost 0 the newest holding anything.
    local last = newest
    if cost > 0 then last = current end
    local resetMs = 0
    if last ~= -math.huge then resetMs = last + windowMs - now end
    return true, limit - total - cost, resetMs, 0, 0, current, stale
  end
  -- Denied: walk the live buckets oldest first until enough units have expired for the call to fit.
  local mustExpire = total + cost - limit
  local expired = 0
  local s = oldest
  while s <= current do
    local c = live[s]
    if c then expired = expired + c end
    if expired >= mustExpire then break end
    s = s + bucketMs
  end
  local remaining = limit - total
  if remaining < 0 then remaining = 0 end
  return false, remaining, newest + windowMs - now, s + windowMs - now, 0, current, stale
end

local function slidingWindowAdmit(key, now, cost, _limit, windowMs, _bucketMs, current, stale)
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  redis.call('HINCRBY', key, num(current), cost)
  redis.call('PEXPIRE', key, pttl(current + windowMs - now))
end

-- Newest live bucket first: at most `buckets` steps, however large the refund.
local function slidingWindowRefund(key, now, cost, _limit, windowMs, bucketMs)
  local current = now - fmod(now, bucketMs)
  local oldest = current - windowMs + bucketMs
  local h = redis.call('HGETALL', key)
  local live, fields = {}, {}
  for i = 1, #h, 2 do
    local s = tonumber(h[i])
    local c = tonumber(h[i + 1])
    if s >= oldest and s <= current and c > 0 then
      live[s] = c
      fields[s] = h[i]
    end
  end
  local left = cost
  local s = current
  while s >= oldest and left > 0 do
    local c = live[s]
    if c then
      local take = c
      if take > left then take = left end
      redis.call('HSET', key, fields[s], num(c - take))
      left = left - take
    end
    s = s - bucketMs
  end
end

-- Prefetched units not spent (see src/prefetch.ts), counted at `at`: taken from the bucket they were counted
-- in, while it counts, and from no other (units of a later bucket leave the window later).
local function slidingWindowReturn(key, now, cost, _limit, windowMs, bucketMs, at)
  local s = at - fmod(at, bucketMs)
  if s + windowMs <= now then return end
  local field = num(s)
  local c = tonumber(redis.call('HGET', key, field))
  if not c then return end
  c = c - cost
  if c < 0 then c = 0 end
  redis.call('HSET', key, field, num(c))
end

-- One call's units, counted at `at`: taken from the bucket that holds `at`, while it is live.
local function slidingWindowRefundCall(key, now, cost, limit, windowMs, bucketMs, at)
  slidingWindowReturn(key, now, cost, limit, windowMs, bucketMs, at)
end

local function slidingWindowPenalize(key, now, cost, limit, windowMs, bucketMs)
  local current = now - fmod(now, bucketMs)
  local oldest = current - windowMs + bucketMs
  local h = redis.call('HGETALL', key)
  local stale = {}
  local total = 0
  for i = 1, #h, 2 do
    local s = tonumber(h[i])
    local c = tonumber(h[i + 1])
    if s >= oldest and s <= current and c > 0 then
      total = total + c
    elseif s < oldest then
      stale[#stale + 1] = h[i]
    end
  end
  local add = cost
  if limit + cost - total < add then add = limit + cost - total end
  if add > 0 then slidingWindowAdmit(key, now, add, limit, windowMs, bucketMs, current, stale) end
end
