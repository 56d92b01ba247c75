/**
 * The payment service and its table of limits. Before each call to an outside payment channel it asks
 * the limiter for that channel's limit, keyed by `bizType:channel`, read from a limit table (in memory,
 * or in Redis where an operator can change it while the gateways run). A denied call never reaches the
 * channel; a call to a channel whose rule is a queue waits its turn first. Nothing here knows about HTTP.
 */
import { createLimiter, MemoryStore, ruleFromSpec } from '@sluice/core'

/** What a bizType or a channel may look like. Neither can hold `:`, so no two pairs share a key. */
export const NAME = /^[A-Z][A-Z0-9_]{0,31}$/

/** The key a payment is counted against, and the table entry that holds its limit. */
export const keyOf = ({ bizType, channel }) => `${bizType}:${channel}`

/**
 * The entries of a limit table, from limits.json. An entry of limits.json is one of:
 * - `-1`: not limited (and so is a key the table does not mention);
 * - `n`: at most `n` calls in any second, exactly (a sliding log; channels state their limits in TPS);
 * - `{ limit, windowMs }`: at most `limit` calls in any `windowMs`;
 * - `{ ratePerSecond, maxQueueMs }`: a leaky bucket, for a channel that wants its calls evenly spaced:
 *   calls pass at `ratePerSecond`, and each may wait up to `maxQueueMs` for its turn;
 * - a list of rule specs, as `sluice limits set` writes them (`[{ "kind": "slidingLog", ... }]`).
 */
export function entriesFromLimits(limits) {
  return Object.fromEntries(Object.entries(limits).map(([key, entry]) => [key, specsFor(key, entry)]))
}

function specsFor(key, entry) {
  if (entry === -1 || entry === null) return null
  if (Array.isArray(entry)) return entry
  if (typeof entry === 'number') return [{ kind: 'slidingLog', limit: entry, windowMs: 1000 }]
  if (entry !== null && typeof entry === 'object') {
    if ('ratePerSecond' in entry) {
      return [{ kind: 'leakyBucket', ratePerSecond: entry.ratePerSecond, maxQueueMs: entry.maxQueueMs ?? 0 }]
    }
    if ('limit' in entry) return [{ kind: 'slidingLog', limit: entry.limit, windowMs: entry.windowMs }]
  }
  throw new Error(
    `limits table: ${key} is ${JSON.stringify(entry)}; expected -1, a number, ` +
      '{ "limit", "windowMs" }, { "ratePerSecond", "maxQueueMs" } or a list of rule specs',
  )
}

/**
 * The gateway. `table` is the limit table (`createLimitTable` or `RedisLimitTable`): the limiter reads it
 * on every call, so an edit applies to the next payment, and keeps the counts made so far. `store` is
 * where counts live (a `MemoryStore` by default; a `RedisStore` so that every gateway process shares one
 * limit per channel); `onStoreError` says what happens while it is unreachable.
 */
export function createGateway({ table, channels, store = new MemoryStore(), onStoreError = 'allow' }) {
  const limiter = createLimiter({
    prefix: 'payment-gateway',
    store,
    rules: (key) => table.get(key),
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
 * still see no more than their limits. It follows the table: each entry's share is worked out once per
 * version of the entry.
 */
export function insuranceLimiter(table, processes) {
  const shares = new WeakMap()
  const shareOf = (rules) => {
    if (rules === null) return null
    let shared = shares.get(rules)
    if (shared === undefined) {
      shared = rules.map((rule) => ruleFromSpec(partOf(JSON.parse(JSON.stringify(rule)), processes)))
      shares.set(rules, shared)
    }
    return shared
  }
  return createLimiter({ prefix: 'payment-gateway-insurance', rules: (key) => shareOf(table.get(key)) })
}

/** A spec with every limit divided by `share` (at least 1 is left). */
function partOf(spec, share) {
  const part = (limit) => (limit === -1 ? -1 : Math.max(1, Math.floor(limit / share)))
  switch (spec.kind) {
    case 'leakyBucket':
      return { ...spec, ratePerSecond: spec.ratePerSecond / share }
    case 'tokenBucket':
      return { ...spec, capacity: part(spec.capacity), refillPerSecond: spec.refillPerSecond / share }
    default:
      return { ...spec, limit: part(spec.limit) }
  }
}
