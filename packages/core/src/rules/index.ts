/**
 * @module The algorithm of each rule kind, for stores that run rules in process, and the check that a rule
 * is one a factory built.
 */
import type { Rule, RuleKind } from '../types.ts'
import type { Algorithm } from './algorithm.ts'
import { concurrency, concurrencyAlgorithm } from './concurrency.ts'
import { fixedWindow, fixedWindowAlgorithm } from './fixed-window.ts'
import { leakyBucket, leakyBucketAlgorithm } from './leaky-bucket.ts'
import { slidingLog, slidingLogAlgorithm } from './sliding-log.ts'
import { slidingWindow, slidingWindowAlgorithm } from './sliding-window.ts'
import { tokenBucket, tokenBucketAlgorithm } from './token-bucket.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'
import { warmUp, warmUpAlgorithm } from './warm-up.ts'

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

/** Rules already found to be what their factory builds. */
const checked = new WeakSet<object>()

/**
 * True for a rule a factory built (or the unlimited marker): frozen, and equal field by field to what its
 * factory builds from the rule's own options. A hand-made `{ kind: 'fixedWindow' }` would admit everything
 * or nothing, so it is refused. Each object is checked once, then remembered.
 */
export function isFactoryRule(value: unknown): value is RuleInput {
  if (value === null || typeof value !== 'object') return false
  if (checked.has(value)) return true
  const rule = value as Record<string, unknown>
  if (!Object.isFrozen(value)) return false
  if (value === UNLIMITED) return true
  const factory = Object.hasOwn(factories, rule.kind as string) ? factories[rule.kind as RuleKind] : undefined
  if (factory === undefined) return false
  let built: Record<string, unknown>
  try {
    const options: Record<string, unknown> = {}
    for (const name of OPTION_NAMES[rule.kind as RuleKind]) {
      if (rule[name] !== undefined) options[name] = rule[name]
    }
    built = factory(options as never) as unknown as Record<string, unknown>
  } catch {
    return false
  }
  const names = Object.keys(built)
  if (names.length !== Object.keys(rule).length) return false
  for (const name of names) if (!Object.is(built[name], rule[name])) return false
  checked.add(value)
  return true
}

const factories: { readonly [K in RuleKind]: (options: never) => RuleInput } = {
  fixedWindow,
  slidingLog,
  slidingWindow,
  tokenBucket,
  leakyBucket,
  concurrency,
  warmUp,
}

/** The options each factory takes, read back from a rule to rebuild it. */
const OPTION_NAMES: { readonly [K in RuleKind]: readonly string[] } = {
  fixedWindow: ['limit', 'windowMs', 'name'],
  slidingLog: ['limit', 'windowMs', 'name'],
  slidingWindow: ['limit', 'windowMs', 'buckets', 'name'],
  tokenBucket: ['capacity', 'refillPerSecond', 'name'],
  leakyBucket: ['ratePerSecond', 'maxQueueMs', 'name'],
  concurrency: ['limit', 'leaseMs', 'name'],
  warmUp: ['ratePerSecond', 'warmUpMs', 'coldFactor', 'maxQueueMs', 'name'],
}
