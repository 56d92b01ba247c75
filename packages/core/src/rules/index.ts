/**
 * @module The algorithm of each rule kind, for stores that run rules in process.
 */
import type { Rule, RuleKind } from '../types.ts'
import type { Algorithm } from './algorithm.ts'
import { fixedWindowAlgorithm } from './fixed-window.ts'
import { leakyBucketAlgorithm } from './leaky-bucket.ts'
import { slidingLogAlgorithm } from './sliding-log.ts'
import { slidingWindowAlgorithm } from './sliding-window.ts'
import { tokenBucketAlgorithm } from './token-bucket.ts'

export const algorithms: { readonly [K in RuleKind]: Algorithm<Extract<Rule, { kind: K }>, unknown> } = {
  fixedWindow: fixedWindowAlgorithm as Algorithm<Extract<Rule, { kind: 'fixedWindow' }>, unknown>,
  slidingLog: slidingLogAlgorithm as Algorithm<Extract<Rule, { kind: 'slidingLog' }>, unknown>,
  slidingWindow: slidingWindowAlgorithm as Algorithm<Extract<Rule, { kind: 'slidingWindow' }>, unknown>,
  tokenBucket: tokenBucketAlgorithm as Algorithm<Extract<Rule, { kind: 'tokenBucket' }>, unknown>,
  leakyBucket: leakyBucketAlgorithm as Algorithm<Extract<Rule, { kind: 'leakyBucket' }>, unknown>,
}

/** The algorithm that runs `rule`. */
export function algorithmOf(rule: Rule): Algorithm<Rule, unknown> {
  return algorithms[rule.kind] as Algorithm<Rule, unknown>
}
