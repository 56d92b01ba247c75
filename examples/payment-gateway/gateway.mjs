/**
 * The payment service and its table of limits. Before each call to an outside payment channel it asks
 * the limiter for that channel's limit, keyed by `bizType:channel`. A denied call never reaches the
 * channel; a call to a channel whose rule is a queue waits its turn first. Nothing here knows about HTTP.
 */
import { createLimiter, leakyBucket, MemoryStore, slidingLog } from '@sluice/core'

/** What a bizType or a channel may look like. Neither can hold `:`, so no two pairs share a key. */
export const NAME = /^[A-Z][A-Z0-9_]{0,31}$/

/** The key a payment is counted against. */
export const keyOf = ({ bizType, channel }) => `${bizType}:${channel}`

/**
 * Rules per key, from a table of limits. An entry is one of:
 * - `-1`: not limited (and so is a key the table does not mention);
 * - `n`: at most `n` calls in any second, exactly (a sliding log; channels state their limits in TPS);
 * - `{ limit, windowMs }`: at most `limit` calls in any `windowMs`;
 * - `{ ratePerSecond, maxQueueMs }`: a leaky bucket, for a channel that wants its calls evenly spaced:
 *   calls pass at `ratePerSecond`, and each may wait up to `maxQueueMs` for its turn.
 * Every limit is divided by `share` (at least 1 is left), for one process's part of a shared limit.
 */
export function rulesFromTable(table, share = 1) {
  const rules = new Map()
  for (const [key, entry] of Object.entries(table)) rules.set(key, [ruleFor(key, entry, share)])
  return rules
}

function ruleFor(key, entry, share) {
  const part = (limit) => (limit === -1 ? -1 : Math.max(1, Math.floor(limit / share)))
  if (typeof entry === 'number') return slidingLog({ limit: part(entry), windowMs: 1000 })
  if (entry !== null && typeof entry === 'object') {
    if ('ratePerSecond' in entry) {
      return leakyBucket({ ratePerSecond: entry.ratePerSecond / share, maxQueueMs: entry.maxQueueMs ?? 0 })
    }
    if ('limit' in entry) return slidingLog({ limit: part(entry.limit), windowMs: entry.windowMs })
  }
  throw new Error(
    `limits table: ${key} is ${JSON.stringify(entry)}; expected -1, a number, ` +
      '{ "limit", "windowMs" } or { "ratePerSecond", "maxQueueMs" }',
  )
}

/**
 * The gateway. `store` is where counts live (a `MemoryStore` by default; a `RedisStore` so that every
 * gateway process shares one limit per channel); `onStoreError` says what happens while it is unreachable.
 */
export function createGateway({ table, channels, store = new MemoryStore(), onStoreError = 'allow' }) {
  const rules = rulesFromTable(table)
  const limiter = createLimiter({
    prefix: 'payment-gateway',
    store,
    rules: (key) => rules.get(key) ?? null,
    onStoreError,
  })
  return {
    limiter,
    /**
     * Pays through the outside channel, within the channel's limit. Resolves with the limiter's decision
     * and the channel's receipt. Rejects with `RateLimitedError` (its `decision` says when to retry) when
     * the limit is reached, or with `signal`'s reason when the caller gives up while queued.
     */
    async pay(payment, { signal } = {}) {
      const decision = await limiter.acquire(keyOf(payment), { signal })
      const receipt = await channels.call(payment)
      return { decision, receipt }
    },
  }
}

/**
 * A limiter in this process's memory holding its share of every limit in the table, for the gateway to
 * ask while Redis is unreachable: with `processes` gateways each taking its share, the channels together
 * still see no more than their limits.
 */
export function insuranceLimiter(table, processes) {
  const rules = rulesFromTable(table, processes)
  return createLimiter({ prefix: 'payment-gateway-insurance', rules: (key) => rules.get(key) ?? null })
}
