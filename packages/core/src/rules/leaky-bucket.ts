/**
 * @module leakyBucket: calls pass one unit every `1000 / ratePerSecond` ms, in order.
 * `last` is when the last admitted unit passes. A call's slot is `max(now, last + cost * 1000 / rate)`;
 * it is admitted when the slot is at most `maxQueueMs` ahead, and must then wait until its slot
 * (`waitMs`). Adapters hold the request that long: queue-and-wait. `maxQueueMs = 0` is a strict meter.
 */
import { InvalidOptionError } from '../errors.ts'
import { given, integerOption, labelOption, MAX_TIMER_MS, positiveOption, ruleOptions } from '../options.ts'
import type { LeakyBucketRule } from '../types.ts'
import { type Algorithm, decisionOf, limitDecision } from './algorithm.ts'
import { FIXUP_STEPS, MAX_FIGURE } from './bounds.ts'
import { defineRule } from './define.ts'
import { DECIMAL, DURATION, parseDuration, perSecond, queueText } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'

export interface LeakyBucketOptions {
  /**
   * Units passing per second: a number > 0. At most one unit per 2^50 ms is too slow (its wait would
   * leave the range where waits are exact), and `ratePerSecond * maxQueueMs / 1000` (the units a queue
   * holds) must stay within 2^50. With `maxQueueMs: 0`, at most 1000 (see `maxQueueMs`).
   */
  ratePerSecond: number
  /**
   * Longest a call may wait for its slot, in ms: an integer >= 0. Default 0 (no waiting).
   *
   * `0` is a strict meter: a call passes only at a clock reading (whole ms) its slot has reached, so two
   * calls are never closer than `1000 / ratePerSecond` ms, and under a steady stream each gap is that
   * interval rounded up to whole ms. It therefore cannot pass more than one call per ms, and rejects a
   * `ratePerSecond` above 1000; and a rate whose interval is not a whole number of ms (600/s: 1.67 ms)
   * passes at `1000 / ceil(1000 / ratePerSecond)` a second under steady demand (500/s), never faster.
   * With `maxQueueMs >= 1` the queue absorbs those fractions: any accepted rate is metered exactly, one
   * unit every `1000 / ratePerSecond` ms, however many land in one ms.
   */
  maxQueueMs?: number
  /** Shown in headers and decisions. Default: `"<rate>-per-s-queue-<maxQueueMs>ms"`. */
  name?: string
}

/** A rule letting calls through at `ratePerSecond`, each waiting at most `maxQueueMs` for its turn. */
export function leakyBucket(options: LeakyBucketOptions): LeakyBucketRule {
  const o = ruleOptions('leakyBucket', options, leakyBucketKind.options)
  const ratePerSecond = positiveOption('leakyBucket.ratePerSecond', o.ratePerSecond)
  // A held request waits on a timer, so the queue can be no longer than a timer holds.
  const maxQueueMs = integerOption('leakyBucket.maxQueueMs', given(o.maxQueueMs, 0), 0, MAX_TIMER_MS)
  const intervalMs = 1000 / ratePerSecond
  if (intervalMs > MAX_FIGURE) {
    throw new InvalidOptionError(
      'leakyBucket.ratePerSecond',
      ratePerSecond,
      `at least ${1000 / MAX_FIGURE}: a rate so slow that one interval passes 2^50 ms (about 35,700 ` +
        'years) would leave the range where waits are exact and bounded',
    )
  }
  if ((ratePerSecond * maxQueueMs) / 1000 > MAX_FIGURE) {
    throw new InvalidOptionError(
      'leakyBucket.ratePerSecond',
      ratePerSecond,
      `at most ${(MAX_FIGURE * 1000) / maxQueueMs} with maxQueueMs ${maxQueueMs}: a queue of more than ` +
        '2^50 units would leave the range where unit counts are exact and bounded',
    )
  }
  if (maxQueueMs === 0 && ratePerSecond > 1000) {
    throw new InvalidOptionError(
      'leakyBucket.ratePerSecond',
      ratePerSecond,
      'at most 1000 with maxQueueMs 0: a strict meter passes calls only at whole ms, so it cannot pass ' +
        'more than one per ms (give maxQueueMs >= 1 to meter a faster rate exactly)',
    )
  }
  const name = o.name === undefined ? undefined : labelOption('leakyBucket.name', o.name)
  const limit = unitsWithin(ratePerSecond, maxQueueMs) + 1
  return defineRule<LeakyBucketRule>(
    { kind: 'leakyBucket', ratePerSecond, maxQueueMs },
    leakyBucketKind.identity,
    name,
    `${ratePerSecond}-per-s-queue-${maxQueueMs}ms`,
    { policyWindowSeconds: Math.ceil(limit / ratePerSecond), intervalMs, limit },
  )
}

