-- slidingWindow (code W; params: limit, windowMs, bucketMs). A hash from bucket start to count.
-- A bucket starting at `s` counts while `now < s + windowMs`. Each call reads every field, and an admitted
-- call deletes the buckets that no longer count, so a key holds at most `buckets` + 1 fields and no call
-- loops over the time that passed.

rules.W = {
  params = 3,

  decide = function(key, a, now, cost)
    local limit, windowMs, bucketMs = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
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
    local st = { current = current, stale = stale }
    if total + cost <= limit then
      -- The newest counted bucket is this call's, or with cost 0 the newest holding anything.
      local last = newest
      if cost > 0 then last = current end
      local resetMs = 0
      if last ~= -math.huge then resetMs = last + windowMs - now end
      return st, true, limit - total - cost, resetMs, 0, 0
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
    return st, false, limit - total, newest + windowMs - now, s + windowMs - now, 0
  end,

  admit = function(key, a, now, cost, st)
    if #st.stale > 0 then redis.call('HDEL', key, unpack(st.stale)) end
    redis.call('HINCRBY', key, num(st.current), num(cost))
    redis.call('PEXPIRE', key, pttl(st.current + tonumber(ARGV[a + 2]) - now))
  end,
}
