/**
 * For authors of sluice stores (`@sluice/redis` is built on it): the `Store` contract, the rule
 * algorithms' shared pieces (a rule decision, a refund's mark, a lease, a blocked answer), and the pieces
 * every limit table shares (entry checks and bounds, the local table state), so a table kept elsewhere, and a
 * tool that edits one, checks and serves entries exactly as `createLimitTable` does. A store checks its own
 * options with `@sluice/core/options`, in the same words and with the same codes as every sluice factory.
 * What no store imports is not exported here, but for `ruleDecision`, a rule's answer in sluice's shape for
 * a store that computes answers itself (Redis's replies are decoded into literals, on its hot path). The
 * memory store itself lives in this folder (`@sluice/core` exports it). Users of the library import from
 * `@sluice/core` instead.
 *
 * @module @sluice/core/store
 */

export { type BlockPolicy, blockedAnswer } from '../block.ts'
export type { Algorithm } from '../rules/algorithm.ts'
export { newLease } from '../rules/concurrency.ts'
export { certainRetry, refundMark, ruleDecision } from '../rules/index.ts'
export {
  checkEntryName,
  type ParsedEntry,
  parseEntry,
  parseEntryJson,
  TABLE_BOUNDS,
  TableState,
  tooManyEntries,
} from '../table.ts'
export type { Adjustment, Costs, Store, StoreAnswer, StoreMode, StorePlace } from '../types.ts'