/**
 * `last`, when the last admitted unit passes, is `start + units * 1000 / ratePerSecond`: `start` is the
 * whole ms at which a call last found the bucket drained, `units` the cost queued behind that call.
 * `last` is not kept as one float because summing `1000 / rate` call after call drifts: seven intervals
 * of 1000/7 ms add up to 1000.0000000000001, and a double near `Date.now()` holds only 1/4096 ms, so a
 * slot exactly `maxQueueMs` ahead would be denied and waits would round up a millisecond too far.
 * Every figure below compares a once-rounded span with whole ms, so it is exact.
 */
export interface LeakyBucketState {
  /** -Infinity when nothing has passed yet. */
  start: number
  units: number
  /**
   * When the bucket has drained for a full queue under the numbers it was last written with (-Infinity
   * until something passes). From then on the state reads as a fresh one, whatever the rule's numbers are
   * now (state is keyed by identity, not numbers); the Redis script checks the same time.
   */
  until: number
}

/** ms that `units` units take to pass, from `start`. */
function spanOf(rule: LeakyBucketRule, units: number): number {
  return (units * 1000) / rule.ratePerSecond
}

/** The most units whose intervals fit in `ms`: the largest n >= 0 with `n * 1000 / rate <= ms`. */
export function unitsWithin(ratePerSecond: number, ms: number): number {
  let n = Math.max(0, Math.floor((ms * ratePerSecond) / 1000))
  // The estimate can be a rounding off; settle it with the comparison decide makes. Within 2^50 units it
  // is off by at most one; the loops are capped all the same (a state left by a faster rule can hold more).
  for (let i = 0; i < FIXUP_STEPS && ((n + 1) * 1000) / ratePerSecond <= ms; i++) n++
  for (let i = 0; i < FIXUP_STEPS && n > 0 && (n * 1000) / ratePerSecond > ms; i++) n--
  return n
}

/** Units of cost 1 that could still be admitted at `now`, one after another, behind the queued units. */
function remainingAt(rule: LeakyBucketRule, start: number, units: number, now: number): number {
  const elapsed = now - start
  if (spanOf(rule, units + 1) <= elapsed) return rule.limit
  const more = unitsWithin(rule.ratePerSecond, rule.maxQueueMs + elapsed) - units
  return more < 0 ? 0 : Math.min(more, rule.limit)
}

/** Whole ms from `now` until the bucket is drained: a call of cost 1 would pass at once. */
function drainedIn(rule: LeakyBucketRule, start: number, units: number, now: number): number {
  return Math.max(Math.ceil(spanOf(rule, units + 1)) - (now - start), 0)
}

