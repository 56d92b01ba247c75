/**
 * @module tokenBucket: tokens refill continuously at `refillPerSecond` up to `capacity`; a call takes
 * `cost` tokens. Allows bursts of up to `capacity`, then a steady `refillPerSecond`.
 * Tokens are fractional, kept in thousandths (see `TokenBucketState`). The Redis script performs the
 * same floating-point operations in the same order, so both stores agree to the last bit.
 */
import { InvalidOptionError } from '../errors.ts'
import { integerOption, labelOption, positiveOption, ruleOptions } from '../options.ts'
import type { TokenBucketRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, decisionOf } from './algorithm.ts'
import { FIXUP_STEPS, MAX_FIGURE, MAX_THOUSANDTHS } from './bounds.ts'
import { defineRule } from './define.ts'
import { DECIMAL, DURATION, INTEGER, perSecond } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface TokenBucketOptions {
  /**
   * Most tokens the bucket holds (the largest burst): an integer from 1 to 9,007,199,254,740 (its
   * thousandths must stay exact doubles), or -1 for not limited.
   */
  capacity: number
  /**
   * Tokens added per second, continuously: a number > 0, fast enough that an empty bucket fills within
   * 2^50 ms (about 35,700 years): at least `capacity * 1000 / 2^50`.
   */
  refillPerSecond: number
  /** Shown in headers and decisions. Default: `"<capacity>-burst-<refill>-per-s"`. */
  name?: string
}

/** A rule holding up to `capacity` tokens, refilled at `refillPerSecond`. Starts full. */
export function tokenBucket(options: TokenBucketOptions): TokenBucketRule | UnlimitedRule {
  const o = ruleOptions('tokenBucket', options, tokenBucketKind.options)
  const capacity = o.capacity === -1 ? -1 : integerOption('tokenBucket.capacity', o.capacity, 1, MAX_CAPACITY)
  const refillPerSecond = positiveOption('tokenBucket.refillPerSecond', o.refillPerSecond)
  const name = o.name === undefined ? undefined : labelOption('tokenBucket.name', o.name)
  if (capacity === -1) return UNLIMITED
  // The longest wait a call can be told is the time an empty bucket takes to fill.
  if ((capacity * 1000) / refillPerSecond > MAX_FIGURE) {
    throw new InvalidOptionError(
      'tokenBucket.refillPerSecond',
      refillPerSecond,
      `at least ${(capacity * 1000) / MAX_FIGURE} for capacity ${capacity}: a refill so slow that a wait ` +
        'passes 2^50 ms (about 35,700 years) would leave the range where waits are exact and bounded',
    )
  }
  return defineRule<TokenBucketRule>(
    { kind: 'tokenBucket', capacity, refillPerSecond },
    tokenBucketKind.identity,
    name,
    `${capacity}-burst-${refillPerSecond}-per-s`,
    { policyWindowSeconds: Math.ceil(capacity / refillPerSecond) },
  )
}

/** The largest capacity whose thousandths are exact doubles (below 2^53). */
const MAX_CAPACITY = Math.floor(Number.MAX_SAFE_INTEGER / 1000)

/**
 * The bucket's level in thousandths of a token, so one ms of refill adds exactly `refillPerSecond`.
 * Whole tokens kept as floats drifted (1.03 - 1 is 0.030000000000000027), which made retries and
 * resets a millisecond late and could deny a call at the very ms its tokens were there.
 * In thousandths, whole-ms refills at whole or binary-fraction rates are exact integers.
 */
export interface TokenBucketState {
  milli: number
  /** When `milli` was last brought up to date. */
  last: number
  /**
   * When the bucket is full again under the numbers it was last written with (-Infinity for a state no
   * call has written: it reads as full under any numbers, even when a denied call kept it).
   * From then on the state reads as a fresh, full bucket, whatever the rule's numbers are now: state is
   * keyed by identity, not numbers, and this is what lets both stores agree after an edit, whether or not
   * they have dropped the state yet (the Redis script checks the same time).
   */
  until: number
}

/** Thousandths at `t` for a bucket that held `milli0` at `t0`: continuous refill, capped at capacity. */
function milliAt(rule: TokenBucketRule, milli0: number, t0: number, t: number): number {
  const elapsed = t > t0 ? t - t0 : 0
  return Math.min(milli0 + elapsed * rule.refillPerSecond, rule.capacity * 1000)
}

/**
 * Whole ms from `now` until a bucket that held `milli0` at `t0` holds `target` thousandths: the least
 * such ms under the same arithmetic that will judge the retry, so it is neither early nor late.
 */
function msUntil(rule: TokenBucketRule, milli0: number, t0: number, target: number, now: number): number {
  const have = milliAt(rule, milli0, t0, now)
  if (have >= target) return 0
  let ms = Math.ceil((target - have) / rule.refillPerSecond)
  // At a rate that is not exact in binary (0.1) the estimate can be a rounding off either way. The factory
  // keeps every wait within 2^50 ms, where it is off by at most one ms; the loops are capped all the same.
  for (let i = 0; i < FIXUP_STEPS && ms > 1 && milliAt(rule, milli0, t0, now + ms - 1) >= target; i++) ms--
  for (let i = 0; i < FIXUP_STEPS && milliAt(rule, milli0, t0, now + ms) < target; i++) ms++
  return ms
}

