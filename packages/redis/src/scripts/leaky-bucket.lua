-- leakyBucket (params: ratePerSecond, maxQueueMs, limit). A hash { s = start, u = units, x = until }: `start`
-- is the whole ms at which a call last found the bucket drained, `units` the cost queued behind that call,
-- so the last admitted unit passes at `start + units * 1000 / rate`, computed afresh and never summed up
-- as a float. A missing key has never let anything through. Slots are reserved inside this script, so
-- every process shares one queue. The key lives until the bucket has drained for a full queue (`x`, under
-- the numbers it was written with); from `x` on it reads as a missing key whatever the numbers are now,
-- as @sluice/core's memory store reads it (state is keyed by identity, so an edited rule may judge it).

-- ms that `units` units take to pass.
local function spanOf(rate, units)
  return (units * 1000) / rate
end

-- The most units whose intervals fit in `ms`: the largest n >= 0 with `n * 1000 / rate <= ms`.
local function unitsWithin(rate, ms)
  local n = floor((ms * rate) / 1000)
  if n < 0 then n = 0 end
  -- The estimate can be a rounding off; settle it with the comparison decide makes. Within 2^50 units it
  -- is off by at most one; the loops are capped all the same (a state left by a faster rule can hold more).
  local i = 0
  while i < fixupSteps and ((n + 1) * 1000) / rate <= ms do
    n = n + 1
    i = i + 1
  end
  i = 0
  while i < fixupSteps and n > 0 and (n * 1000) / rate > ms do
    n = n - 1
    i = i + 1
  end
  return n
end

-- Units of cost 1 that could still be admitted at `now`, one after another, behind the queue.
local function remainingAt(rate, maxQueueMs, limit, start, units, now)
  local elapsed = now - start
  if spanOf(rate, units + 1) <= elapsed then return limit end
  local more = unitsWithin(rate, maxQueueMs + elapsed) - units
  if more < 0 then return 0 end
  if more < limit then return more end
  return limit
end

-- Whole ms from `now` until the bucket is drained: a call of cost 1 would pass at once.
local function drainedIn(rate, start, units, now)
  local ms = ceil(spanOf(rate, units + 1)) - (now - start)
  if ms > 0 then return ms end
  return 0
end

local function leakyBucketDecide(key, now, cost, rate, maxQueueMs, limit)
  local h = redis.call('HMGET', key, 's', 'u', 'x')
  local start, units = -math.huge, 0
  if h[1] and not (h[3] and now >= tonumber(h[3])) then
    start = tonumber(h[1])
    units = tonumber(h[2])
  end
  if cost == 0 then
    return true, remainingAt(rate, maxQueueMs, limit, start, units, now), drainedIn(rate, start, units, now), 0, 0, start, units
  end
  -- How far ahead of now the call's slot is (rounded up), before taking the max with now.
  local ahead = ceil(spanOf(rate, units + cost)) - (now - start)
  if ahead > maxQueueMs then
    return false,
      remainingAt(rate, maxQueueMs, limit, start, units, now),
      drainedIn(rate, start, units, now),
      ahead - maxQueueMs,
      0,
      start,
      units
  end
  if ahead <= 0 then
    return true, remainingAt(rate, maxQueueMs, limit, now, 0, now), drainedIn(rate, now, 0, now), 0, 0, start, units
  end
  return true,
    remainingAt(rate, maxQueueMs, limit, start, units + cost, now),
    drainedIn(rate, start, units + cost, now),
    0,
    ahead,
    start,
    units
end

-- Writes the queue, when it has drained for a full queue (`x`) and the TTL until then.
local function leakyBucketWrite(key, now, rate, limit, start, units)
  local expiresAt = start + ceil(spanOf(rate, units + limit))
  redis.call('HSET', key, 's', num(start), 'u', num(units), 'x', num(expiresAt))
  redis.call('PEXPIRE', key, pttl(expiresAt - now))
end

local function leakyBucketAdmit(key, now, cost, rate, _maxQueueMs, limit, start, units)
  if ceil(spanOf(rate, units + cost)) > now - start then
    units = units + cost
  else
    start = now
    units = 0
  end
  leakyBucketWrite(key, now, rate, limit, start, units)
  -- Where this call left the queue, for giving its slot back (leakyBucketUnqueue).
  return num(start) .. ':' .. num(units)
end

-- `last` goes back by `cost` intervals, but not before now: a slot in the past would let a burst through.
local function leakyBucketRefund(key, now, cost, rate, _maxQueueMs, limit)
  local h = redis.call('HMGET', key, 's', 'u', 'x')
  -- A missing key, or one past `x`, has nothing queued: nothing to give back.
  if not h[1] or (h[3] and now >= tonumber(h[3])) then return end
  local start, units = tonumber(h[1]), tonumber(h[2])
  local elapsed = now - start
  if units >= cost and spanOf(rate, units - cost) >= elapsed then
    units = units - cost
  elseif spanOf(rate, units) > elapsed then
    start = now
    units = 0
  else
    return
  end
  leakyBucketWrite(key, now, rate, limit, start, units)
end

-- One call's slot, the whole ms it comes round (`at + waitMs`): while it is ahead, every later call queued
-- right behind it, so `last` goes back by its `cost` intervals (not before now). Once it has come, nothing.
local function leakyBucketRefundCall(key, now, cost, rate, maxQueueMs, limit, slot)
  if slot > now then leakyBucketRefund(key, now, cost, rate, maxQueueMs, limit) end
end

-- `last` goes forward by `cost` intervals (from now, when it has passed), but at most `cost` intervals
-- past a full queue, so penalties cannot push the queue beyond the range where waits are exact.
local function leakyBucketPenalize(key, now, cost, rate, maxQueueMs, limit)
  local h = redis.call('HMGET', key, 's', 'u', 'x')
  local start0, units0 = -math.huge, 0
  if h[1] and not (h[3] and now >= tonumber(h[3])) then
    start0 = tonumber(h[1])
    units0 = tonumber(h[2])
  end
  local start, units = start0, units0
  if spanOf(rate, units) >= now - start then
    units = units + cost
  else
    start = now
    units = cost
  end
  local capStart = now + maxQueueMs
  if start + spanOf(rate, units) > capStart + spanOf(rate, cost) then
    if start0 + spanOf(rate, units0) >= capStart + spanOf(rate, cost) then return end
    start = capStart
    units = cost
  end
  leakyBucketWrite(key, now, rate, limit, start, units)
end

-- Gives a queued call's slot back, only when the queue still stands exactly where that call left it
-- (`mark`): nobody queued behind it, so no one else's slot moves.
local function leakyBucketUnqueue(key, now, cost, rate, maxQueueMs, limit, mark)
  local h = redis.call('HMGET', key, 's', 'u')
  if not h[1] or h[1] .. ':' .. h[2] ~= mark then return end
  leakyBucketRefund(key, now, cost, rate, maxQueueMs, limit)
end
