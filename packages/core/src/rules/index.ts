/**
 * @module What core asks of a rule, by its kind's entry (spec.ts `RULE_KINDS`): its algorithm, for stores
 * that run rules in process, its refund mark and its largest cost; and the check that a rule is one a
 * factory built.
 */
import type { Rule, RuleDecision } from '../types.ts'
import type { Algorithm } from './algorithm.ts'
import { kindOf, RULE_KINDS, type RuleSpec, ruleFromSpec } from './spec.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'

/** The algorithm that runs `rule`. */
export function algorithmOf(rule: Rule): Algorithm<Rule, unknown> {
  return kindOf(rule).algorithm
}

/** Any rule's answer, by its kind's entry: for the answers no algorithm makes (a blocked key's). */
export function ruleDecision(
  rule: Rule,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  waitMs: number,
): RuleDecision {
  return kindOf(rule).decision(rule, allowed, remaining, resetMs, retryAfterMs, waitMs)
}

/**
 * The mark by which a store finds the units of one admitted call in `rule`'s state, to give them back
 * (`Store.adjust`, `'refund'`): from the call's `Decision.countedAt` (the store's ms it was counted at) and its
 * RuleDecision `d`. The ms itself for the counting rules; for a meter, the ms the call left its pointer at:
 * leakyBucket its slot (`at + waitMs`), warmUp its next slot (`at + resetMs`). Undefined for a
 * concurrency rule, which refunds do not apply to. Each kind's entry says which (kind.ts).
 */
export function refundMark(rule: Rule, d: RuleDecision, at: number): string | undefined {
  return kindOf(rule).refundMark(rule, d, at)
}

/**
 * Whether a denial by `rule` is certain until its `retryAfterMs`, so a cache of denials may keep it until
 * then: each kind's entry says (kind.ts); a concurrency rule's is only an upper bound, as a release frees
 * units at once.
 */
export function certainRetry(rule: Rule): boolean {
  return kindOf(rule).certainRetry
}

/**
 * The most units one consume (`penalty` false) or one penalty may bring to `rule`, so that the
 * limiter refuses the rest with a coded error before any store is asked: each kind's entry says (kind.ts),
 * within the range bounds.ts holds.
 */
export function maxCost(rule: Rule, penalty: boolean): number {
  return kindOf(rule).maxCost(rule, penalty)
}

/** Why a cost above `rule`'s `maxCost` is refused: each kind's entry says (kind.ts). */
export function tooCostly(rule: Rule, penalty: boolean): string {
  return kindOf(rule).tooCostly(rule, penalty)
}

/** Rules already found to be what their factory builds. */
const checked = new WeakSet<object>()

/**
 * True for a rule a factory built (or the unlimited marker): frozen, and equal field by field (enumerable or
 * not) to what its factory builds from the rule's spec, its enumerable fields. A hand-made
 * `{ kind: 'fixedWindow' }` would admit everything or nothing, so it is refused. Each object is checked
 * once, then remembered.
 */
export function isFactoryRule(value: unknown): value is RuleInput {
  if (value === null || typeof value !== 'object') return false
  if (checked.has(value)) return true
  if (!Object.isFrozen(value)) return false
  if (value === UNLIMITED) return true
  const kind = (value as { kind?: unknown }).kind
  if (typeof kind !== 'string' || !Object.hasOwn(RULE_KINDS, kind)) return false
  let built: object
  try {
    built = ruleFromSpec(value as RuleSpec)
  } catch {
    return false
  }
  const fields = Reflect.ownKeys(built)
  if (fields.length !== Reflect.ownKeys(value).length) return false
  for (const field of fields) {
    const want = Object.getOwnPropertyDescriptor(built, field)!
    const have = Object.getOwnPropertyDescriptor(value, field)
    if (have === undefined || have.enumerable !== want.enumerable || !Object.is(have.value, want.value)) {
      return false
    }
  }
  checked.add(value)
  return true
}
