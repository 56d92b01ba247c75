/**
 * @module The seam between a rule and the memory store.
 *
 * Each algorithm is split in two so a store can apply several rules all or nothing:
 * `decide` answers a call without changing what the state counts, and `admit` records the call
 * once every rule of it has said yes. Time is always an argument; no algorithm reads a clock.
 * State is mutable on purpose: copying a sliding log on every call would cost more than the decision.
 */
import type { ConcurrencyRule, Rule, RuleDecision } from '../types.ts'

export interface Algorithm<R extends Rule, S> {
  /**
   * What an admitted decision carries of where the call left the state, for a later act to name: a queue
   * slot (`'queue'`: a call that waits; `unqueue` lifts it), a lease (`'lease'`: every admitted call;
   * `release` ends it), or nothing. The store marks those decisions after admitting the call.
   */
  readonly mark: 'queue' | 'lease' | undefined
  /** State for a key this rule has never seen (or has forgotten). */
  create(rule: R, now: number): S
  /**
   * The rule's answer to a call of `cost` at `now`. May drop entries that no longer count,
   * but never changes the answer to any later call.
   * `cost` 0 asks for the state as it stands: a store passes it for a rule that would have admitted
   * a call another rule denied, so that rule reports what it has left, not what the call would leave.
   */
  decide(state: S, rule: R, now: number, cost: number): RuleDecision
  /**
   * Records an admitted call. Called only after `decide` admitted the same call at the same `now`.
   * `lease` (concurrency rules) is the id the call's units are held under.
   */
  admit(state: S, rule: R, now: number, cost: number, lease?: string): void
  /** From this time on the state answers exactly as a fresh one would, so it may be forgotten. */
  expiresAt(state: S, rule: R): number
  /**
   * Gives back up to `cost` units at `now`, never below empty, in bounded work: the units most recently
   * counted go first, so what stays counted is exactly what the calls that stay counted took, and the rule
   * never lets more through than exact counting of those calls would.
   */
  refund(state: S, rule: R, now: number, cost: number): void
  /**
   * Gives back up to `cost` units of one admitted call, named by its mark (`refundMark`), only while they
   * still count in the state: units that have left it are never taken from newer calls, so the rule lets
   * through no more than exact counting of the calls that stay counted would. Bounded work, as `refund`.
   */
  refundCall(state: S, rule: R, now: number, cost: number, mark: number): void
  /**
   * Counts `cost` units at `now` whatever the rule says. The state may go past the limit, by at most
   * `cost` (a token bucket below zero by at most `cost`): penalties do not pile up without bound.
   */
  penalize(state: S, rule: R, now: number, cost: number): void
}

/**
 * A rule's answer to a call. Each algorithm passes the figure its answers carry as `limit` (its limit, or a
 * bucket's capacity), so the hot path asks nothing of the rule's kind; every ms figure it receives is already
 * a rounded-up integer. One object shape for every kind but concurrency (`leaseDecision`).
 *
 * The ms figures go through `Math.trunc`, which changes none of them (each is whole) but hands V8 a small
 * integer where the arithmetic on clock readings left a boxed double of the same value: a field that has only
 * held small integers is stored in the object itself, one allocation fewer per figure and per call (and in
 * the Decision that copies it).
 */
export function decisionOf(
  rule: Rule,
  limit: number,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  waitMs: number,
): RuleDecision {
  return {
    rule: rule.name,
    allowed,
    limit,
    remaining,
    resetMs: Math.trunc(resetMs),
    retryAfterMs: Math.trunc(retryAfterMs),
    waitMs: Math.trunc(waitMs),
    windowSeconds: rule.policyWindowSeconds,
  }
}

/** A concurrency rule's answer: its unit is concurrent requests. */
export function leaseDecision(
  rule: ConcurrencyRule,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
): RuleDecision {
  return {
    rule: rule.name,
    allowed,
    limit: rule.limit,
    remaining,
    resetMs,
    retryAfterMs,
    waitMs: 0,
    windowSeconds: rule.policyWindowSeconds,
    unit: 'concurrent-requests',
  }
}

/**
 * The answer of a rule whose decisions carry its `limit` (every kind but tokenBucket, which carries its
 * capacity, and concurrency, `leaseDecision`), for the answers no algorithm makes (a blocked key's).
 */
export function limitDecision(
  rule: Rule & { readonly limit: number },
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  waitMs: number,
): RuleDecision {
  return decisionOf(rule, rule.limit, allowed, remaining, resetMs, retryAfterMs, waitMs)
}

export function atLeastZero(n: number): number {
  return Math.max(n, 0)
}

/**
 * The start of the span of `size` ms, aligned to multiples of `size` since the epoch, that holds `now`:
 * `now - (now % size)`, to the last bit for every whole `now` below 2^53 in magnitude. By a division,
 * because `%` on numbers past 2^31 (every clock reading) costs V8 a slow floating-point remainder.
 */
export function alignedStart(now: number, size: number): number {
  return Math.trunc(now / size) * size
}
