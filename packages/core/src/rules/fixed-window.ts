/**
 * @module fixedWindow: a count per window, windows aligned to multiples of `windowMs` since the epoch.
 * Cheapest rule there is. Its known weakness is kept on purpose: a burst across a window edge can
 * admit up to twice the limit within `windowMs`.
 */
import { durationLabel, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { FixedWindowRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, alignedStart, atLeastZero, decisionOf, limitDecision } from './algorithm.ts'
import { countingMaxCost, countingTooCostly } from './bounds.ts'
import { defineRule } from './define.ts'
import { limitPerWindowText } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface FixedWindowOptions {
  /** Units admitted per window: an integer >= 1, or -1 for not limited. */
  limit: number
  /** Window length in ms, an integer >= 1. Windows start at multiples of it since the epoch. */
  windowMs: number
  /** Shown in headers and decisions. Default: `"<limit>-per-<window>"`, e.g. `"100-per-60s"`. */
  name?: string
}

/** A rule admitting `limit` units per aligned window of `windowMs`. */
export function fixedWindow(options: FixedWindowOptions): FixedWindowRule | UnlimitedRule {
  const o = ruleOptions('fixedWindow', options, fixedWindowKind.options)
  const limit = limitOption('fixedWindow.limit', o.limit)
  const windowMs = integerOption('fixedWindow.windowMs', o.windowMs, 1)
  const name = o.name === undefined ? undefined : labelOption('fixedWindow.name', o.name)
  if (limit === -1) return UNLIMITED
  return defineRule<FixedWindowRule>(
    { kind: 'fixedWindow', limit, windowMs },
    fixedWindowKind.identity,
    name,
    `${limit}-per-${durationLabel(windowMs)}`,
    { policyWindowSeconds: Math.ceil(windowMs / 1000) },
  )
}

export interface FixedWindowState {
  /** Start of the window `count` belongs to. */
  start: number
  count: number
}

export const fixedWindowAlgorithm: Algorithm<FixedWindowRule, FixedWindowState> = {
  mark: undefined,
  create: (rule, now) => ({ start: alignedStart(now, rule.windowMs), count: 0 }),

  decide(state, rule, now, cost) {
    const start = alignedStart(now, rule.windowMs)
    const count = state.start === start ? state.count : 0
    const allowed = count + cost <= rule.limit
    const after = allowed ? count + cost : count
    // Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
    const resetMs = after === 0 ? 0 : start + rule.windowMs - now
    // A count past the limit (lowered, or penalized) leaves nothing, not less.
    return decisionOf(
      rule,
      rule.limit,
      allowed,
      atLeastZero(rule.limit - after),
      resetMs,
      allowed ? 0 : resetMs,
      0,
    )
  },

  admit(state, rule, now, cost) {
    const start = alignedStart(now, rule.windowMs)
    if (state.start !== start) {
      state.start = start
      state.count = 0
    }
    state.count += cost
  },

  expiresAt: (state, rule) => state.start + rule.windowMs,

  refund(state, rule, now, cost) {
    // Only the current window's count: units of a window that is over no longer count anyway.
    if (state.start === alignedStart(now, rule.windowMs)) state.count = Math.max(state.count - cost, 0)
  },

  refundCall(state, rule, now, cost, at) {
    // The call's units count only in the window it was counted in, and only while that window lasts.
    if (alignedStart(at, rule.windowMs) === alignedStart(now, rule.windowMs)) {
      fixedWindowAlgorithm.refund(state, rule, now, cost)
    }
  },

  penalize(state, rule, now, cost) {
    const start = alignedStart(now, rule.windowMs)
    if (state.start !== start) {
      state.start = start
      state.count = 0
    }
    state.count = Math.max(state.count, Math.min(state.count + cost, rule.limit + cost))
  },
}

/** fixedWindow as core knows it: see kind.ts. */
export const fixedWindowKind: RuleKindEntry<'fixedWindow'> = {
  factory: fixedWindow,
  options: ['limit', 'windowMs', 'name'],
  identity: ['windowMs'],
  algorithm: fixedWindowAlgorithm as RuleKindEntry<'fixedWindow'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: limitPerWindowText('fixedWindow:LIMIT/WINDOW, e.g. fixedWindow:1000/1h'),
  maxCost: countingMaxCost,
  tooCostly: countingTooCostly,
  refundMark: (_rule, _d, at) => String(at),
}
