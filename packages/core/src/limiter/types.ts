/**
 * @module The limiter's public shapes: its options, a call's options and the `Limiter` itself. They import
 * nothing of the limiter's parts, so every part (checks, decide, adjust) can name them without a cycle.
 */
import type { BlockOptions } from '../block.ts'
import type { RuleInput } from '../rules/unlimited.ts'
import type { BlockPolicy, Decision, Store } from '../types.ts'

/**
 * Rules for a call: a fixed list (rules, or rules as text such as `'slidingWindow:100/1m'`), or a function
 * of the key (and the caller's context) resolved per call, which may return a promise.
 */
export type RulesOption<C> =
  | readonly (RuleInput | string)[]
  | ((key: string, context: C) => RulesAnswer | Promise<RulesAnswer>)

/**
 * What a rules function answers for a call: its rules (each a rule or its text), one rule's text, or `null`
 * when the call is not limited. Anything else, `undefined` included, is an `ERR_SLUICE_INVALID_RULES` error.
 */
export type RulesAnswer = readonly (RuleInput | string)[] | string | null

/** What the limiter does when its store fails or times out. */
export type StoreErrorPolicy<C = unknown> = 'allow' | 'deny' | 'throw' | Limiter<C>

export interface LimiterOptions<C = unknown> {
  /**
   * The rules every call must pass, all or nothing, each a rule or its text (`'fixedWindow:1000/1d'`, read
   * by `parseRuleSpec`); or a function `(key, context) => rules | text | null` resolved per call (a table of
   * limits per key: `null`, or a rule with `limit: -1`, means not limited; `undefined`, a forgotten
   * `return`, is an `ERR_SLUICE_INVALID_RULES` error, never "not limited").
   * The function may return a promise (a plan looked up in a cache or a database): a call then waits for
   * it, and its rejection rejects the call. A function that answers synchronously keeps a synchronous
   * store's calls in the same tick.
   */
  rules: RulesOption<C>
  /** Where state lives. Default: a new `MemoryStore()`. */
  store?: Store
  /**
   * Namespace of this limiter's keys in its store: two limiters with different prefixes never share
   * counts, and two live limiters on one store may not share a prefix. Default `"sluice"`.
   */
  prefix?: string
  /**
   * When the store fails: `'allow'` admits the call (default: a rate limiter should not take the
   * service down with it), `'deny'` denies it for `1000` ms, `'throw'` rejects with a `StoreError`,
   * and another limiter (say, on a `MemoryStore`) is asked instead, as insurance.
   */
  onStoreError?: StoreErrorPolicy<C>
  /**
   * Block a key the rules deny: for `ms`, then `factor` times longer for each block begun within
   * `forgetMs` of earlier ones, at most `maxMs` (see `BlockOptions`). While blocked, every consume and peek
   * of the key is denied (`reason: 'blocked'`) until the block ends, counting nothing. The block lives in
   * the store, so every process on a Redis store shares it; `reset(key)` lifts it. Default: no blocks.
   */
  block?: BlockOptions
}

/**
 * A call's cost per rule, by the rules' names: `{ requests: 1, tokens: 1200 }`. Rules not named take 1; a
 * name no rule of the call has is an `ERR_SLUICE_INVALID_COST` error.
 */
export type RuleCosts = Readonly<Record<string, number>>

export interface CallOptions<C = unknown> {
  /**
   * Units this call takes, an integer >= 1 no greater than any rule's limit (a leakyBucket or warmUp
   * admits a call whose slot is free whatever its cost, up to 2^50 ms of intervals). Default 1. Or one
   * such integer per rule, by name (`RuleCosts`): the call is still admitted by all its rules or none.
   */
  cost?: number | RuleCosts
  /** Passed to a rules function. */
  context?: C
}

export interface AcquireOptions<C = unknown> extends CallOptions<C> {
  /**
   * Stops waiting when aborted. The call's place in the queue is given back when nobody has queued
   * behind it (see `unqueue`); otherwise it stays taken.
   */
  signal?: AbortSignal
}

export interface AdjustOptions<C = unknown> {
  /** Units: an integer from 1 to 2^50; it may exceed a rule's limit. Default 1. */
  cost?: number
  /** Passed to a rules function. */
  context?: C
}

export interface RefundOptions<C = unknown> extends AdjustOptions<C> {
  /**
   * The admitted decision of the consume the refund undoes (`consume`'s answer, or its JSON read back).
   * Each rule then gives back that call's units only while they still count in its state (see `refund`).
   * Without it, the newest units go back, whichever call counted them.
   */
  decision?: Decision
}

export interface SettleOptions<C = unknown> {
  /** The admitted decision of the consume whose reservation this settles (`consume`'s answer). */
  decision: Decision
  /**
   * The call's true cost: one integer from 0 to 2^50 for every rule, or per rule by name (`RuleCosts`;
   * rules not named keep what they reserved).
   */
  cost: number | RuleCosts
  /** Passed to a rules function. */
  context?: C
}

