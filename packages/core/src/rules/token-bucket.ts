/**
 * @module tokenBucket: tokens refill continuously at `refillPerSecond` up to `capacity`; a call takes
 * `cost` tokens. Allows bursts of up to `capacity`, then a steady `refillPerSecond`.
 * Tokens are fractional. The Redis script performs the same floating-point operations in the same
 * order, so both stores agree to the last bit.
 */
import { integerOption, labelOption, positiveOption, ruleOptions } from '../options.ts'
import type { TokenBucketRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, ruleDecision } from './algorithm.ts'
import { UNLIMITED } from './unlimited.ts'

export interface TokenBucketOptions {
  /** Most tokens the bucket holds (the largest burst): an integer >= 1, or -1 for not limited. */
  capacity: number
  /** Tokens added per second, continuously: a number > 0. */
  refillPerSecond: number
  /** Shown in headers and decisions. Default: `"<capacity>-burst-<refill>-per-s"`. */
  name?: string
}

/** A rule holding up to `capacity` tokens, refilled at `refillPerSecond`. Starts full. */
export function tokenBucket(options: TokenBucketOptions): TokenBucketRule | UnlimitedRule {
  const o = ruleOptions('tokenBucket', options, ['capacity', 'refillPerSecond', 'name'])
  const capacity = o.capacity === -1 ? -1 : integerOption('tokenBucket.capacity', o.capacity, 1)
  const refillPerSecond = positiveOption('tokenBucket.refillPerSecond', o.refillPerSecond)
  if (capacity === -1) return UNLIMITED
  return Object.freeze({
    kind: 'tokenBucket',
    id: `tokenBucket:${capacity}:${refillPerSecond}`,
    name:
      o.name === undefined
        ? `${capacity}-burst-${refillPerSecond}-per-s`
        : labelOption('tokenBucket.name', o.name),
    policyWindowSeconds: Math.ceil(capacity / refillPerSecond),
    capacity,
    refillPerSecond,
  })
}

export interface TokenBucketState {
  tokens: number
  /** When `tokens` was last brought up to date. */
  last: number
}

/** Tokens at `t` for a bucket that held `tokens0` at `t0`: continuous refill, capped at capacity. */
function tokensAt(rule: TokenBucketRule, tokens0: number, t0: number, t: number): number {
  const elapsed = t > t0 ? t - t0 : 0
  const tokens = tokens0 + (elapsed * rule.refillPerSecond) / 1000
  return Math.min(tokens, rule.capacity)
}

/**
 * Whole ms from `now` until a bucket that held `tokens0` at `t0` holds `target` tokens: the least
 * such ms under the same arithmetic that will judge the retry, so it is neither early nor late.
 */
function msUntil(rule: TokenBucketRule, tokens0: number, t0: number, target: number, now: number): number {
  const have = tokensAt(rule, tokens0, t0, now)
  if (have >= target) return 0
  let ms = Math.ceil(((target - have) * 1000) / rule.refillPerSecond)
  // The estimate can be a rounding off either way (0.998 tokens needing 1 gives ceil(1.0000000000000009)).
  while (ms > 1 && tokensAt(rule, tokens0, t0, now + ms - 1) >= target) ms--
  while (tokensAt(rule, tokens0, t0, now + ms) < target) ms++
  return ms
}

export const tokenBucketAlgorithm: Algorithm<TokenBucketRule, TokenBucketState> = {
  create: (rule, now) => ({ tokens: rule.capacity, last: now }),

  decide(state, rule, now, cost) {
    const tokens = tokensAt(rule, state.tokens, state.last, now)
    if (tokens >= cost) {
      const after = tokens - cost
      const resetMs = msUntil(rule, after, Math.max(now, state.last), rule.capacity, now)
      return ruleDecision(rule, true, Math.floor(after), resetMs, 0, 0)
    }
    const resetMs = msUntil(rule, state.tokens, state.last, rule.capacity, now)
    const retryAfterMs = msUntil(rule, state.tokens, state.last, cost, now)
    return ruleDecision(rule, false, Math.floor(tokens), resetMs, retryAfterMs, 0)
  },

  admit(state, rule, now, cost) {
    state.tokens = tokensAt(rule, state.tokens, state.last, now) - cost
    if (now > state.last) state.last = now
  },

  expiresAt: (state, rule) => state.last + msUntil(rule, state.tokens, state.last, rule.capacity, state.last),
}
