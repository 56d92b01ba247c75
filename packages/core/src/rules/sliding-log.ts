/**
 * @module slidingLog: a log of admitted calls with their costs, exact over every window.
 * No half-open window of `windowMs` ever holds more than `limit` units: a unit admitted at `t`
 * counts while `now < t + windowMs`. Memory grows with the calls admitted in a window (one entry per call
 * in Redis, per ms here), never with their cost; a call's work grows with the log's logarithm only.
 */
import { InvalidOptionError } from '../errors.ts'
import { durationLabel, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { SlidingLogRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, decisionOf, limitDecision } from './algorithm.ts'
import { countingMaxCost, countingTooCostly, MAX_FIGURE } from './bounds.ts'
import { defineRule } from './define.ts'
import { limitPerWindowText } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface SlidingLogOptions {
  /** Units admitted in any window of `windowMs`: an integer from 1 to 2^50, or -1 for not limited. */
  limit: number
  /** Window length in ms, an integer >= 1. */
  windowMs: number
  /** Shown in headers and decisions. Default: `"<limit>-per-<window>"`. */
  name?: string
}

/** A rule admitting at most `limit` units in every window of `windowMs`, exactly. */
export function slidingLog(options: SlidingLogOptions): SlidingLogRule | UnlimitedRule {
  const o = ruleOptions('slidingLog', options, slidingLogKind.options)
  const limit = limitOption('slidingLog.limit', o.limit)
  const windowMs = integerOption('slidingLog.windowMs', o.windowMs, 1)
  const name = o.name === undefined ? undefined : labelOption('slidingLog.name', o.name)
  if (limit === -1) return UNLIMITED
  // The Redis log keeps running sums of units modulo 2^52; a window's units must stay well below that.
  if (limit > MAX_FIGURE) {
    throw new InvalidOptionError('slidingLog.limit', limit, 'an integer from 1 to 2^50, or -1')
  }
  return defineRule<SlidingLogRule>(
    { kind: 'slidingLog', limit, windowMs },
    slidingLogKind.identity,
    name,
    `${limit}-per-${durationLabel(windowMs)}`,
    { policyWindowSeconds: Math.ceil(windowMs / 1000) },
  )
}

/**
 * The log, oldest first: one entry per ms in which calls were admitted, with a running sum of units, so
 * that both the live total and the entry a denied call waits for are found by binary search: no call
 * walks the log, however long it is. `ends[i]` is the units admitted from the start of the arrays
 * through entry `i`. Entries before `head` have expired and are compacted away lazily.
 */
export interface SlidingLogState {
  times: number[]
  ends: number[]
  head: number
}

/** Units admitted before entry `i`. */
function endBefore(state: SlidingLogState, i: number): number {
  return i === 0 ? 0 : state.ends[i - 1]!
}

/** Units in the live entries (from `head` on). */
function totalOf(state: SlidingLogState): number {
  const last = state.ends.length - 1
  return last < state.head ? 0 : state.ends[last]! - endBefore(state, state.head)
}

/** The running sums are rebased when they pass this, so they stay exact integers. */
const REBASE_AT = 2 ** 51

/** Drops entries that no longer count at `now`: a binary search for the first live one. */
function expire(state: SlidingLogState, rule: SlidingLogRule, now: number): void {
  const { times, ends } = state
  const oldestLive = now - rule.windowMs
  let lo = state.head
  let hi = times.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (times[mid]! <= oldestLive) lo = mid + 1
    else hi = mid
  }
  const head = lo
  // Compaction moves every entry: done only once half the arrays have expired, so it is amortised over
  // the calls that logged them (or when the sums grow large, which takes 2^51 units since the last one).
  const base = endBefore(state, head)
  if ((head > 32 && head * 2 > times.length) || base > REBASE_AT) {
    times.splice(0, head)
    ends.splice(0, head)
    for (let i = 0; i < ends.length; i++) ends[i]! -= base
    state.head = 0
    return
  }
  state.head = head
}