export interface Limiter<C = unknown> {
  readonly prefix: string
  readonly store: Store
  /** The `block` option as resolved, or undefined when the limiter does not block. */
  readonly block?: BlockPolicy
  /** Decides a call and, when it is admitted, counts it. */
  consume(key: string, options?: CallOptions<C>): Promise<Decision>
  /**
   * `consume`, answered in the same tick when the store answers synchronously (the memory store): the
   * Decision itself then, else a promise of it. Throws where `consume` would reject on its arguments.
   * For code that must not wait a promise hop for an in-memory decision, such as an HTTP adapter.
   */
  consumeNow(key: string, options?: CallOptions<C>): Decision | Promise<Decision>
  /** The decision `consume` would give now, counting nothing. */
  peek(key: string, options?: CallOptions<C>): Promise<Decision>
  /** Forgets the key's state under every rule that applies to it, and lifts its block (forgetting its escalation). */
  reset(key: string, options?: { context?: C }): Promise<void>
  /**
   * Gives back up to `cost` units the key's rules counted, never below empty. With `decision` (the
   * admitted decision of the call it undoes), each rule gives back that call's units only while they still
   * count in its state, never a newer call's: fixedWindow while the call's window lasts; slidingLog while
   * the call's entry is live and the newest; slidingWindow while the call's bucket is live; tokenBucket
   * while nothing has been written to the bucket since the call's ms (up to capacity); leakyBucket while
   * the call's slot is ahead, warmUp while the next slot it set is ahead (both move back by `cost`
   * intervals, not before now). A decision that counted nothing in the store (denied, unlimited, from
   * `onStoreError` or the insurance limiter) gives nothing back. Without `decision`, the newest units go
   * back: fixedWindow lowers the current window's count; slidingLog drops the newest entries;
   * slidingWindow lowers the newest non-empty buckets; tokenBucket adds tokens up to capacity; the meters
   * move back as above. That is inexact across a window's edge: a refund that comes after its call's
   * window (entry, bucket, slot) has passed takes a newer call's units. A block stays. Rejects with a
   * `StoreError` when the store fails.
   */
  refund(key: string, options?: RefundOptions<C>): Promise<void>
  /**
   * Counts `cost` units against the key whatever its rules say: they may go past their limit (by at most
   * `cost`; a token bucket below zero by at most `cost`), so later calls wait longer. Resolves with what a
   * `peek` answers right after. Begins no block. Rejects with an `InvalidCostError` when the penalty would
   * leave a rule waiting past 2^50 ms (a tokenBucket refilling more than `refillPerSecond × 2^50 / 1000 −
   * capacity` tokens; a leakyBucket or warmUp queueing more than 2^50 ms of intervals), and with a
   * `StoreError` when the store fails.
   */
  penalize(key: string, options?: AdjustOptions<C>): Promise<Decision>
  /**
   * Makes an admitted call's reservation its true cost, per rule, in one store call: a smaller cost gives
   * the difference back as `refund` with `decision` would (only while those units still count), a larger
   * one counts the difference as `penalize` would, past the limit if need be, so later calls wait it off.
   * A decision settles once. Resolves with what a `peek` answers right after. Rejects with an
   * `ERR_SLUICE_INVALID_SETTLE` error for a denied decision or one settled already, an `InvalidCostError`
   * for a bad cost, and a `StoreError` when the store fails.
   */
  settle(key: string, options: SettleOptions<C>): Promise<Decision>
  /**
   * Gives back the slot of a queued call (a `decision` with `waitMs > 0` from `consume`) whose caller
   * stopped waiting, only while nobody has queued behind it: later callers hold later slots, and theirs
   * are never moved. `options` are the call's own (`cost`, `context`). Rejects with a `StoreError` when
   * the store fails.
   */
  unqueue(key: string, decision: Decision, options?: CallOptions<C>): Promise<void>
  /**
   * Ends the lease of an admitted call (`decision.lease`, from a concurrency rule), giving its units
   * back. Idempotent; a decision without a lease, or a lease already ended, changes nothing. `options`
   * are the call's own (`context` for a rules function). Rejects with a `StoreError` when the store fails.
   */
  release(key: string, decision: Decision, options?: { context?: C }): Promise<void>
  /**
   * Gives up this limiter's prefix on its store, so a new limiter may take it (an app closed and built
   * again on a long-lived store). Call it when the limiter is no longer used.
   */
  close(): void
  /**
   * Consumes and then waits out `waitMs` (leaky-bucket queues). Resolves with the decision when the
   * caller may proceed; rejects with `RateLimitedError` when denied, or an abort error from `signal`.
   */
  acquire(key: string, options?: AcquireOptions<C>): Promise<Decision>
}
