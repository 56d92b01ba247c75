-- tokenBucket (params: capacity, refillPerSecond). A hash { m = level, l = last refill, x = full again }:
-- the level is kept in thousandths of a token, so one ms of refill adds exactly `refillPerSecond` (whole
-- tokens as floats drift: 1.03 - 1 is 0.030000000000000027). A missing key is a full bucket. The key lives
-- until the bucket is full again (`x`, under the numbers it was written with); from `x` on it reads as a
-- full bucket whatever the numbers are now, as @sluice/core's memory store reads it (state is keyed by
-- identity, not numbers, so an edited rule may judge it).

-- Thousandths at `t` for a bucket that held `milli0` at `t0`: continuous refill, capped at capacity.
local function milliAt(capacity, refill, milli0, t0, t)
  local elapsed = 0
  if t > t0 then elapsed = t - t0 end
  local milli = milli0 + elapsed * refill
  local full = capacity * 1000
  if milli < full then return milli end
  return full
end

-- Whole ms from `now` until the bucket holds `target` thousandths: the least such ms under the same
-- arithmetic that will judge the retry, so it is neither early nor late.
local function msUntil(capacity, refill, milli0, t0, target, now)
  local have = milliAt(capacity, refill, milli0, t0, now)
  if have >= target then return 0 end
  local ms = ceil((target - have) / refill)
  -- At a rate that is not exact in binary (0.1) the estimate can be a rounding off either way. The factory
  -- keeps every wait within 2^50 ms, where it is off by at most one ms; the loops are capped all the same.
  local i = 0
  while i < fixupSteps and ms > 1 and milliAt(capacity, refill, milli0, t0, now + ms - 1) >= target do
    ms = ms - 1
    i = i + 1
  end
  i = 0
  while i < fixupSteps and milliAt(capacity, refill, milli0, t0, now + ms) < target do
    ms = ms + 1
    i = i + 1
  end
  return ms
end

local function tokenBucketDecide(key, now, cost, capacity, refill)
  local full = capacity * 1000
  local h = redis.call('HMGET', key, 'm', 'l', 'x')
  local milli0, last = full, now
  if h[1] and not (h[3] and now >= tonumber(h[3])) then
    milli0 = tonumber(h[1])
    last = tonumber(h[2])
  end
  local milli = milliAt(capacity, refill, milli0, last, now)
  if milli >= cost * 1000 then
    local after = milli - cost * 1000
    local resetMs = msUntil(capacity, refill, after, math.max(now, last), full, now)
    return true, floor(after / 1000), resetMs, 0, 0, milli0, last
  end
  local resetMs = msUntil(capacity, refill, milli0, last, full, now)
  local retryAfterMs = msUntil(capacity, refill, milli0, last, cost * 1000, now)
  -- A penalized bucket can be below zero; nothing left is 0.
  local remaining = floor(milli / 1000)
  if remaining < 0 then remaining = 0 end
  return false, remaining, resetMs, retryAfterMs, 0, milli0, last
end

local function tokenBucketAdmit(key, now, cost, capacity, refill, milli0, last)
  local milli = milliAt(capacity, refill, milli0, last, now) - cost * 1000
  if now > last then last = now end
  local expiresAt = last + msUntil(capacity, refill, milli, last, capacity * 1000, last)
  redis.call('HSET', key, 'm', num(milli), 'l', num(last), 'x', num(expiresAt))
  redis.call('PEXPIRE', key, pttl(expiresAt - now))
end

-- Writes the level `milli` brought up to `now`, when the bucket is full again (`x`) and the TTL until then.
local function tokenBucketWrite(key, now, capacity, refill, milli, last)
  if now > last then last = now end
  local expiresAt = last + msUntil(capacity, refill, milli, last, capacity * 1000, last)
  redis.call('HSET', key, 'm', num(milli), 'l', num(last), 'x', num(expiresAt))
  redis.call('PEXPIRE', key, pttl(expiresAt - now))
end

local function tokenBucketRefund(key, now, cost, capacity, refill)
  local h = redis.call('HMGET', key, 'm', 'l', 'x')
  -- A missing key, or one past `x`, is a full bucket: nothing to give back.
  if not h[1] or (h[3] and now >= tonumber(h[3])) then return end
  local last = tonumber(h[2])
  local milli = milliAt(capacity, refill, tonumber(h[1]), last, now) + cost * 1000
  if milli > capacity * 1000 then milli = capacity * 1000 end
  tokenBucketWrite(key, now, capacity, refill, milli, last)
end

-- Prefetched tokens not spent (see src/prefetch.ts) go back into the bucket, as a refund.
local function tokenBucketReturn(key, now, cost, capacity, refill, _at)
  tokenBucketRefund(key, now, cost, capacity, refill)
end

-- One call's tokens, taken at `at`: given back only while the bucket was last written in that ms (see
-- @sluice/core's tokenBucketAlgorithm.refundCall: after a later write, the refill between may have reached
-- capacity unseen, so exact counting may allow nothing back).
local function tokenBucketRefundCall(key, now, cost, capacity, refill, at)
  local h = redis.call('HMGET', key, 'm', 'l', 'x')
  if not h[1] or (h[3] and now >= tonumber(h[3])) or tonumber(h[2]) ~= at then return end
  tokenBucketRefund(key, now, cost, capacity, refill)
end

local function tokenBucketPenalize(key, now, cost, capacity, refill)
  local h = redis.call('HMGET', key, 'm', 'l', 'x')
  local milli0, last = capacity * 1000, now
  if h[1] and not (h[3] and now >= tonumber(h[3])) then
    milli0 = tonumber(h[1])
    last = tonumber(h[2])
  end
  local milli = milliAt(capacity, refill, milli0, last, now)
  -- Below zero by at most the penalty; a bucket already lower than that stays where it is.
  local low = milli - cost * 1000
  if low < -cost * 1000 then low = -cost * 1000 end
  if low < milli then milli = low end
  tokenBucketWrite(key, now, capacity, refill, milli, last)
end
