-- concurrency (params: limit, leaseMs). A sorted set of lease ids scored by when each ends. An id is
-- "<id>:<cost>" (made by core in TypeScript: a random part drawn once per process, then the lease's
-- number, so ids never collide across processes), so the units a lease takes are read from its id. A lease admitted at `t` is live while `now < t + leaseMs`.
-- Each call removes at most `concurrencyMaxDrop` ended leases (the rest go on later calls, or with the
-- key) and reads the live leases, at most `limit` of them (the factory bounds it). The key lives until
-- its newest lease ends.

local concurrencyMaxDrop = 64

local function leaseUnits(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

local function concurrencyDecide(key, now, cost, limit, leaseMs)
  local ended = redis.call('ZCOUNT', key, '-inf', num(now))
  if ended > 0 then
    local drop = ended
    if drop > concurrencyMaxDrop then drop = concurrencyMaxDrop end
    redis.call('ZREMRANGEBYRANK', key, 0, drop - 1)
  end
  local live = redis.call('ZRANGEBYSCORE', key, '(' .. num(now), '+inf', 'WITHSCORES')
  local leased = 0
  for i = 1, #live, 2 do leased = leased + leaseUnits(live[i]) end
  if leased + cost <= limit then
    -- The newest lease is this call's, or with cost 0 the newest live one.
    local resetMs = leaseMs
    if cost == 0 then
      resetMs = 0
      if #live > 0 then resetMs = tonumber(live[#live]) - now end
    end
    return true, limit - leased - cost, resetMs, 0, 0
  end
  -- Denied: the call fits once enough of the oldest leases have ended (a release can come sooner).
  local freed, retryAt = 0, now
  for i = 1, #live, 2 do
    freed = freed + leaseUnits(live[i])
    retryAt = tonumber(live[i + 1])
    if leased - freed + cost <= limit then break end
  end
  local remaining = limit - leased
  if remaining < 0 then remaining = 0 end
  return false, remaining, tonumber(live[#live]) - now, retryAt - now, 0
end

local function concurrencyAdmit(key, now, _cost, _limit, leaseMs, _a, _b, lease)
  redis.call('ZADD', key, now + leaseMs, lease)
  redis.call('PEXPIRE', key, pttl(leaseMs))
end

-- A refund does not apply: a lease's units come back by release, not by refund.
local function concurrencyRefund() end

local function concurrencyRefundCall() end

-- A penalty takes no lease: there is no work to release.
local function concurrencyPenalize() end

-- Ends `lease` before its time: one ZREM, reading no clock, as the memory store's release does. Idempotent:
-- an unknown or released lease changes nothing, and ids are never reused, so no release frees a slot another
-- lease has. A lease that has already ended belongs to nobody: removing it gives back only what the next
-- consume would drop anyway.
local function concurrencyRelease(key, lease)
  redis.call('ZREM', key, lease)
end