export const leakyBucketAlgorithm: Algorithm<LeakyBucketRule, LeakyBucketState> = {
  mark: 'queue',
  create: () => ({ start: Number.NEGATIVE_INFINITY, units: 0, until: Number.NEGATIVE_INFINITY }),

  decide(state, rule, now, cost) {
    const fresh = now >= state.until
    const start = fresh ? Number.NEGATIVE_INFINITY : state.start
    const units = fresh ? 0 : state.units
    if (cost === 0) {
      return decisionOf(
        rule,
        rule.limit,
        true,
        remainingAt(rule, start, units, now),
        drainedIn(rule, start, units, now),
        0,
        0,
      )
    }
    // The slot is `start + span`, or `now` when that has passed; `ahead` is ceil(slot - now) before that max.
    const ahead = Math.ceil(spanOf(rule, units + cost)) - (now - start)
    if (ahead > rule.maxQueueMs) {
      const retryAfterMs = ahead - rule.maxQueueMs
      return decisionOf(
        rule,
        rule.limit,
        false,
        remainingAt(rule, start, units, now),
        drainedIn(rule, start, units, now),
        retryAfterMs,
        0,
      )
    }
    if (ahead <= 0)
      return decisionOf(
        rule,
        rule.limit,
        true,
        remainingAt(rule, now, 0, now),
        drainedIn(rule, now, 0, now),
        0,
        0,
      )
    return decisionOf(
      rule,
      rule.limit,
      true,
      remainingAt(rule, start, units + cost, now),
      drainedIn(rule, start, units + cost, now),
      0,
      ahead,
    )
  },

  admit(state, rule, now, cost) {
    if (now < state.until && Math.ceil(spanOf(rule, state.units + cost)) > now - state.start) {
      state.units += cost
    } else {
      state.start = now
      state.units = 0
    }
    state.until = state.start + Math.ceil(spanOf(rule, state.units + rule.limit))
  },

  expiresAt: (state) => state.until,

  refund(state, rule, now, cost) {
    // Past `until` the bucket reads as drained: nothing to give back.
    if (now >= state.until) return
    // `last` goes back by `cost` intervals, but not before now: a slot in the past would let a burst through.
    const elapsed = now - state.start
    if (state.units >= cost && spanOf(rule, state.units - cost) >= elapsed) state.units -= cost
    else if (spanOf(rule, state.units) > elapsed) {
      state.start = now
      state.units = 0
    } else return
    state.until = state.start + Math.ceil(spanOf(rule, state.units + rule.limit))
  },

  refundCall(state, rule, now, cost, slot) {
    // `slot` is the whole ms the call's slot came round (its `at + waitMs`). While it is ahead, every call
    // after it queued right behind it, so moving `last` back by its `cost` intervals (not before now) is
    // what the queue would be without it. Once its slot has come the call has passed: nothing goes back.
    if (slot > now) leakyBucketAlgorithm.refund(state, rule, now, cost)
  },

  penalize(state, rule, now, cost) {
    // `last` goes forward by `cost` intervals (from now, when it has passed), but at most `cost` intervals
    // past a full queue, so penalties cannot push the queue beyond the range where waits are exact.
    const fresh = now >= state.until
    const start0 = fresh ? Number.NEGATIVE_INFINITY : state.start
    const units0 = fresh ? 0 : state.units
    let start = start0
    let units = units0
    if (spanOf(rule, units) >= now - start) units += cost
    else {
      start = now
      units = cost
    }
    const capStart = now + rule.maxQueueMs
    if (start + spanOf(rule, units) > capStart + spanOf(rule, cost)) {
      if (start0 + spanOf(rule, units0) >= capStart + spanOf(rule, cost)) return
      start = capStart
      units = cost
    }
    state.start = start
    state.units = units
    state.until = start + Math.ceil(spanOf(rule, units + rule.limit))
  },
}

/** Where a queued call left the queue (`RuleDecision.queue`): the state it wrote, as text both stores write alike. */
export function queueMark(state: LeakyBucketState): string {
  return `${state.start}:${state.units}`
}

/**
 * Gives a queued call's slot back, only when `mark` (its `RuleDecision.queue`) is still exactly where
 * the queue stands: nobody has queued behind it, so moving `last` back by its `cost` intervals (not before
 * now) hands no one else's slot away. Later callers hold later slots; then nothing changes.
 */
export function unqueue(
  state: LeakyBucketState,
  rule: LeakyBucketRule,
  now: number,
  cost: number,
  mark: string,
): void {
  if (queueMark(state) === mark) leakyBucketAlgorithm.refund(state, rule, now, cost)
}

const LEAKY = new RegExp(`^(${DECIMAL})/(${DURATION})(?:~(${DURATION}))?$`)

/** leakyBucket as core knows it: see kind.ts. */
export const leakyBucketKind: RuleKindEntry<'leakyBucket'> = {
  factory: leakyBucket,
  options: ['ratePerSecond', 'maxQueueMs', 'name'],
  identity: [],
  algorithm: leakyBucketAlgorithm as RuleKindEntry<'leakyBucket'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: {
    form: 'leakyBucket:RATE/PER[~MAXQUEUE], e.g. leakyBucket:5/s~2s',
    read(body) {
      const m = LEAKY.exec(body)
      if (m === null) return undefined
      const spec = { ratePerSecond: perSecond(m[1]!, m[2]!) }
      return m[3] === undefined ? spec : { ...spec, maxQueueMs: parseDuration(m[3]) }
    },
    write: (rule) => `${rule.ratePerSecond}/s${queueText(rule.maxQueueMs)}`,
  },
  // A meter admits a call whose slot is free whatever its cost (the cost delays what follows), so long as
  // that delay stays within 2^50 ms.
  maxCost: (rule, penalty) => Math.floor(MAX_FIGURE / rule.intervalMs) - (penalty ? rule.limit : 0),
  tooCostly: (rule) => `rule ${rule.name} would queue past 2^50 ms`,
  // The slot the call left its pointer at.
  refundMark: (_rule, d, at) => String(at + d.waitMs),
}
