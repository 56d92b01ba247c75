/**
 * @module warmUp: a meter with a cold start.
 *
 * Calls pass one after another like a leaky bucket's, each delaying the next. A meter that has been idle
 * stores permits (one per `coolDownMs` of idle time, at most `maxPermits`: it starts cold), and a call
 * that takes stored permits above `thresholdPermits` pays more for them: the spacing is `coldMs` when
 * cold and shrinks to `stableMs` over `warmUpMs` of steady demand. Idle long enough, it cools down again.
 *
 * Floats in ms, no rounding until a decision reports. The Redis script performs the same floating-point
 * operations in the same order, so both stores agree to the last bit; every formula below is written in
 * the order docs/design/rules/warm-up.md gives it.
 */
import { InvalidOptionError } from '../errors.ts'
import {
  durationLabel,
  given,
  integerOption,
  labelOption,
  MAX_TIMER_MS,
  positiveOption,
  ruleOptions,
} from '../options.ts'
import type { WarmUpRule } from '../types.ts'
import { type Algorithm, decisionOf, limitDecision } from './algorithm.ts'
import { FIXUP_STEPS, MAX_FIGURE } from './bounds.ts'
import { defineRule } from './define.ts'
import { DECIMAL, DURATION, formatDuration, parseDuration, perSecond, queueText } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { unitsWithin } from './leaky-bucket.ts'

export interface WarmUpOptions {
  /** Calls per second once warm: a number > 0 (its cold interval, `coldFactor × 1000 / rate`, within 2^50 ms). */
  ratePerSecond: number
  /** How long steady demand takes to warm a cold meter up, in ms: an integer from 1 to 2^50. */
  warmUpMs: number
  /** How many times slower than `ratePerSecond` a cold meter is: a number >= 1. Default 3. */
  coldFactor?: number
  /** Longest a call may wait for its slot, in ms: an integer from 0 to 2^31 − 1. Default 0. */
  maxQueueMs?: number
  /** Shown in headers and decisions. Default: `"<rate>-per-s-warm-<warmUp>"`. */
  name?: string
}

/** A meter passing `ratePerSecond` once warm, starting `coldFactor` times slower. */
export function warmUp(options: WarmUpOptions): WarmUpRule {
  const o = ruleOptions('warmUp', options, warmUpKind.options)
  const ratePerSecond = positiveOption('warmUp.ratePerSecond', o.ratePerSecond)
  const warmUpMs = integerOption('warmUp.warmUpMs', o.warmUpMs, 1, MAX_FIGURE)
  const coldFactor = given(o.coldFactor, 3)
  if (typeof coldFactor !== 'number' || !Number.isFinite(coldFactor) || coldFactor < 1) {
    throw new InvalidOptionError('warmUp.coldFactor', coldFactor, 'a finite number >= 1')
  }
  const maxQueueMs = integerOption('warmUp.maxQueueMs', given(o.maxQueueMs, 0), 0, MAX_TIMER_MS)
  const stableMs = 1000 / ratePerSecond
  const coldMs = stableMs * coldFactor
  if (coldMs > MAX_FIGURE) {
    throw new InvalidOptionError(
      'warmUp.ratePerSecond',
      ratePerSecond,
      `at least ${(1000 * coldFactor) / MAX_FIGURE} with coldFactor ${coldFactor}: a cold interval past 2^50 ms ` +
        'would leave the range where waits are exact and bounded',
    )
  }
  const thresholdPermits = (0.5 * warmUpMs) / stableMs
  const maxPermits = thresholdPermits + (2 * warmUpMs) / (stableMs + coldMs)
  if (maxPermits > MAX_FIGURE) {
    throw new InvalidOptionError(
      'warmUp.warmUpMs',
      warmUpMs,
      `at most ${Math.floor(MAX_FIGURE / (maxPermits / warmUpMs))} at ${ratePerSecond} a second: a meter ` +
        'storing more than 2^50 permits would leave the range where figures are exact',
    )
  }
  const slope = (coldMs - stableMs) / (maxPermits - thresholdPermits)
  const coolDownMs = warmUpMs / maxPermits
  const limit = unitsWithin(ratePerSecond, maxQueueMs) + 1
  const name = o.name === undefined ? undefined : labelOption('warmUp.name', o.name)
  // The state identity is the kind and a given name only, as a token bucket's: no figure of the rate.
  return defineRule<WarmUpRule>(
    { kind: 'warmUp', ratePerSecond, warmUpMs, coldFactor, maxQueueMs },
    warmUpKind.identity,
    name,
    `${ratePerSecond}-per-s-warm-${durationLabel(warmUpMs)}`,
    {
      policyWindowSeconds: Math.ceil(limit / ratePerSecond),
      limit,
      stableMs,
      coldMs,
      thresholdPermits,
      maxPermits,
      slope,
      coolDownMs,
    },
  )
}

