/**
 * @module The shapes every sluice package agrees on: rules, decisions and the store seam.
 * Rules are plain, frozen data; stores apply them; the limiter composes what stores answer.
 */

/** The algorithms sluice implements. A rule's `kind` names one of them. */
export type RuleKind =
  | 'fixedWindow'
  | 'slidingLog'
  | 'slidingWindow'
  | 'tokenBucket'
  | 'leakyBucket'
  | 'concurrency'
  | 'warmUp'
  | 'quota'

interface RuleBase {
  /**
   * The rule's state identity: its kind, its shape (`windowMs`, `buckets`) and its name when one was given,
   * never its limit, capacity or rate: `"fixedWindow:60000"`, `"slidingWindow:60000:10@burst"`. Stores key
   * a rule's state by it, so a rule whose limit changes keeps its counts. Not part of the rule's JSON.
   */
  readonly id: string
  /**
   * Shown in headers and decisions; default derived from the numbers, e.g. `"100-per-60s"`. Only a name
   * given to the factory is part of the rule's JSON and of its state identity.
   */
  readonly name: string
  /**
   * The window the `RateLimit-Policy` header reports for this rule, in whole seconds
   * (for buckets: the time a drained bucket takes to refill).
   */
  readonly policyWindowSeconds: number
}

/** Counts per window aligned to multiples of `windowMs` since the epoch. */
export interface FixedWindowRule extends RuleBase {
  readonly kind: 'fixedWindow'
  readonly limit: number
  readonly windowMs: number
}

/** One entry per admitted unit; exact over every window of `windowMs`. */
export interface SlidingLogRule extends RuleBase {
  readonly kind: 'slidingLog'
  readonly limit: number
  readonly windowMs: number
}

/** `buckets` counters of `windowMs / buckets` each, aligned to multiples of the bucket size. */
export interface SlidingWindowRule extends RuleBase {
  readonly kind: 'slidingWindow'
  readonly limit: number
  readonly windowMs: number
  readonly buckets: number
  /** `windowMs / buckets`, an integer. */
  readonly bucketMs: number
}

/** Tokens refill continuously up to `capacity`; a call takes `cost` tokens. */
export interface TokenBucketRule extends RuleBase {
  readonly kind: 'tokenBucket'
  readonly capacity: number
  readonly refillPerSecond: number
}

/** Calls pass one by one at `ratePerSecond`; a call may queue for up to `maxQueueMs`. */
export interface LeakyBucketRule extends RuleBase {
  readonly kind: 'leakyBucket'
  readonly ratePerSecond: number
  readonly maxQueueMs: number
  /** `1000 / ratePerSecond`: the gap between two passing units, in ms (a float). */
  readonly intervalMs: number
  /** Units a drained bucket admits at once: `floor(maxQueueMs / intervalMs) + 1`. */
  readonly limit: number
}

/** At most `limit` admitted units leased at once; each admitted call's lease lasts until released or `leaseMs` after. */
export interface ConcurrencyRule extends RuleBase {
  readonly kind: 'concurrency'
  readonly limit: number
  readonly leaseMs: number
}

/**
 * A meter with a cold start: `ratePerSecond` once warm, `coldFactor` times slower
 * when cold, warming up over `warmUpMs` of steady demand. The derived figures are floats in ms.
 */
export interface WarmUpRule extends RuleBase {
  readonly kind: 'warmUp'
  readonly ratePerSecond: number
  readonly warmUpMs: number
  readonly coldFactor: number
  readonly maxQueueMs: number
  /** As leakyBucket's: units a drained meter admits at once at the stable rate. */
  readonly limit: number
  /** `1000 / ratePerSecond`. */
  readonly stableMs: number
  /** `stableMs × coldFactor`. */
  readonly coldMs: number
  /** `0.5 × warmUpMs / stableMs`: stored permits below this cost `stableMs` each. */
  readonly thresholdPermits: number
  /** `thresholdPermits + 2 × warmUpMs / (stableMs + coldMs)`: the most permits stored (cold). */
  readonly maxPermits: number
  /** `(coldMs − stableMs) / (maxPermits − thresholdPermits)`. */
  readonly slope: number
  /** `warmUpMs / maxPermits`: ms of idle time that store one permit. */
  readonly coolDownMs: number
}

/** A calendar period's length: what `quota`'s `per` names. */
export type QuotaPer = 'hour' | 'day' | 'week' | 'month' | 'year'

/**
 * Counts per calendar period (`per`) in the time zone `timeZone` (an IANA name, kept as `Intl` resolves
 * it), weeks starting on `weekStartsOn` (1 = Monday … 7 = Sunday): a fixed window whose edges are the
 * zone's calendar edges (see rules/quota.ts).
 */
export interface QuotaRule extends RuleBase {
  readonly kind: 'quota'
  readonly limit: number
  readonly per: QuotaPer
  readonly timeZone: string
  readonly weekStartsOn: number
}

