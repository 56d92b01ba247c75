/**
 * Exact, fast rate limiting for Node.js: the rules, the limiter, the memory store, keys, headers and
 * errors. Re-exports only.
 *
 * @module @sluice/core
 */
export {
  describe as describeValue,
  ErrorCode,
  InvalidCostError,
  InvalidOptionError,
  RateLimitedError,
  SluiceError,
  StoreError,
} from './errors.ts'
export {
  combineHeaders,
  DEFAULT_HEADER_DRAFT,
  HEADER_DRAFTS,
  type HeaderDraft,
  type HeaderOptions,
  type ResolvedHeaderOptions,
  rateLimitHeaders,
  resolveHeaderOptions,
  retryAfterSeconds,
} from './headers.ts'
export { type ClosableResponse, hold, holdResponse } from './hold.ts'
export {
  type CountedBy,
  HTTP_OPTION_NAMES,
  type HttpLimit,
  type HttpLimitOptions,
  type HttpOutcome,
  JSON_TYPE,
  LIMITER_OPTION_NAMES,
  limitedBody,
  limitedDetail,
  PROBLEM_JSON,
  REQUEST_OPTION_NAMES,
  type ResponseBody,
  resolveHttpLimit,
  withCounted,
} from './http.ts'
export {
  compileKey,
  DEFAULT_IPV6_SUBNET,
  ipKey,
  type KeyOptions,
  type KeyPart,
  type KeyResult,
  type KeySpec,
  type MissingKeyPolicy,
  type RequestView,
} from './keys.ts'
export {
  type AcquireOptions,
  type CallOptions,
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MAX_KEY_LENGTH,
  type RulesOption,
  STORE_ERROR_RETRY_MS,
  type StoreErrorPolicy,
  UNLIMITED_DECISION,
} from './limiter.ts'
export {
  isPromise,
  isValidPrefix,
  knownOptions,
  limiterOption,
  prefixOption,
  storeOption,
} from './options.ts'
export { type FixedWindowOptions, fixedWindow } from './rules/fixed-window.ts'
export { type LeakyBucketOptions, leakyBucket } from './rules/leaky-bucket.ts'
export { type SlidingLogOptions, slidingLog } from './rules/sliding-log.ts'
export { MAX_BUCKETS, type SlidingWindowOptions, slidingWindow } from './rules/sliding-window.ts'
export { type TokenBucketOptions, tokenBucket } from './rules/token-bucket.ts'
export { isUnlimited, type RuleInput, UNLIMITED } from './rules/unlimited.ts'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store.ts'
export type {
  Decision,
  FixedWindowRule,
  LeakyBucketRule,
  Rule,
  RuleDecision,
  RuleKind,
  SlidingLogRule,
  SlidingWindowRule,
  Store,
  StoreMode,
  TokenBucketRule,
  UnlimitedRule,
} from './types.ts'
