/**
 * @module The algorithm of each rule kind, for stores that run rules in process, and the check that a rule
 * is one a factory built.
 */
import type { Rule, RuleDecision, RuleKind } from '../types.ts'
import type { Algorithm } from './algorithm.ts'
import { concurrencyAlgorithm } from './concurrency.ts'
import { fixedWindowAlgorithm } from './fixed-window.ts'
import { leakyBucketAlgorithm } from './leaky-bucket.ts'
import { slidingLogAlgorithm } from './sliding-log.ts'
import { slidingWindowAlgorithm } from './sliding-window.ts'
import { RULE_KINDS, type RuleSpec, ruleFromSpec } from './spec.ts'
import { tokenBucketAlgorithm } from './token-bucket.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'
import { warmUpAlgorithm } from './warm-up.ts'

export const algorithms: { readonly [K in RuleKind]: Algorithm<Extract<Rule, { kind: K }>, unknown> } = {
  fixedWindow: fixedWindowAlgorithm as Algorithm<Extract<Rule, { kind: 'fixedWindow' }>, unknown>,
  slidingLog: slidingLogAlgorithm as Algorithm<Extract<Rule, { kind: 'slidingLog' }>, unknown>,
  slidingWindow: slidingWindowAlgorithm as Algorithm<Extract<Rule, { kind: 'slidingWindow' }>, unknown>,
  tokenBucket: tokenBucketAlgorithm as Algorithm<Extract<Rule, { kind: 'tokenBucket' }>, unknown>,
  leakyBucket: leakyBucketAlgorithm as Algorithm<Extract<Rule, { kind: 'leakyBucket' }>, unknown>,
  concurrency: concurrencyAlgorithm as Algorithm<Extract<Rule, { kind: 'concurrency' }>, unknown>,
  warmUp: warmUpAlgorithm as Algorithm<Extract<Rule, { kind: 'warmUp' }>, unknown>,
}

/** The algorithm that runs `rule`. */
export function algorithmOf(rule: Rule): Algorithm<Rule, unknown> {
  return algorithms[rule.kind] as Algorithm<Rule, unknown>
}

/**
 * The mark by which a store finds the units of one admitted call in `rule`'s state, to give them back
 * (`Store.adjust`, `'refund'`): from the call's `Decision.countedAt` (the store's ms it was counted at) and its
 * RuleDecision `d`. The ms itself for the counting rules; for a meter, the ms the call left its pointer at:
 * leakyBucket its slot (`at + waitMs`), warmUp its next slot (`at + resetMs`). Undefined for a
 * concurrency rule, which refunds do not apply to.
 */
export function refundMark(rule: Rule, d: RuleDecision, at: number): string | undefined {
  switch (rule.kind) {
    case 'concurrency':
      return undefined
    case 'leakyBucket':
      return String(at + d.waitMs)
    case 'warmUp':
      return String(at + d.resetMs)
    default:
      return String(at)
  }
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
