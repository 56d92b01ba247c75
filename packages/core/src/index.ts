/**
 * Exact, fast rate limiting for Node.js: the rules, the limiter, the memory store and the errors, as a
 * user of the library writes them. Adapter authors import `@sluice/core/http`; store authors
 * `@sluice/core/store`. Re-exports only.
 *
 * @module @sluice/core
 */
export type { BlockOptions, BlockPolicy } from './block.ts'
export type { DecisionMessage, HttpAction, HttpMessage, StoreErrorMessage } from './channels.ts'
export {
  DuplicateRuleError,
  ErrorCode,
  InvalidCostError,
  InvalidOptionError,
  InvalidSpecError,
  RateLimitedError,
  SluiceError,
  StoreError,
} from './errors.ts'
export type { HeaderDraft, HeaderOptions } from './http/headers.ts'
export { ipKey } from './http/keys/ip.ts'
export type { KeyPart, KeySpec, MissingKeyPolicy } from './http/keys/keys.ts'
export {
  type AcquireOptions,
  type AdjustOptions,
  type CallOptions,
  createLimiter,
  type Limiter,
  type LimiterOptions,
  type RefundOptions,
  type RuleCosts,
  type RulesAnswer,
  type RulesOption,
  type SettleOptions,
  type StoreErrorPolicy,
} from './limiter/limiter.ts'
export {
  type Overload,
  type OverloadOptions,
  type OverloadSignals,
  type OverloadState,
  type OverloadTicket,
  overload,
} from './overload.ts'
export { type ConcurrencyOptions, concurrency } from './rules/concurrency.ts'
export { type FixedWindowOptions, fixedWindow } from './rules/fixed-window.ts'
export { type LeakyBucketOptions, leakyBucket } from './rules/leaky-bucket.ts'
export { type SlidingLogOptions, slidingLog } from './rules/sliding-log.ts'
export { type SlidingWindowOptions, slidingWindow } from './rules/sliding-window.ts'
export { type RuleSpec, ruleFromSpec } from './rules/spec.ts'
export { formatRuleSpec, parseRuleSpec, parseRuleSpecs } from './rules/text.ts'
export { type TokenBucketOptions, tokenBucket } from './rules/token-bucket.ts'
export type { RuleInput } from './rules/unlimited.ts'
export { type WarmUpOptions, warmUp } from './rules/warm-up.ts'
export { MemoryStore, type MemoryStoreOptions } from './store/memory-store.ts'
export { createLimitTable, type LimitTable, type LimitTableEntries } from './table.ts'
export type {
  Adjustment,
  ConcurrencyRule,
  Costs,
  Decision,
  DecisionReason,
  FixedWindowRule,
  LeakyBucketRule,
  Rule,
  RuleDecision,
  RuleKind,
  SlidingLogRule,
  SlidingWindowRule,
  Store,
  StoreAnswer,
  StoreMode,
  TokenBucketRule,
  UnlimitedRule,
  WarmUpRule,
} from './types.ts'
