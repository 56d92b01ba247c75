-- slidingLog (params: limit, windowMs). A sorted set with one member per admitted call, whatever its cost,
-- scored by the call's time. A member is "<seq>:<end>:<cost>": `seq` is one past the newest member's while
-- the log holds a live entry, else 0, written in 16 digits, so members of one score sort in the order they
-- came, and a consume finds it without reading a score (it restarts whenever the window empties; at one
-- call a µs it would take three centuries to outgrow 16 digits); `end` is the running sum of units admitted
-- on the key through this call, modulo 2^52. The units of any run of entries are then the difference of two
-- ends, so the live total and the entry a denied call waits for (a binary search over ranks: the sums grow
-- along the set) cost O(log n) commands, never a walk over the members. A window holds at most 2^50 units
-- (the factory's bound), far below the modulus, so a difference is never ambiguous.
--
-- Work per call is bounded: a few O(log n) commands, at most 52 probes for a denial, and at most
-- `logMaxDrop` expired members removed. An admitted call adds one member and removes up to 64, so expired
-- members never pile up; all of them go with the key, which lives until its newest entry stops counting.
-- A key holding members of another shape (one member per unit, `<time>:<n>`, as sluice 0.1 wrote them) is
-- dropped at its first use: its entries cannot be read as calls, and the window they count soon passes.

local logModulus = 4503599627370496 -- 2^52
local logMaxDrop = 64

-- The running sum (nil for a member of another shape) and the time of the entry at `rank`.
local function logEntry(key, rank)
  local e = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return tonumber(string.match(e[1], '^%d+:(%d+):%d+$')), tonumber(e[2])
end

-- How many members the log holds: read only where a call needs ranks beyond the oldest live entry.
local function logSize(key)
  return redis.call('ZCARD', key)
end

-- Units from the entry whose sum before it is `before` through the entry whose sum is `finish`.
local function unitsSince(before, finish)
  local d = finish - before
  if d < 0 then d = d + logModulus end
  return d
end

-- Reads the live part of the log at `now`, removing up to `logMaxDrop` expired members: the live units, the
-- newest entry's running sum and time, the `seq` an entry logged at `now` takes (one past the newest's while
-- that is live: members of one ms sort by it), the expired members left (the rank of the oldest live
-- member), and the sum before the oldest live member.
local function slidingLogLive(key, now, windowMs)
  local expired = redis.call('ZCOUNT', key, '-inf', now - windowMs)
  if expired > 0 then
    local drop = expired
    if drop > logMaxDrop then drop = logMaxDrop end
    redis.call('ZREMRANGEBYRANK', key, 0, drop - 1)
    expired = expired - drop
  end
  local total, newestEnd, newestAt, seq, before = 0, 0, 0, 0, 0
  local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #e > 0 then
    local newestSeq, finish = string.match(e[1], '^(%d+):(%d+):%d+$')
    newestEnd, newestAt = tonumber(finish), tonumber(e[2])
    -- Live entries are those from rank `expired` on; there are some when the newest is live.
    local live = newestAt > now - windowMs
    local firstEnd, firstCost = '0', '0'
    if live then
      firstEnd, firstCost = string.match(redis.call('ZRANGE', key, expired, expired)[1], '^%d+:(%d+):(%d+)$')
    end
    if newestEnd == nil or firstEnd == nil then
      redis.call('DEL', key)
      newestEnd, newestAt, expired = 0, 0, 0
    else
      if live then
        seq = tonumber(newestSeq) + 1
        before = tonumber(firstEnd) - tonumber(firstCost)
        if before < 0 then before = before + logModulus end
        total = unitsSince(before, newestEnd)
      end
    end
  end
  return total, newestEnd, newestAt, seq, expired, before
end

local function slidingLogDecide(key, now, cost, limit, windowMs)
  local total, newestEnd, newestAt, seq, expired, before = slidingLogLive(key, now, windowMs)
  if total + cost <= limit then
    -- The newest entry is this call's, or with cost 0 the newest already logged.
    local resetMs = windowMs
    if cost == 0 then
      resetMs = 0
      if total > 0 then resetMs = newestAt + windowMs - now end
    end
    return true, limit - total - cost, resetMs, 0, 0, newestEnd, seq
  end
  -- Denied: the call fits once the oldest `mustExpire` units have expired, that is once the first entry
  -- whose running sum reaches them has.
  local mustExpire = total + cost - limit
  local lo, hi = expired, logSize(key) - 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    local midEnd = logEntry(key, mid)
    -- A member of another shape amid the log (written by an older sluice during an upgrade) ends the search.
    if midEnd == nil or unitsSince(before, midEnd) >= mustExpire then
      hi = mid
    else
      lo = mid + 1
    end
  end
  local _, oldestAt = logEntry(key, lo)
  local remaining = limit - total
  if remaining < 0 then remaining = 0 end
  return false, remaining, newestAt + windowMs - now, oldestAt + windowMs - now, 0