/**
 * One limiting rule: an algorithm with its numbers. Plain data, frozen. Its enumerable fields are its spec
 * (`kind`, the factory's options, `name` when given), so `JSON.stringify(rule)` is what `ruleFromSpec`
 * takes; derived fields (`id`, a default `name`, `policyWindowSeconds`, ...) are non-enumerable.
 */
export type Rule =
  | FixedWindowRule
  | SlidingLogRule
  | SlidingWindowRule
  | TokenBucketRule
  | LeakyBucketRule
  | ConcurrencyRule
  | WarmUpRule
  | QuotaRule

/** The marker for "not limited": `limit: -1` in a rule factory returns this. */
export interface UnlimitedRule {
  readonly kind: 'unlimited'
  readonly name: 'unlimited'
}

/** What one rule says about one call. Every ms figure is an integer, rounded up. */
export interface RuleDecision {
  /** The rule's name. */
  readonly rule: string
  readonly allowed: boolean
  /** Units the rule admits in a full window (capacity for buckets). */
  readonly limit: number
  /** Units left under this rule after this call; never negative. */
  readonly remaining: number
  /** Until this rule is fully replenished. */
  readonly resetMs: number
  /** 0 when allowed; else the earliest time the same call could be admitted. */
  readonly retryAfterMs: number
  /** leakyBucket: how long the caller must hold before proceeding; 0 otherwise. */
  readonly waitMs: number
  /** The rule's `policyWindowSeconds`, for the `RateLimit-Policy` header. */
  readonly windowSeconds: number
  /**
   * leakyBucket, a consumed call told to wait: where the call left the queue, so that a caller who stops
   * waiting can give its slot back while nobody has queued behind it (`Store.adjust` with `'unqueue'`).
   */
  readonly queue?: string
  /** concurrency, a consumed call admitted: the lease its units are held under. */
  readonly lease?: string
  /** The quota unit of the `RateLimit-Policy` item when it is not requests: `'concurrent-requests'`. */
  readonly unit?: 'concurrent-requests'
  /**
   * quota: the units the current period had counted before this call (past `limit` after a penalty or a
   * lowered limit, where `remaining` stays 0): a usage page shows `used`, and `limit − used` left.
   */
  readonly used?: number
  /** quota: when the current period ends and its count starts again from 0, in ms since the epoch on the store's clock. */
  readonly resetsAt?: number
}

/**
 * Who decided a call: `'rules'`, the rules in the store; `'unlimited'`, no rule applied to the key;
 * `'cache'`, the store's memory of a recent denial; `'blocked'`, an active block on the key;
 * `'store-error'`, the `onStoreError` policy after the store failed; `'insurance'`, the limiter given as
 * `onStoreError`; `'prefetch'`, units a Redis store fetched ahead; `'overload'`, an `overload()` guard shed
 * the request before any rule was asked (the server itself was overloaded).
 */
export type DecisionReason =
  | 'rules'
  | 'unlimited'
  | 'cache'
  | 'blocked'
  | 'store-error'
  | 'insurance'
  | 'prefetch'
  | 'overload'

/** What a limiter answers for one call. Plain data: a JSON round trip keeps every field (`Infinity` reads back as `null`). */
export interface Decision {
  readonly allowed: boolean
  /** Of the deciding rule. `Infinity` when nothing limits the key. */
  readonly limit: number
  /** Units left under the deciding rule after this call (never negative). */
  readonly remaining: number
  /** Until the deciding rule is fully replenished. */
  readonly resetMs: number
  /** 0 when allowed; else the earliest time the same call could be admitted. */
  readonly retryAfterMs: number
  /** leakyBucket only: how long the caller must hold before proceeding. */
  readonly waitMs: number
  /**
   * The deciding rule's name: the denying one (longest retry), else the one with least remaining.
   * `'unlimited'` when no rule limits the key; `''` when the store failed (`reason: 'store-error'`).
   */
  readonly rule: string
  /** One per rule, in the order the rules were given. Empty when no rule decided. */
  readonly rules: readonly RuleDecision[]
  /** Who decided; see `DecisionReason`. */
  readonly reason: DecisionReason
  /** concurrency rules only, when admitted: the id to hand to `limiter.release(key, decision)`. */
  readonly lease?: string
  /**
   * An admitted call counted by the store: the store's ms its units were counted at (for units a Redis
   * store prefetched, when their batch was counted). `limiter.refund(key, { decision })` finds the call by it.
   */
  readonly countedAt?: number
  /**
   * An admitted call counted by the store whose cost was not 1: what it reserved, as the store was asked
   * (a number under every rule, or one per rule in the order of `rules`); absent, 1 under every rule.
   * `limiter.settle(key, { decision, cost })` reads it.
   */
  readonly cost?: number | Costs
}

