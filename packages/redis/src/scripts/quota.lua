-- quota (params: limit, start, finish): a count per calendar period [start, finish) in the rule's time zone.
-- The client computes the period with @sluice/core's quotaPeriod, from its estimate of this script's clock,
-- and sends it (src/wire.ts, writePeriods); the foot first asks quotaOutside, and a call whose `now` lies
-- outside a period it carries changes nothing and answers { 'period', now, serverNow }, from which the
-- client computes the period again and calls once more (src/calls.ts). A hash with one field, named by the
-- period's start, holding its count: a consume is then one HINCRBY. The key lives until the period ends; a
-- field of an earlier period (a key that outlived its period by a caller's clock's slack) goes when the new
-- period's first units are counted. A quota never waits: the reply's waitMs place carries the period's count
-- before the call, the decision's `used` (src/wire.ts, decode).

local function quotaOutside(now, _limit, start, finish)
  return now < start or now >= finish
end

local function quotaDecide(key, now, cost, limit, start, finish)
  local count = tonumber(redis.call('HGET', key, start)) or 0
  local allowed = count + cost <= limit
  local after = count
  if allowed then after = count + cost end
  local remaining = limit - after
  if remaining < 0 then remaining = 0 end
  -- Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
  local resetMs = 0
  if after > 0 then resetMs = finish - now end
  local retryAfterMs = 0
  if not allowed then retryAfterMs = resetMs end
  return allowed, remaining, resetMs, retryAfterMs, count
end

-- The period's first units have just been counted in field `start`: earlier periods' fields go, and the key
-- lives until the period ends.
local function quotaBegin(key, now, start, finish)
  if redis.call('HLEN', key) > 1 then
    local count = redis.call('HGET', key, start)
    redis.call('DEL', key)
    redis.call('HSET', key, start, count)
  end
  redis.call('PEXPIRE', key, pttl(finish - now))
end

local function quotaAdmit(key, now, cost, _limit, start, finish)
  if redis.call('HINCRBY', key, start, cost) == cost then quotaBegin(key, now, start, finish) end
end

-- Only the current period's count: units of a period that is over no longer count anyway.
local function quotaRefund(key, _now, cost, _limit, start, _finish)
  local h = redis.call('HGET', key, start)
  if not h then return end
  local count = tonumber(h) - cost
  if count < 0 then count = 0 end
  redis.call('HSET', key, start, count)
end

-- One call's units, counted at `at`: given back only while the period they were counted in lasts.
local function quotaRefundCall(key, now, cost, limit, start, finish, at)
  if at >= start and at < finish then quotaRefund(key, now, cost, limit, start, finish) end
end

local function quotaPenalize(key, now, cost, limit, start, finish)
  local h = redis.call('HGET', key, start)
  local count = tonumber(h) or 0
  local after = count + cost
  if after > limit + cost then after = limit + cost end
  if after < count then after = count end
  redis.call('HSET', key, start, after)
  if not h then quotaBegin(key, now, start, finish) end
end
