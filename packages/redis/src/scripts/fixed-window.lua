-- fixedWindow (params: limit, windowMs). A hash { s = window start, c = count }.
-- The key lives until the end of its window.
--
-- Each rule chunk defines two functions with the same shape:
--   <kind>Decide(key, now, cost, params...) -> allowed, remaining, resetMs, retryAfterMs, waitMs, a, b
--   <kind>Admit(key, now, cost, params..., a, b)
-- where `a`, `b` carry what decide read to admit, so admit never reads the key again.

local function fixedWindowDecide(key, now, cost, limit, windowMs)
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
  -- A count past a lowered limit (state identity keeps counts) leaves nothing, not less.
  local remaining = 0
  if after < limit then remaining = limit - after end
  return allowed, remaining, resetMs, retryAfterMs, 0, start, same
end

local function fixedWindowAdmit(key, now, cost, limit, windowMs, start, same)
  if same then
    redis.call('HINCRBY', key, 'c', cost)
  else
    redis.call('HSET', key, 's', start, 'c', cost)
    redis.call('PEXPIRE', key, pttl(start + windowMs - now))
  end
end