export const tokenBucketAlgorithm: Algorithm<TokenBucketRule, TokenBucketState> = {
  mark: undefined,
  create: (rule, now) => ({ milli: rule.capacity * 1000, last: now, until: Number.NEGATIVE_INFINITY }),

  decide(live, rule, now, cost) {
    const state = now >= live.until ? { milli: rule.capacity * 1000, last: now, until: live.until } : live
    const milli = milliAt(rule, state.milli, state.last, now)
    const full = rule.capacity * 1000
    if (milli >= cost * 1000) {
      const after = milli - cost * 1000
      const resetMs = msUntil(rule, after, Math.max(now, state.last), full, now)
      return decisionOf(rule, rule.capacity, true, Math.floor(after / 1000), resetMs, 0, 0)
    }
    const resetMs = msUntil(rule, state.milli, state.last, full, now)
    const retryAfterMs = msUntil(rule, state.milli, state.last, cost * 1000, now)
    return decisionOf(
      rule,
      rule.capacity,
      false,
      atLeastZero(Math.floor(milli / 1000)),
      resetMs,
      retryAfterMs,
      0,
    )
  },

  admit(state, rule, now, cost) {
    if (now >= state.until) {
      state.milli = rule.capacity * 1000
      state.last = now
    }
    state.milli = milliAt(rule, state.milli, state.last, now) - cost * 1000
    if (now > state.last) state.last = now
    state.until = state.last + msUntil(rule, state.milli, state.last, rule.capacity * 1000, state.last)
  },

  expiresAt: (state) => state.until,

  refund(state, rule, now, cost) {
    // Past `until` the bucket reads as full: nothing to give back.
    if (now >= state.until) return
    state.milli = Math.min(milliAt(rule, state.milli, state.last, now) + cost * 1000, rule.capacity * 1000)
    if (now > state.last) state.last = now
    state.until = state.last + msUntil(rule, state.milli, state.last, rule.capacity * 1000, state.last)
  },

  refundCall(state, rule, now, cost, at) {
    // Exact counting without the call would leave the bucket `cost` tokens higher until the refill, capped
    // at capacity, clips the difference: it is `min(cost, capacity - the highest level since the call)`.
    // The state keeps only its last level, not that highest one, so the call's tokens are given back only
    // while the state was last written in the call's own ms: the level has only refilled since, its
    // highest is now, and `refund` (up to capacity) gives back exactly what exact counting allows. Once
    // anything has been written later (another call, a refund, a penalty), the refill between may have
    // reached capacity unseen, and nothing is given back (stricter than exact, never looser).
    if (now >= state.until || state.last !== at) return
    tokenBucketAlgorithm.refund(state, rule, now, cost)
  },

  penalize(state, rule, now, cost) {
    if (now >= state.until) {
      state.milli = rule.capacity * 1000
      state.last = now
    }
    const milli = milliAt(rule, state.milli, state.last, now)
    // Below zero by at most the penalty; a bucket already lower than that stays where it is.
    state.milli = Math.min(milli, Math.max(milli - cost * 1000, -cost * 1000))
    if (now > state.last) state.last = now
    state.until = state.last + msUntil(rule, state.milli, state.last, rule.capacity * 1000, state.last)
  },
}

const TOKENS = new RegExp(`^(${INTEGER})\\+(${DECIMAL})/(${DURATION})$`)

/** tokenBucket as core knows it: see kind.ts. */
export const tokenBucketKind: RuleKindEntry<'tokenBucket'> = {
  factory: tokenBucket,
  options: ['capacity', 'refillPerSecond', 'name'],
  identity: [],
  algorithm: tokenBucketAlgorithm as RuleKindEntry<'tokenBucket'>['algorithm'],
  certainRetry: true,
  decision: (rule, allowed, remaining, resetMs, retryAfterMs, waitMs) =>
    decisionOf(rule, rule.capacity, allowed, remaining, resetMs, retryAfterMs, waitMs),
  text: {
    form: 'tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s',
    read(body) {
      const m = TOKENS.exec(body)
      if (m === null) return undefined
      return { capacity: Number(m[1]), refillPerSecond: perSecond(m[2]!, m[3]!) }
    },
    write: (rule) => `${rule.capacity}+${rule.refillPerSecond}/s`,
  },
  maxCost(rule, penalty) {
    if (!penalty) return rule.capacity
    return Math.min(Math.floor((MAX_FIGURE * rule.refillPerSecond) / 1000), MAX_THOUSANDTHS) - rule.capacity
  },
  tooCostly: (rule, penalty) =>
    penalty
      ? `rule ${rule.name} would take past 2^50 ms to refill`
      : `rule ${rule.name} can never admit more than ${rule.capacity}`,
  refundMark: (_rule, _d, at) => String(at),
}
