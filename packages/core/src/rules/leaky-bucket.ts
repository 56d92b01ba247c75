/**
 * @module leakyBucket: calls pass one unit every `1000 / ratePerSecond` ms, in order.
 * `last` is when the last admitted unit passes. A call's slot is `max(now, last + cost * 1000 / rate)`;
 * it is admitted when the slot is at most `maxQueueMs` ahead, and must then wait until its slot
 * (`waitMs`). Adapters hold the request that long: queue-and-wait. `maxQueueMs = 0` is a strict meter.
 */
import { integerOption, labelOption, positiveOption, ruleOptions } from '../options.ts'
import type { LeakyBucketRule } from '../types.ts'
import { type Algorithm, ruleDecision } from './algorithm.ts'

export interface LeakyBucketOptions {
  /** Units passing per second: a number > 0. */
  ratePerSecond: number
  /** Longest a call may wait for its slot, in ms: an integer >= 0. Default 0 (no waiting). */
  maxQueueMs?: number
  /** Shown in headers and decisions. Default: `"<rate>-per-s-queue-<maxQueueMs>ms"`. */
  name?: string
}

/** A rule letting calls through at `ratePerSecond`, each waiting at most `maxQueueMs` for its turn. */
export function leakyBucket(options: LeakyBucketOptions): LeakyBucketRule {
  const o = ruleOptions('leakyBucket', options, ['ratePerSecond', 'maxQueueMs', 'name'])
  const ratePerSecond = positiveOption('leakyBucket.ratePerSecond', o.ratePerSecond)
  const maxQueueMs = integerOption('leakyBucket.maxQueueMs', o.maxQueueMs ?? 0, 0)
  const intervalMs = 1000 / ratePerSecond
  const limit = Math.floor((maxQueueMs * ratePerSecond) / 1000) + 1
  return Object.freeze({
    kind: 'leakyBucket',
    id: `leakyBucket:${ratePerSecond}:${maxQueueMs}`,
    name:
      o.name === undefined
        ? `${ratePerSecond}-per-s-queue-${maxQueueMs}ms`
        : labelOption('leakyBucket.name', o.name),
    policyWindowSeconds: Math.ceil(limit / ratePerSecond),
    ratePerSecond,
    maxQueueMs,
    intervalMs,
    limit,
  })
}

export interface LeakyBucketState {
  /** When the last admitted unit passes (a float); -Infinity when nothing has passed. */
  last: number
}

/** The time a call of `cost` arriving at `now` would pass. */
function slotOf(state: LeakyBucketState, rule: LeakyBucketRule, now: number, cost: number): number {
  const slot = state.last + (cost * 1000) / rule.ratePerSecond
  return Math.max(slot, now)
}

/** Units of cost 1 that could still be admitted at `now` if the last unit passes at `last`. */
function remainingAt(rule: LeakyBucketRule, last: number, now: number): number {
  if (last + rule.intervalMs <= now) return rule.limit
  const units = Math.floor(((now + rule.maxQueueMs - last) * rule.ratePerSecond) / 1000)
  return units < 0 ? 0 : Math.min(units, rule.limit)
}

export const leakyBucketAlgorithm: Algorithm<LeakyBucketRule, LeakyBucketState> = {
  create: () => ({ last: Number.NEGATIVE_INFINITY }),

  decide(state, rule, now, cost) {
    const slot = slotOf(state, rule, now, cost)
    const allowed = slot - now <= rule.maxQueueMs
    const last = allowed ? slot : state.last
    const drained = last + rule.intervalMs - now
    const resetMs = drained > 0 ? Math.ceil(drained) : 0
    if (allowed)
      return ruleDecision(rule, true, remainingAt(rule, last, now), resetMs, 0, Math.ceil(slot - now))
    return ruleDecision(
      rule,
      false,
      remainingAt(rule, last, now),
      resetMs,
      Math.ceil(slot - rule.maxQueueMs - now),
      0,
    )
  },

  admit(state, rule, now, cost) {
    state.last = slotOf(state, rule, now, cost)
  },

  expiresAt: (state, rule) => state.last + (rule.limit * 1000) / rule.ratePerSecond,
}
