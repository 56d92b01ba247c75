-- fixedWindow (params: limit, windowMs). A hash with one field, named by the window's start, holding its
-- count: a consume is then one HINCRBY. The key lives until the end of its window; a field of an earlier
-- window (a key that outlived its window by a caller's clock's slack) goes when the new window's first units
-- are counted. A key of the earlier shape `{ s = window start, c = count }` is read as it was: its count
-- stands for its window, and moves to the new shape with the window's first units counted after it.
--
-- Each rule chunk defines four functions with the same shape (and the kinds a RedisStore can prefetch for,
-- a fifth: `<kind>Return(key, now, cost, params..., at)` returns prefetched units counted at `at`; a kind
-- may define `<kind>Consume(key, now, cost, params...)`, decide and admit in one for a single rule's consume
-- of a cost above 0, answering as decide does):
--   <kind>Decide(key, now, cost, params...) -> allowed, remaining, resetMs, retryAfterMs, waitMs, a, b
--   <kind>Admit(key, now, cost, params..., a, b)
--   <kind>Refund(key, now, cost, params...)      gives back up to `cost` units, never below empty
--   <kind>Penalize(key, now, cost, params...)    counts `cost` units whatever the rule says
-- where `a`, `b` carry what decide read to admit, so admit never reads the key again. A penalty takes a
-- rule at most `cost` past its limit, so penalties never pile up without bound.

-- What the earlier shape `{ s, c }` counts in window `start` (0 when the key is not of it, or another window).
local function fixedWindowEarlier(key, start)
  local o = redis.call('HMGET', key, 's', 'c')
  if tonumber(o[1]) == start then return tonumber(o[2]) end
  return 0
end

local function fixedWindowDecide(key, now, cost, limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HGET', key, start)
  local count = tonumber(h) or 0
  -- The window's first call: the key may still be of the earlier shape.
  if not h then count = fixedWindowEarlier(key, start) end
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
  return allowed, remaining, resetMs, retryAfterMs, 0, start, h
end

-- The window's first units have just been counted in field `start`: earlier windows' fields go (the earlier
-- shape's count of this window joins the field), and the key lives until the window ends. Returns the
-- field's count.
local function fixedWindowBegin(key, now, windowMs, start)
  local count
  if redis.call('HLEN', key) > 1 then
    count = tonumber(redis.call('HGET', key, start)) + fixedWindowEarlier(key, start)
    redis.call('DEL', key)
    redis.call('HSET', key, start, count)
  end
  redis.call('PEXPIRE', key, pttl(start + windowMs - now))
  return count
end

local function fixedWindowAdmit(key, now, cost, _limit, windowMs, start, h)
  redis.call('HINCRBY', key, start, cost)
  if not h then fixedWindowBegin(key, now, windowMs, start) end
end

-- Counts first, and takes the units back when they do not fit: one command for an admitted call.
local function fixedWindowConsume(key, now, cost, limit, windowMs)
  local start = now - fmod(now, windowMs)
  local after = redis.call('HINCRBY', key, start, cost)
  if after == cost then after = fixedWindowBegin(key, now, windowMs, start) or after end
  local count = after - cost
  if after <= limit then return true, limit - after, start + windowMs - now, 0, 0 end
  -- A field made by this call goes again (and with it a key that held nothing else).
  if count == 0 then
    redis.call('HDEL', key, start)
  else
    redis.call('HINCRBY', key, start, -cost)
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  local resetMs = 0
  if count > 0 then resetMs = start + windowMs - now end
  return false, remaining, resetMs, resetMs, 0
end

-- Only the current window's count: units of a window that is over no longer count anyway.
local function fixedWindowRefund(key, now, cost, _limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HGET', key, start)
  if not h then return end
  local count = tonumber(h) - cost
  if count < 0 then count = 0 end
  redis.call('HSET', key, start, num(count))
end

-- Prefetched units not spent (see src/prefetch.ts), counted at `at`: returned while their window lasts.
local function fixedWindowReturn(key, now, cost, limit, windowMs, at)
  if at - fmod(at, windowMs) ~= now - fmod(now, windowMs) then return end
  fixedWindowRefund(key, now, cost, limit, windowMs)
end

-- One call's units, counted at `at`: given back as prefetched units are, while their window lasts.
local function fixedWindowRefundCall(key, now, cost, limit, windowMs, at)
  fixedWindowReturn(key, now, cost, limit, windowMs, at)
end

local function fixedWindowPenalize(key, now, cost, limit, windowMs)
  local start = now - fmod(now, windowMs)
  local h = redis.call('HGET', key, start)
  local count = tonumber(h) or 0
  if not h then count = fixedWindowEarlier(key, start) end
  local after = count + cost
  if after > limit + cost then after = limit + cost end
  if after < count then after = count end
  redis.call('HSET', key, start, num(after))
  if not h then
    -- The earlier shape's count is in `after` already.
    redis.call('HDEL', key, 's', 'c')
    fixedWindowBegin(key, now, windowMs, start)
  end
end
