-- tokenBucket (code T; params: capacity, refillPerSecond). A hash { t = tokens (a float), l = last refill }.
-- A missing key is a full bucket. The key lives until the bucket is full again.

-- Tokens at `t` for a bucket that held `tokens0` at `t0`: continuous refill, capped at capacity.
local function tokensAt(capacity, refill, tokens0, t0, t)
  local elapsed = 0
  if t > t0 then elapsed = t - t0 end
  local tokens = tokens0 + (elapsed * refill) / 1000
  if tokens < capacity then return tokens end
  return capacity
end

-- Whole ms from `now` until the bucket holds `target`: the least such ms under the same arithmetic that
-- will judge the retry, so it is neither early nor late.
local function msUntil(capacity, refill, tokens0, t0, target, now)
  local have = tokensAt(capacity, refill, tokens0, t0, now)
  if have >= target then return 0 end
  local ms = ceil(((target - have) * 1000) / refill)
  -- The estimate can be a rounding off either way (0.998 tokens needing 1 gives ceil(1.0000000000000009)).
  while ms > 1 and tokensAt(capacity, refill, tokens0, t0, now + ms - 1) >= target do ms = ms - 1 end
  while tokensAt(capacity, refill, tokens0, t0, now + ms) < target do ms = ms + 1 end
  return ms
end

rules.T = {
  params = 2,

  decide = function(key, p, now, cost)
    local capacity, refill = p[1], p[2]
    local h = redis.call('HMGET', key, 't', 'l')
    local tokens0, last = capacity, now
    if h[1] then
      tokens0 = tonumber(h[1])
      last = tonumber(h[2])
    end
    local st = { tokens0 = tokens0, last = last }
    local tokens = tokensAt(capacity, refill, tokens0, last, now)
    if tokens >= cost then
      local after = tokens - cost
      local resetMs = msUntil(capacity, refill, after, math.max(now, last), capacity, now)
      return st, true, floor(after), resetMs, 0, 0
    end
    local resetMs = msUntil(capacity, refill, tokens0, last, capacity, now)
    local retryAfterMs = msUntil(capacity, refill, tokens0, last, cost, now)
    return st, false, floor(tokens), resetMs, retryAfterMs, 0
  end,

  admit = function(key, p, now, cost, st)
    local capacity, refill = p[1], p[2]
    local tokens = tokensAt(capacity, refill, st.tokens0, st.last, now) - cost
    local last = st.last
    if now > last then last = now end
    redis.call('HSET', key, 't', num(tokens), 'l', num(last))
    local expiresAt = last + msUntil(capacity, refill, tokens, last, capacity, last)
    redis.call('PEXPIRE', key, num(expiresAt - now))
  end,
}
