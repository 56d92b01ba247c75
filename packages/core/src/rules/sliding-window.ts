/**
 * @module slidingWindow: `buckets` counters of `windowMs / buckets` ms each, aligned to multiples of
 * the bucket size. A bucket starting at `s` counts while `now < s + windowMs`: the current bucket and
 * the `buckets - 1` before it. Memory is fixed per key; accuracy is one bucket.
 * Stale buckets are recognised by their start, so a jump of any length costs O(buckets), never a loop
 * over the time that passed.
 */
import { InvalidOptionError } from '../errors.ts'
import { durationLabel, given, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { SlidingWindowRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, decisionOf, limitDecision } from './algorithm.ts'
import { countingMaxCost, countingTooCostly } from './bounds.ts'
import { defineRule } from './define.ts'
import { formatDuration, parseDuration, WINDOW } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface SlidingWindowOptions {
  /** Units admitted across the live buckets: an integer >= 1, or -1 for not limited. */
  limit: number
  /** Window length in ms, an integer >= 1, divisible by `buckets`. */
  windowMs: number
  /** Counters per window, an integer from 1 to 1000 dividing `windowMs`. Default 10. */
  buckets?: number
  /** Shown in headers and decisions. Default: `"<limit>-per-<window>"`. */
  name?: string
}

/** Every call visits each bucket, so their number is bounded. */
export const MAX_BUCKETS = 1000

/** A rule admitting at most `limit` units across the last `buckets` buckets. */
export function slidingWindow(options: SlidingWindowOptions): SlidingWindowRule | UnlimitedRule {
  const o = ruleOptions('slidingWindow', options, slidingWindowKind.options)
  const limit = limitOption('slidingWindow.limit', o.limit)
  const windowMs = integerOption('slidingWindow.windowMs', o.windowMs, 1)
  const buckets = integerOption('slidingWindow.buckets', given(o.buckets, 10), 1)
  if (buckets > MAX_BUCKETS) {
    throw new InvalidOptionError(
      'slidingWindow.buckets',
      buckets,
      `at most ${MAX_BUCKETS} (each call visits every bucket)`,
    )
  }
  if (windowMs % buckets !== 0) {
    throw new InvalidOptionError('slidingWindow.buckets', buckets, `a divisor of windowMs (${windowMs})`)
  }
  const name = o.name === undefined ? undefined : labelOption('slidingWindow.name', o.name)
  if (limit === -1) return UNLIMITED
  return defineRule<SlidingWindowRule>(
    { kind: 'slidingWindow', limit, windowMs, buckets },
    slidingWindowKind.identity,
    name,
    `${limit}-per-${durationLabel(windowMs)}`,
    { policyWindowSeconds: Math.ceil(windowMs / 1000), bucketMs: windowMs / buckets },
  )
}

/** A ring of buckets: slot `i` holds the bucket whose start `s` has `(s / bucketMs) % buckets === i`. */
export interface SlidingWindowState {
  /** Start of the bucket in each slot; -Infinity for a slot never used. */
  starts: Float64Array
  counts: Float64Array
}

function slotOf(rule: SlidingWindowRule, start: number): number {
  return (start / rule.bucketMs) % rule.buckets
}

export const slidingWindowAlgorithm: Algorithm<SlidingWindowRule, SlidingWindowState> = {
  mark: undefined,
  create: (rule) => ({
    starts: new Float64Array(rule.buckets).fill(Number.NEGATIVE_INFINITY),
    counts: new Float64Array(rule.buckets),
  }),

  decide(state, rule, now, cost) {
    const { starts, counts } = state
    const current = now - (now % rule.bucketMs)
    const oldest = current - rule.windowMs + rule.bucketMs
    let total = 0
    let newest = Number.NEGATIVE_INFINITY
    for (let i = 0; i < rule.buckets; i++) {
      const s = starts[i]!
      if (s >= oldest && s <= current && counts[i]! > 0) {
        total += counts[i]!
        if (s > newest) newest = s
      }
    }
    const allowed = total + cost <= rule.limit
    if (allowed) {
      // The newest counted bucket is this call's, or with cost 0 the newest holding anything.
      const last = cost > 0 ? current : newest
      const resetMs = last === Number.NEGATIVE_INFINITY ? 0 : last + rule.windowMs - now
      return decisionOf(rule, rule.limit, true, rule.limit - total - cost, resetMs, 0, 0)
    }
    // Denied: walk the live buckets oldest first until enough units have expired for the call to fit.
    const mustExpire = total + cost - rule.limit
    let expired = 0
    let s = oldest
    for (; s <= current; s += rule.bucketMs) {
      const i = slotOf(rule, s)
      if (starts[i] === s) expired += counts[i]!
      if (expired >= mustExpire) break
    }
    return decisionOf(
      rule,
      rule.limit,
      false,
      // Past the limit when it was lowered or penalized: nothing is left, not less.
      atLeastZero(rule.limit - total),
      newest + rule.windowMs - now,
      s + rule.windowMs - now,
      0,
    )
  },

  admit(state, rule, now, cost) {
    const current = now - (now % rule.bucketMs)
    const i = slotOf(rule, current)
    if (state.starts[i] !== current) {
      state.starts[i] = current
      state.counts[i] = 0
    }
    state.counts[i]! += cost
  },

  refund(state, rule, now, cost) {
    // Newest live bucket first: at most `buckets` steps, however large the refund.
    const { starts, counts } = state
    const current = now - (now % rule.bucketMs)
    const oldest = current - rule.windowMs + rule.bucketMs
    let left = cost
    for (let s = current; s >= oldest && left > 0; s -= rule.bucketMs) {
      const i = slotOf(rule, s)
      if (starts[i] === s && counts[i]! > 0) {
        const take = Math.min(counts[i]!, left)
        counts[i]! -= take
        left -= take
      }
    }
  },

  refundCall(state, rule, now, cost, at) {
    // The call's units are in the bucket that holds `at`, and count while that bucket is live.
    const s = at - (at % rule.bucketMs)
    if (s + rule.windowMs <= now) return
    const i = slotOf(rule, s)
    if (state.starts[i] === s) state.counts[i]! -= Math.min(state.counts[i]!, cost)
  },

  penalize(state, rule, now, cost) {
    const { starts, counts } = state
    const current = now - (now % rule.bucketMs)
    const oldest = current - rule.windowMs + rule.bucketMs
    let total = 0
    for (let i = 0; i < rule.buckets; i++) {
      const s = starts[i]!
      if (s >= oldest && s <= current && counts[i]! > 0) total += counts[i]!
    }
    const add = Math.min(cost, rule.limit + cost - total)
    if (add > 0) slidingWindowAlgorithm.admit(state, rule, now, add)
  },

  expiresAt(state, rule) {
    let newest = Number.NEGATIVE_INFINITY
    for (let i = 0; i < rule.buckets; i++) if (state.starts[i]! > newest) newest = state.starts[i]!
    return newest + rule.windowMs
  },
}

/** slidingWindow as core knows it: see kind.ts. */
export const slidingWindowKind: RuleKindEntry<'slidingWindow'> = {
  factory: slidingWindow,
  options: ['limit', 'windowMs', 'buckets', 'name'],
  identity: ['windowMs', 'buckets'],
  algorithm: slidingWindowAlgorithm as RuleKindEntry<'slidingWindow'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: {
    form: 'slidingWindow:LIMIT/WINDOW[/BUCKETS], e.g. slidingWindow:600/1m/10',
    read(body) {
      const m = WINDOW.exec(body)
      if (m === null) return undefined
      const spec = { limit: Number(m[1]), windowMs: parseDuration(m[2]!) }
      return m[3] === undefined ? spec : { ...spec, buckets: Number(m[3]) }
    },
    write: (rule) =>
      `${rule.limit}/${formatDuration(rule.windowMs)}${rule.buckets === 10 ? '' : `/${rule.buckets}`}`,
  },
  maxCost: countingMaxCost,
  tooCostly: countingTooCostly,
  refundMark: (_rule, _d, at) => String(at),
}