/** `next`: the slot of the next call (ms, a float); `stored`: permits stored (a float). */
export interface WarmUpState {
  next: number
  stored: number
  /**
   * When the meter is cold again (as a key never seen) under the numbers it was last written with
   * (-Infinity for a state no call has written). From then on the state reads as a fresh, cold meter,
   * whatever the rule's numbers are now: state is keyed by identity, not numbers, and this is what lets
   * both stores agree after an edit (the Redis script checks the same time, hash field `x`).
   */
  until: number
}

/** The state as it reads at `now`: a fresh, cold meter from `until` on. */
function liveAt(state: WarmUpState, rule: WarmUpRule, now: number): WarmUpState {
  return now >= state.until ? { next: now, stored: rule.maxPermits, until: state.until } : state
}

/** Brings a fresh state up to `now` in place (see `liveAt`). */
function freshen(state: WarmUpState, rule: WarmUpRule, now: number): void {
  if (now >= state.until) {
    state.next = now
    state.stored = rule.maxPermits
  }
}

/**
 * Cold again (as a key never seen) once idle long enough to store every permit; one permit's cool-down
 * more, so that float rounding cannot forget a meter a hair short of cold.
 */
function coldAt(state: WarmUpState, rule: WarmUpRule): number {
  return Math.ceil(state.next + (rule.maxPermits - state.stored + 1) * rule.coolDownMs) + 1
}

/** The interval when `p` permits are stored above the threshold. */
function timeFor(rule: WarmUpRule, p: number): number {
  return rule.stableMs + p * rule.slope
}

/** ms that taking `take` of `stored` permits costs. */
export function waitFor(rule: WarmUpRule, stored: number, take: number): number {
  const above = stored - rule.thresholdPermits
  let w = 0
  if (above > 0) {
    const t = Math.min(above, take)
    w = (t * (timeFor(rule, above) + timeFor(rule, above - t))) / 2
    take -= t
  }
  return w + rule.stableMs * take
}

/**
 * Units of cost 1 that could still be admitted at `now` at the stable rate, the next slot `ahead` ms away:
 * the n with `ahead + (n − 1) × stableMs <= maxQueueMs`, at most `limit`. The estimate is settled with
 * that very comparison (at most `FIXUP_STEPS` each way), so it never depends on how a division rounds.
 */
function remainingAt(rule: WarmUpRule, ahead: number): number {
  if (ahead <= 0) return rule.limit
  const { maxQueueMs, stableMs } = rule
  let n = Math.floor((maxQueueMs - ahead) / stableMs) + 1
  if (n < 0) n = 0
  for (let i = 0; i < FIXUP_STEPS && n > 0 && ahead + (n - 1) * stableMs > maxQueueMs; i++) n--
  for (let i = 0; i < FIXUP_STEPS && n < rule.limit && ahead + n * stableMs <= maxQueueMs; i++) n++
  return Math.min(n, rule.limit)
}

/** Whole ms until a call of cost 1 would pass at once. */
function resetIn(ahead: number): number {
  return ahead > 0 ? Math.ceil(ahead) : 0
}

