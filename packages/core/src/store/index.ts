/**
 * For authors of sluice stores (`@sluice/redis` is built on it): the `Store` contract, the rule
 * algorithms' shared pieces, the option validators every sluice factory checks its options with, so a
 * store checks its own options in the same words and with the same codes, and the pieces every limit table
 * shares (the registry of rule kinds, entry checks, the local table state), so a table kept elsewhere
 * checks and serves entries exactly as `createLimitTable` does. Users of the library import
 * from `@sluice/core` instead.
 *
 * @module @sluice/core/store
 */

export {
  type BlockPolicy,
  blockedAnswer,
  blockLength,
  MAX_BLOCK_HISTORY,
} from '../block.ts'
export {
  booleanOption,
  durationLabel,
  functionOption,
  given,
  integerOption,
  isValidPrefix,
  labelOption,
  MAX_TIMER_MS,
  oneOfOption,
  positiveOption,
  prefixOption,
  readOptions,
  storeOption,
} from '../options.ts'
export { type Algorithm, ruleDecision } from '../rules/algorithm.ts'
export { newLease } from '../rules/concurrency.ts'
export { algorithmOf, refundMark } from '../rules/index.ts'
export { RULE_KINDS, type RuleKindEntry } from '../rules/spec.ts'
export {
  checkEntryName,
  type ParsedEntry,
  parseEntry,
  parseEntryJson,
  TABLE_BOUNDS,
  TableState,
  tooManyEntries,
} from '../table.ts'
export type { Adjustment, Store, StoreAnswer, StoreMode, StorePlace } from '../types.ts'
