-- fixedWindow (params: limit, windowMs). A hash { s = window start, c = count }.
-- The key lives until the end of its window.
--
-- Each rule chunk defines four functions with the same shape (and the kinds a RedisStore can prefetch for,
-- a fifth: `<kind>GiveBack(key, now, cost, params..., at)` returns prefetched units counted at `at`):
--   <kind>Decide(key, now, cost, params...) -> allowed, remaining, resetMs, retryAfterMs, waitMs, a, b
--   <kind>Admit(key, now, cost, params..., a, b)
--   <kind>Refund(key, now, cost, params...)      gives back up to `cost` units, never below empty
--   <kind>Penalize(key, now, cost, params...)    counts `cost` units whatever the rule says
-- where `a`, `b` carry what decide read to admit, so admit never reads the key again. A penalty takes a
-- rule at most `cost` past its limit, so penalties never pile up without bound.

local function fixedWindowDecide(key, now, cost, limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HMGET', key, 's', 'c')
  local same = tonumber(h[1]) == start
  local count = 0
  if same then count = tonumber(h[2]) end
  local allowed = count + cost <= limit
  local after = count
  if allowed then after = count + cost end
  local remaining = limit - after
  if remaining < 0 then remaining = 0 end
  -- Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
  local resetMs = 0
  if after > 0 then resetMs = start + windowMs - now end
  local retryAfterMs = 0
  if not allowed then retryAfterMs = resetMs end
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

-- Only the current window's count: units of a window that is over no longer count anyway.
local function fixedWindowRefund(key, now, cost, _limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HMGET', key, 's', 'c')
  if tonumber(h[1]) ~= start then return end
  local count = tonumber(h[2]) - cost
  if count < 0 then count = 0 end
  redis.call('HSET', key, 'c', num(count))
end

-- Prefetched units not spent (see src/prefetch.ts), counted at `at`: given back while their window lasts.
local function fixedWindowGiveBack(key, now, cost, limit, windowMs, at)
  if at - fmod(at, windowMs) ~= now - fmod(now, windowMs) then return end
  fixedWindowRefund(key, now, cost, limit, windowMs)
end

-- One call's units, counted at `at`: given back only while the window they were counted in lasts.
local function fixedWindowRefundCall(key, now, cost, limit, windowMs, at)
  if at - fmod(at, windowMs) ~= now - fmod(now, windowMs) then return end
  fixedWindowRefund(key, now, cost, limit, windowMs)
end

local function fixedWindowPenalize(key, now, cost, limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HMGET', key, 's', 'c')
  local same = tonumber(h[1]) == start
  local count = 0
  if same then count = tonumber(h[2]) end
  local after = count + cost
  if after > limit + cost then after = limit + cost end
  if after < count then after = count end
  redis.call('HSET', key, 's', num(start), 'c', num(after))
  if not same then redis.call('PEXPIRE', key, pttl(start + windowMs - now)) end
end