end

local function slidingLogAdmit(key, now, cost, _limit, windowMs, newestEnd, seq)
  local finish = newestEnd + cost
  if finish >= logModulus then finish = finish - logModulus end
  redis.call('ZADD', key, now, string.format('%016d:%d:%d', seq, finish, cost))
  redis.call('PEXPIRE', key, pttl(windowMs))
end

-- Drops the newest `cost` live units: the newest entry whose running sum passes the units that stay is cut
-- down to them (rewritten with its new sum and cost), every newer one removed, found by binary search.
local function slidingLogRefund(key, now, cost, _limit, windowMs)
  local total, _, _, _, expired, before = slidingLogLive(key, now, windowMs)
  if total == 0 then return end
  local n = logSize(key)
  local keep = total - cost
  if keep < 0 then keep = 0 end
  local lo, hi = expired, n - 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    local midEnd = logEntry(key, mid)
    if midEnd == nil or unitsSince(before, midEnd) > keep then
      hi = mid
    else
      lo = mid + 1
    end
  end
  if lo < n - 1 then redis.call('ZREMRANGEBYRANK', key, lo + 1, n - 1) end
  local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  local seq, finish, units = string.match(e[1], '^(%d+):(%d+):(%d+)$')
  if seq == nil then
    redis.call('DEL', key)
    return
  end
  local over = unitsSince(before, tonumber(finish)) - keep
  redis.call('ZREM', key, e[1])
  local left = tonumber(units) - over
  if left > 0 then
    local newEnd = tonumber(finish) - over
    if newEnd < 0 then newEnd = newEnd + logModulus end
    redis.call('ZADD', key, e[2], seq .. ':' .. num(newEnd) .. ':' .. num(left))
  end
end

-- Prefetched units not spent (see src/prefetch.ts), counted at `at`: taken from the newest entry when it was
-- logged at `at`. An entry logged after them (another call's) would have to move back in time to make
-- room; then nothing is given back and the units count until they leave the window.
local function slidingLogReturn(key, now, cost, _limit, windowMs, at)
  if at + windowMs <= now then return end
  local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #e == 0 or tonumber(e[2]) ~= at then return end
  local seq, finish, units = string.match(e[1], '^(%d+):(%d+):(%d+)$')
  if seq == nil then return end
  local take = tonumber(units)
  if take > cost then take = cost end
  redis.call('ZREM', key, e[1])
  if take < tonumber(units) then
    local newEnd = tonumber(finish) - take
    if newEnd < 0 then newEnd = newEnd + logModulus end
    redis.call('ZADD', key, e[2], seq .. ':' .. num(newEnd) .. ':' .. num(tonumber(units) - take))
  end
end

-- One call's units, logged at `at`: given back only while the entries of `at` are live and the newest (as
-- the memory store keeps one entry per ms, and can rewrite only the newest: older units sit under the running
-- sums of every newer entry, so they stay counted until they leave the window).
local function slidingLogRefundCall(key, now, cost, limit, windowMs, at)
  if at + windowMs <= now then return end
  local total, newestEnd, newestAt = slidingLogLive(key, now, windowMs)
  if total == 0 or newestAt ~= at then return end
  local n = logSize(key)
  -- The members logged at `at` are the newest `count`; the units they hold end at `newestEnd`.
  local count = redis.call('ZCOUNT', key, at, at)
  local firstEnd, firstCost = string.match(redis.call('ZRANGE', key, n - count, n - count)[1], '^%d+:(%d+):(%d+)$')
  if firstEnd == nil then return end
  local before = tonumber(firstEnd) - tonumber(firstCost)
  if before < 0 then before = before + logModulus end
  local units = unitsSince(before, newestEnd)
  if units > total then units = total end
  if cost > units then cost = units end
  slidingLogRefund(key, now, cost, limit, windowMs)
end

local function slidingLogPenalize(key, now, cost, limit, windowMs)
  local total, newestEnd, _, seq = slidingLogLive(key, now, windowMs)
  local add = cost
  if limit + cost - total < add then add = limit + cost - total end
  if add > 0 then slidingLogAdmit(key, now, add, limit, windowMs, newestEnd, seq) end
end