export const warmUpAlgorithm: Algorithm<WarmUpRule, WarmUpState> = {
  mark: undefined,
  // A key never seen starts cold.
  create: (rule, now) => ({ next: now, stored: rule.maxPermits, until: Number.NEGATIVE_INFINITY }),

  decide(live, rule, now, cost) {
    const state = liveAt(live, rule, now)
    // Idle time stores permits; only admit records it, so a denial (or a peek) changes nothing.
    let next = state.next
    let stored = state.stored
    if (now > next) {
      stored = Math.min(rule.maxPermits, stored + (now - next) / rule.coolDownMs)
      next = now
    }
    const slot = next
    if (cost === 0)
      return decisionOf(rule, rule.limit, true, remainingAt(rule, slot - now), resetIn(slot - now), 0, 0)
    if (slot - now > rule.maxQueueMs) {
      return decisionOf(
        rule,
        rule.limit,
        false,
        remainingAt(rule, slot - now),
        resetIn(slot - now),
        Math.ceil(slot - rule.maxQueueMs - now),
        0,
      )
    }
    const spend = Math.min(cost, stored)
    const after = slot + waitFor(rule, stored, spend) + (cost - spend) * rule.stableMs
    return decisionOf(
      rule,
      rule.limit,
      true,
      remainingAt(rule, after - now),
      resetIn(after - now),
      0,
      Math.ceil(slot - now),
    )
  },

  admit(state, rule, now, cost) {
    freshen(state, rule, now)
    if (now > state.next) {
      state.stored = Math.min(rule.maxPermits, state.stored + (now - state.next) / rule.coolDownMs)
      state.next = now
    }
    const slot = state.next
    const spend = Math.min(cost, state.stored)
    state.next = slot + waitFor(rule, state.stored, spend) + (cost - spend) * rule.stableMs
    state.stored -= spend
    state.until = coldAt(state, rule)
  },

  expiresAt: (state) => state.until,

  refund(state, rule, now, cost) {
    // Past `until` the meter reads as cold and idle: nothing to give back.
    if (now >= state.until) return
    // The next slot goes back by `cost` stable intervals, not before now; stored permits stay spent.
    if (state.next > now) {
      state.next = Math.max(now, state.next - cost * rule.stableMs)
      state.until = coldAt(state, rule)
    }
  },

  refundCall(state, rule, now, cost, next) {
    // `next` is the whole ms the call moved the next slot to (its `at + resetMs`). While it is ahead, every
    // call after it was chained behind it, and `refund` moves the next slot back by `cost` stable intervals
    // (not before now; the call paid at least that much). Once it has come, the call's delay is spent.
    if (next > now) warmUpAlgorithm.refund(state, rule, now, cost)
  },

  penalize(state, rule, now, cost) {
    // The next slot moves on by `cost` stable intervals, spending no stored permit (a penalty must not
    // warm the meter up), at most `cost` intervals past a full queue.
    freshen(state, rule, now)
    if (now > state.next) {
      state.stored = Math.min(rule.maxPermits, state.stored + (now - state.next) / rule.coolDownMs)
      state.next = now
    }
    const moved = state.next + cost * rule.stableMs
    const cap = now + rule.maxQueueMs + cost * rule.stableMs
    state.next = Math.max(state.next, Math.min(moved, cap))
    state.until = coldAt(state, rule)
  },
}

const WARM = new RegExp(`^(${DECIMAL})/(${DURATION}),(${DURATION})(?:x(${DECIMAL}))?(?:~(${DURATION}))?$`)

/** warmUp as core knows it: see kind.ts. */
export const warmUpKind: RuleKindEntry<'warmUp'> = {
  factory: warmUp,
  options: ['ratePerSecond', 'warmUpMs', 'coldFactor', 'maxQueueMs', 'name'],
  identity: [],
  algorithm: warmUpAlgorithm as RuleKindEntry<'warmUp'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: {
    form: 'warmUp:RATE/PER,WARMUP[xCOLD][~MAXQUEUE], e.g. warmUp:100/s,30sx3~1s',
    read(body) {
      const m = WARM.exec(body)
      if (m === null) return undefined
      const spec: Record<string, unknown> = {
        ratePerSecond: perSecond(m[1]!, m[2]!),
        warmUpMs: parseDuration(m[3]!),
      }
      if (m[4] !== undefined) spec.coldFactor = Number(m[4])
      if (m[5] !== undefined) spec.maxQueueMs = parseDuration(m[5])
      return spec
    },
    write(rule) {
      const cold = rule.coldFactor === 3 ? '' : `x${rule.coldFactor}`
      return `${rule.ratePerSecond}/s,${formatDuration(rule.warmUpMs)}${cold}${queueText(rule.maxQueueMs)}`
    },
  },
  // A meter, as leakyBucket: a penalty leaves as long a wait as a consume.
  maxCost: (rule) => Math.floor(MAX_FIGURE / rule.stableMs),
  tooCostly: (rule) => `rule ${rule.name} would queue past 2^50 ms`,
  // The next slot the call left its pointer at.
  refundMark: (_rule, d, at) => String(at + d.resetMs),
}
