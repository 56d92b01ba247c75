-- fixedWindow (code F; params: limit, windowMs). A hash { s = window start, c = count }.
-- The key lives until the end of its window.

rules.F = {
  params = 2,

  decide = function(key, a, now, cost)
    local limit, windowMs = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local start = now - fmod(now, windowMs)
    local h = redis.call('HMGET', key, 's', 'c')
    local same = tonumber(h[1]) == start
    local count = 0
    if same then count = tonumber(h[2]) end
    local allowed = count + cost <= limit
    local after = count
    if allowed then after = count + cost end
    -- Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
    local resetMs = 0
    if after > 0 then resetMs = start + windowMs - now end
    local retryAfterMs = 0
    if not allowed then retryAfterMs = resetMs end
    return { start = start, same = same }, allowed, limit - after, resetMs, retryAfterMs, 0
  end,

  admit = function(key, a, now, cost, st)
    if st.same then
      redis.call('HINCRBY', key, 'c', num(cost))
    else
      redis.call('HSET', key, 's', num(st.start), 'c', num(cost))
      redis.call('PEXPIRE', key, pttl(st.start + tonumber(ARGV[a + 2]) - now))
    end
  end,
}