export const slidingLogAlgorithm: Algorithm<SlidingLogRule, SlidingLogState> = {
  mark: undefined,
  create: () => ({ times: [], ends: [], head: 0 }),

  decide(state, rule, now, cost) {
    expire(state, rule, now)
    const { times, ends, head } = state
    const total = totalOf(state)
    const allowed = total + cost <= rule.limit
    if (allowed) {
      // The newest entry is this call's, or with cost 0 the newest already logged.
      const resetMs =
        cost > 0 ? rule.windowMs : total > 0 ? times[times.length - 1]! + rule.windowMs - now : 0
      return decisionOf(rule, rule.limit, true, rule.limit - total - cost, resetMs, 0, 0)
    }
    // Denied: the call fits once the oldest `mustExpire` units have expired, that is once the first entry
    // whose running sum reaches them has (a binary search: the sums grow along the log).
    const mustExpire = total + cost - rule.limit
    const base = endBefore(state, head)
    let lo = head
    let hi = ends.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (ends[mid]! - base >= mustExpire) hi = mid
      else lo = mid + 1
    }
    const newest = times[times.length - 1]!
    return decisionOf(
      rule,
      rule.limit,
      false,
      // Past the limit when it was lowered or penalized: nothing is left, not less.
      atLeastZero(rule.limit - total),
      newest + rule.windowMs - now,
      times[lo]! + rule.windowMs - now,
      0,
    )
  },

  admit(state, _rule, now, cost) {
    const last = state.times.length - 1
    if (last >= state.head && state.times[last] === now) state.ends[last]! += cost
    else {
      state.times.push(now)
      state.ends.push((last < 0 ? 0 : state.ends[last]!) + cost)
    }
  },

  refund(state, rule, now, cost) {
    expire(state, rule, now)
    const total = totalOf(state)
    if (total === 0) return
    const { times, ends, head } = state
    // The units that stay end at `keep` in the running sums; the newest entry whose sum passes it is cut
    // down to it and every newer one dropped, found by binary search (no walk over the entries).
    const keep = ends[ends.length - 1]! - Math.min(cost, total)
    let lo = head
    let hi = ends.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (ends[mid]! > keep) hi = mid
      else lo = mid + 1
    }
    const length = keep > endBefore(state, lo) ? lo + 1 : lo
    if (length > lo) ends[lo] = keep
    times.length = length
    ends.length = length
  },

  refundCall(state, rule, now, cost, at) {
    expire(state, rule, now)
    // The call's entry is the one logged at `at`; it is given back only while it is the newest live entry.
    // Units of an older entry sit under the running sums of every newer one, which a bounded refund cannot
    // rewrite: they stay counted until they leave the window (stricter than exact, never looser).
    const last = state.times.length - 1
    if (last < state.head || state.times[last] !== at) return
    const units = state.ends[last]! - endBefore(state, last)
    slidingLogAlgorithm.refund(state, rule, now, Math.min(cost, units))
  },

  penalize(state, rule, now, cost) {
    expire(state, rule, now)
    const total = totalOf(state)
    const add = Math.min(cost, rule.limit + cost - total)
    if (add > 0) slidingLogAlgorithm.admit(state, rule, now, add)
  },

  expiresAt: (state, rule) =>
    state.times.length > state.head
      ? state.times[state.times.length - 1]! + rule.windowMs
      : Number.NEGATIVE_INFINITY,
}

/** slidingLog as core knows it: see kind.ts. */
export const slidingLogKind: RuleKindEntry<'slidingLog'> = {
  factory: slidingLog,
  options: ['limit', 'windowMs', 'name'],
  identity: ['windowMs'],
  algorithm: slidingLogAlgorithm as RuleKindEntry<'slidingLog'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: limitPerWindowText('slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s'),
  maxCost: countingMaxCost,
  tooCostly: countingTooCostly,
  refundMark: (_rule, _d, at) => String(at),
}
