/**
 * @module slidingLog: one entry per admitted unit, exact over every window.
 * No half-open window of `windowMs` ever holds more than `limit` units: an entry admitted at `t`
 * counts while `now < t + windowMs`. Memory grows with the limit, so it suits small limits best.
 */
import { durationLabel, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { SlidingLogRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, ruleDecision } from './algorithm.ts'
import { UNLIMITED } from './unlimited.ts'

export interface SlidingLogOptions {
  /** Units admitted in any window of `windowMs`: an integer >= 1, or -1 for not limited. */
  limit: number
  /** Window length in ms, an integer >= 1. */
  windowMs: number
  /** Shown in headers and decisions. Default: `"<limit>-per-<window>"`. */
  name?: string
}

/** A rule admitting at most `limit` units in every window of `windowMs`, exactly. */
export function slidingLog(options: SlidingLogOptions): SlidingLogRule | UnlimitedRule {
  const o = ruleOptions('slidingLog', options, ['limit', 'windowMs', 'name'])
  const limit = limitOption('slidingLog.limit', o.limit)
  const windowMs = integerOption('slidingLog.windowMs', o.windowMs, 1)
  if (limit === -1) return UNLIMITED
  return Object.freeze({
    kind: 'slidingLog',
    id: `slidingLog:${limit}:${windowMs}`,
    name:
      o.name === undefined
        ? `${limit}-per-${durationLabel(windowMs)}`
        : labelOption('slidingLog.name', o.name),
    policyWindowSeconds: Math.ceil(windowMs / 1000),
    limit,
    windowMs,
  })
}

/**
 * The log, oldest first, run-length encoded: `counts[i]` units were admitted at `times[i]`.
 * Entries before `head` have expired and are compacted away lazily.
 */
export interface SlidingLogState {
  times: number[]
  counts: number[]
  head: number
  /** Units in the live entries (from `head` on). */
  total: number
}

/** Drops entries that no longer count at `now`. */
function expire(state: SlidingLogState, rule: SlidingLogRule, now: number): void {
  const { times, counts } = state
  const oldestLive = now - rule.windowMs
  let head = state.head
  while (head < times.length && times[head]! <= oldestLive) {
    state.total -= counts[head]!
    head++
  }
  if (head > 32 && head * 2 > times.length) {
    times.splice(0, head)
    counts.splice(0, head)
    head = 0
  }
  state.head = head
}

export const slidingLogAlgorithm: Algorithm<SlidingLogRule, SlidingLogState> = {
  create: () => ({ times: [], counts: [], head: 0, total: 0 }),

  decide(state, rule, now, cost) {
    expire(state, rule, now)
    const { times, counts, total } = state
    const allowed = total + cost <= rule.limit
    if (allowed) {
      // The newest entry is this call's, or with cost 0 the newest already logged.
      const resetMs =
        cost > 0 ? rule.windowMs : total > 0 ? times[times.length - 1]! + rule.windowMs - now : 0
      return ruleDecision(rule, true, rule.limit - total - cost, resetMs, 0, 0)
    }
    // Denied: the call fits once enough of the oldest units have expired.
    const mustExpire = total + cost - rule.limit
    let expired = 0
    let i = state.head
    while (expired + counts[i]! < mustExpire) expired += counts[i++]!
    const newest = times[times.length - 1]!
    return ruleDecision(
      rule,
      false,
      rule.limit - total,
      newest + rule.windowMs - now,
      times[i]! + rule.windowMs - now,
      0,
    )
  },

  admit(state, _rule, now, cost) {
    const last = state.times.length - 1
    if (last >= state.head && state.times[last] === now) state.counts[last]! += cost
    else {
      state.times.push(now)
      state.counts.push(cost)
    }
    state.total += cost
  },

  expiresAt: (state, rule) =>
    state.times.length > state.head
      ? state.times[state.times.length - 1]! + rule.windowMs
      : Number.NEGATIVE_INFINITY,
}