/** One integer per rule of a call, in the rules' order: a call's per-rule costs, or a settle's amounts. */
export type Costs = readonly number[]

/** What a store does with a call: `'consume'` records it when admitted, `'peek'` never records. */
export type StoreMode = 'consume' | 'peek'

/**
 * What `Store.adjust` does to a key's rule state, `cost` units at a time:
 * - `'refund'` gives back up to `cost` units (never below empty): the newest ones; or, with `marks`, only
 *   the units of the call each mark names (`refundMark`), while they still count in its rule's state;
 * - `'penalize'` counts `cost` units whatever the rules say (at most `cost` past a rule's limit);
 * - `'unqueue'` gives a queued leakyBucket call's slot back, only where the queue is still exactly as that
 *   call left it (`RuleDecision.queue`); other rules are left alone;
 * - `'release'` ends a concurrency lease (`RuleDecision.lease`) before its time; other rules are left alone;
 * - `'settle'` makes one admitted call's reservation its true cost, each rule by its own signed amount
 *   (`cost` is then one integer per rule, in order): below 0 gives back that many of the call's units
 *   named by its mark, as `'refund'` with `marks` does (only while they still count); above 0 counts that
 *   many whatever the rule says, as `'penalize'` does; 0 leaves the rule alone.
 */
export type Adjustment = 'refund' | 'penalize' | 'unqueue' | 'release' | 'settle'

/**
 * A store's answer: one RuleDecision per rule, in order. A store that answered without running the rules
 * says so in `reason` (its denied-key cache: `'cache'`); without it the rules decided. A consume the rules
 * admitted says in `countedAt` the store's ms its units were counted at (`Decision.countedAt`; not `at`,
 * which every array has).
 */
export type StoreAnswer = readonly RuleDecision[] & {
  readonly reason?: DecisionReason
  readonly countedAt?: number
}

/**
 * Where rule state lives. A store applies all of a call's rules to one key atomically:
 * when any rule denies, no rule's state changes. It returns one RuleDecision per rule, in order.
 * `prefix` is the limiter's namespace: the same key under two prefixes never shares state.
 * `rules` is never empty and `cost` is a valid integer no rule finds impossible, or, for a call with per-rule
 * costs, one such integer per rule, in order (`Costs`).
 */
export interface Store {
  /**
   * `block`, when the limiter has one: a key already blocked is answered `reason: 'blocked'` without
   * running the rules; a consume the rules deny begins a block (in the same atomic step), and its denying
   * rules report `retryAfterMs` until the block ends. A store that does not know blocks ignores it.
   */
  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Promise<StoreAnswer> | StoreAnswer
  /**
   * Changes the state of `rules` for `key` outside a call (see `Adjustment`), atomically. `cost` is an
   * integer from 1 to 2^50 and may exceed a rule's limit, or one such integer per rule (`Costs`: an
   * `'unqueue'` of a call with per-rule costs); for `'settle'` it is always one integer per rule, in order,
   * from −2^50 to 2^50, the rules it changes only. For `'penalize'` it answers what a peek of cost 1 (with `block`)
   * answers right after; for the others, `'settle'` included, nothing. `marks` holds, per rule in order, what
   * the call left: its `RuleDecision.queue` for `'unqueue'`, its `RuleDecision.lease` for `'release'`, its
   * `refundMark` for `'refund'` (a rule whose mark is undefined gives nothing back).
   * Optional: a store without it cannot refund or penalize.
   */
  adjust?(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): Promise<StoreAnswer | undefined> | StoreAnswer | undefined
  /**
   * Forgets the state of `rules` for `key`, and the key's block with its escalation (`rules` may then be
   * empty). A store may forget more of the key (the memory store forgets the whole key; the Redis store
   * deletes exactly the keys of `rules` and the block).
   */
  reset(prefix: string, key: string, rules: readonly Rule[]): Promise<void> | void
  /** Stops the timers and closes the connections the store owns. */
  close?(): Promise<void> | void
  /**
   * Where the store keeps its state, when other store objects can write the same place: a RedisStore
   * names its client and its own prefix. Two limiters left on the default prefix whose stores name one
   * place are refused (`ERR_SLUICE_PREFIX_COLLISION`), as two on one store object are, instead of silently
   * sharing counts. Default: the store object is its own place.
   */
  readonly place?: StorePlace
}

/** A place state is kept (see `Store.place`): an object standing for it, and a namespace inside it. */
export interface StorePlace {
  readonly owner: object
  readonly namespace: string
}

/** A `block` option, checked and resolved: what a limiter hands its store with every call. */
export interface BlockPolicy {
  readonly ms: number
  readonly factor: number
  readonly maxMs: number
  readonly forgetMs: number
  /** The block starts a key keeps: enough for the count to reach the block that lasts `maxMs`. */
  readonly keep: number
}
