-- warmUp (params: stableMs, thresholdPermits, maxPermits, slope, coolDownMs, maxQueueMs, limit). A hash
-- { n = the next call's slot, s = stored permits, x = cold again }, floats (stored with 17 significant digits). A
-- missing key is a meter never seen: next = now, stored = maxPermits (it starts cold). The derived figures
-- come from the rule as the factory computed them, so both stores start from the same doubles, and every
-- formula performs the same operations in the same order as @sluice/core's rules/warm-up.ts. The key
-- lives until the meter is cold again (`x`, under the numbers it was written with); from `x` on it reads as
-- a missing key whatever the numbers are now, as @sluice/core's memory store reads it (state is keyed by
-- identity, not numbers, so an edited rule may judge it).

local function warmTimeFor(stableMs, slope, p)
  return stableMs + p * slope
end

-- ms that taking `take` of `stored` permits costs.
local function warmWaitFor(stableMs, threshold, slope, stored, take)
  local above = stored - threshold
  local w = 0
  if above > 0 then
    local t = above
    if take < t then t = take end
    w = (t * (warmTimeFor(stableMs, slope, above) + warmTimeFor(stableMs, slope, above - t))) / 2
    take = take - t
  end
  return w + stableMs * take
end

-- Units of cost 1 that could still be admitted at the stable rate, the next slot `ahead` ms away: the n
-- with `ahead + (n − 1) × stableMs <= maxQueueMs`, at most `limit`, the estimate settled by that comparison.
local function warmRemaining(stableMs, maxQueueMs, limit, ahead)
  if ahead <= 0 then return limit end
  local n = floor((maxQueueMs - ahead) / stableMs) + 1
  if n < 0 then n = 0 end
  local i = 0
  while i < fixupSteps and n > 0 and ahead + (n - 1) * stableMs > maxQueueMs do
    n = n - 1
    i = i + 1
  end
  i = 0
  while i < fixupSteps and n < limit and ahead + n * stableMs <= maxQueueMs do
    n = n + 1
    i = i + 1
  end
  if n > limit then return limit end
  return n
end

local function warmResetIn(ahead)
  if ahead > 0 then return ceil(ahead) end
  return 0
end

-- The state at `now`, idle time turned into stored permits.
local function warmRead(key, now, maxPermits, coolDownMs)
  local h = redis.call('HMGET', key, 'n', 's', 'x')
  local next, stored = now, maxPermits
  if h[1] and not (h[3] and now >= tonumber(h[3])) then
    next = tonumber(h[1])
    stored = tonumber(h[2])
  end
  if now > next then
    local more = stored + (now - next) / coolDownMs
    if more < maxPermits then stored = more else stored = maxPermits end
    next = now
  end
  return next, stored
end

local function warmWrite(key, now, maxPermits, coolDownMs, next, stored)
  local expiresAt = ceil(next + (maxPermits - stored + 1) * coolDownMs) + 1
  redis.call('HSET', key, 'n', num(next), 's', num(stored), 'x', num(expiresAt))
  redis.call('PEXPIRE', key, pttl(expiresAt - now))
end

local function warmUpDecide(key, now, cost, stableMs, threshold, maxPermits, slope, coolDownMs, maxQueueMs, limit)
  local slot, stored = warmRead(key, now, maxPermits, coolDownMs)
  if cost == 0 then
    return true, warmRemaining(stableMs, maxQueueMs, limit, slot - now), warmResetIn(slot - now), 0, 0, slot, stored
  end
  if slot - now > maxQueueMs then
    return false,
      warmRemaining(stableMs, maxQueueMs, limit, slot - now),
      warmResetIn(slot - now),
      ceil(slot - maxQueueMs - now),
      0,
      slot,
      stored
  end
  local spend = cost
  if stored < spend then spend = stored end
  local after = slot + warmWaitFor(stableMs, threshold, slope, stored, spend) + (cost - spend) * stableMs
  return true,
    warmRemaining(stableMs, maxQueueMs, limit, after - now),
    warmResetIn(after - now),
    0,
    ceil(slot - now),
    slot,
    stored
end

local function warmUpAdmit(key, now, cost, stableMs, threshold, maxPermits, slope, coolDownMs, _maxQueueMs, _limit, slot, stored)
  local spend = cost
  if stored < spend then spend = stored end
  local next = slot + warmWaitFor(stableMs, threshold, slope, stored, spend) + (cost - spend) * stableMs
  warmWrite(key, now, maxPermits, coolDownMs, next, stored - spend)
end

-- The next slot goes back by `cost` stable intervals, not before now; stored permits stay spent.
-- A missing key, or one past `x`, is a cold, idle meter: nothing to give back.
local function warmUpRefund(key, now, cost, stableMs, _threshold, maxPermits, _slope, coolDownMs, _maxQueueMs, _limit)
  local h = redis.call('HMGET', key, 'n', 's', 'x')
  if not h[1] or (h[3] and now >= tonumber(h[3])) then return end
  local n = tonumber(h[1])
  if n <= now then return end
  local back = n - cost * stableMs
  if back < now then back = now end
  warmWrite(key, now, maxPermits, coolDownMs, back, tonumber(h[2]))
end

-- One call's delay, the whole ms it moved the next slot to (`at + resetMs`): while that is ahead, the next
-- slot goes back by `cost` stable intervals (not before now). Once it has come, the delay is spent.
local function warmUpRefundCall(key, now, cost, stableMs, threshold, maxPermits, slope, coolDownMs, maxQueueMs, limit, next)
  if next > now then
    warmUpRefund(key, now, cost, stableMs, threshold, maxPermits, slope, coolDownMs, maxQueueMs, limit)
  end
end

-- The next slot moves on by `cost` stable intervals, spending no stored permit, at most `cost` intervals
-- past a full queue.
local function warmUpPenalize(key, now, cost, stableMs, _threshold, maxPermits, _slope, coolDownMs, maxQueueMs, _limit)
  local next, stored = warmRead(key, now, maxPermits, coolDownMs)
  local moved = next + cost * stableMs
  local cap = now + maxQueueMs + cost * stableMs
  if cap < moved then moved = cap end
  if moved > next then next = moved end
  warmWrite(key, now, maxPermits, coolDownMs, next, stored)
end
