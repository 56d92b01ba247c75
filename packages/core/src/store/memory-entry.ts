/**
 * @module One key's state in the memory store, and the rules applied to it: the pure rule algorithms run
 * against the entry's states, all or nothing, with no clock and no map of keys (memory-store.ts keeps the
 * clock, memory-keys.ts the keys).
 */

import type { BlockState } from '../block.ts'
import type { Algorithm } from '../rules/algorithm.ts'
import { newLease } from '../rules/concurrency.ts'
import { algorithmOf } from '../rules/index.ts'
import { type LeakyBucketState, queueMark } from '../rules/leaky-bucket.ts'
import type { Costs, DecisionReason, Rule, RuleDecision } from '../types.ts'

/**
 * One key's state, one slot per rule id it has seen. Most keys only ever see one rule, so the first
 * rule's state sits in the entry itself (`rule`, `state`): a call then reaches it without an array walk,
 * and a key costs two objects (entry and state) instead of four. Further rules go in `ids`/`states`.
 */
export interface Entry {
  /**
   * The rule the first state was last used under: its `id` names the state. Kept as the rule itself, so
   * that the commonest call, by the same rule object, finds its state by comparing two references; a call
   * by another object of the same identity compares ids, and the entry keeps that object from then on.
   */
  rule: Rule | undefined
  state: unknown
  ids: string[] | undefined
  states: unknown[] | undefined
  /** The key's block and the starts escalation counts, once the key has been blocked. */
  block: BlockState | undefined
  /** From this time on every state (and the block) answers as a fresh one would. */
  expiresAt: number
}

export function emptyEntry(): Entry {
  return {
    rule: undefined,
    state: undefined,
    ids: undefined,
    states: undefined,
    block: undefined,
    expiresAt: Number.NEGATIVE_INFINITY,
  }
}

/**
 * What `apply` answers: a plain list of rule decisions. A consume the rules admitted says when it was counted
 * in `countedAt` (the store's ms), a plain field: the limiter copies the decisions into the Decision's own
 * list, so the field never shows in `Decision.rules` (its JSON and equality stay those of the list).
 */
export type Answer = RuleDecision[] & { reason?: DecisionReason; countedAt?: number }

/** `decisions`, marked as counted at `at`. */
export function counted(decisions: Answer, at: number): Answer {
  decisions.countedAt = at
  return decisions
}

/** A rule decision as the store first makes it, before it marks where a call left a queue or its lease. */
type Marked = { -readonly [F in keyof RuleDecision]: RuleDecision[F] }

/**
 * Every rule of a call, all or nothing: when any rule denies, nothing is counted and the rules that would
 * have admitted the call report what they have left. A queued leakyBucket call learns where it left the queue.
 * `cost` is the call's cost under every rule, or one per rule (per-rule costs).
 */
export function decideAll(
  entry: Entry,
  rules: readonly Rule[],
  now: number,
  cost: number | Costs,
  consume: boolean,
): { out: Answer; allowed: boolean } {
  const n = rules.length
  const algorithms = new Array<Algorithm<Rule, unknown>>(n)
  const states = new Array<unknown>(n)
  const decisions: Answer = new Array<RuleDecision>(n)
  let allowed = true
  for (let i = 0; i < n; i++) {
    const rule = rules[i]!
    const algorithm = algorithmOf(rule)
    const state = stateOf(entry, rule, now, consume, algorithm)
    const d = algorithm.decide(state, rule, now, typeof cost === 'number' ? cost : cost[i]!)
    algorithms[i] = algorithm
    states[i] = state
    decisions[i] = d
    if (!d.allowed) allowed = false
  }
  if (!allowed) {
    // Nothing is counted: the rules that would have admitted the call report what they have left.
    for (let i = 0; i < n; i++) {
      if (decisions[i]!.allowed) decisions[i] = algorithms[i]!.decide(states[i], rules[i]!, now, 0)
    }
  } else if (consume) {
    let expiresAt = entry.expiresAt
    // One lease for the call, shared by its concurrency rules (the limiter gives them one cost).
    let lease: string | undefined
    for (let i = 0; i < n; i++) {
      const rule = rules[i]!
      const { mark } = algorithms[i]!
      const c = typeof cost === 'number' ? cost : cost[i]!
      if (mark === 'lease') lease ??= newLease(c)
      const until = admit(algorithms[i]!, states[i], rule, now, c, lease)
      if (until > expiresAt) expiresAt = until
      // Each decision is the algorithm's own new object: marking it in place keeps one shape per rule kind.
      if (mark === 'queue' && decisions[i]!.waitMs > 0) {
        ;(decisions[i] as Marked).queue = queueMark(states[i] as LeakyBucketState)
      } else if (mark === 'lease') (decisions[i] as Marked).lease = lease
    }
    entry.expiresAt = expiresAt
  }
  return { out: decisions, allowed }
}

/** The one rule of a call: the common case, without the arrays of the all-or-nothing loop. */
export function applyOne(
  entry: Entry,
  rule: Rule,
  now: number,
  cost: number,
  consume: boolean,
): RuleDecision {
  const algorithm = algorithmOf(rule)
  const state = stateOf(entry, rule, now, consume, algorithm)
  const d = algorithm.decide(state, rule, now, cost)
  if (consume && d.allowed) {
    if (algorithm.mark !== undefined) return admitMarked(entry, algorithm, state, rule, now, cost, d)
    const until = admit(algorithm, state, rule, now, cost)
    if (until > entry.expiresAt) entry.expiresAt = until
  }
  return d
}

/**
 * `applyOne`'s admission for the rules whose decision says where the call left them (a queue, a lease).
 * Out of line: the counting rules' calls, the commonest, never run it.
 */
function admitMarked(
  entry: Entry,
  algorithm: Algorithm<Rule, unknown>,
  state: unknown,
  rule: Rule,
  now: number,
  cost: number,
  d: RuleDecision,
): RuleDecision {
  const lease = algorithm.mark === 'lease' ? newLease(cost) : undefined
  const until = admit(algorithm, state, rule, now, cost, lease)
  if (until > entry.expiresAt) entry.expiresAt = until
  // The decision is the algorithm's own new object: marking it in place keeps one shape per rule kind.
  if (algorithm.mark === 'queue' && d.waitMs > 0) (d as Marked).queue = queueMark(state as LeakyBucketState)
  else if (lease !== undefined) (d as Marked).lease = lease
  return d
}

/** The state `entry` keeps for `rule`, or undefined when it keeps none. */
export function existingState(entry: Entry, rule: Rule): unknown {
  const id = rule.id
  if (entry.rule !== undefined && entry.rule.id === id) return entry.state
  const { ids } = entry
  if (ids !== undefined) for (let i = 0; i < ids.length; i++) if (ids[i] === id) return entry.states![i]
  return undefined
}

/** Records an admitted call; returns when the state will answer as a fresh one would. */
function admit(
  algorithm: Algorithm<Rule, unknown>,
  state: unknown,
  rule: Rule,
  now: number,
  cost: number,
  lease?: string,
): number {
  algorithm.admit(state, rule, now, cost, lease)
  return algorithm.expiresAt(state, rule)
}

/**
 * The state `entry` keeps for `rule`; when missing, a fresh one, kept in `entry` only if `keep`. The first
 * rule's state is found here; the rest by `otherState`, out of line so that this stays small enough for the
 * compiler to take whole into the call.
 */
export function stateOf(
  entry: Entry,
  rule: Rule,
  now: number,
  keep: boolean,
  algorithm: Algorithm<Rule, unknown>,
): unknown {
  if (entry.rule === rule) return entry.state
  return otherState(entry, rule, now, keep, algorithm)
}

function otherState(
  entry: Entry,
  rule: Rule,
  now: number,
  keep: boolean,
  algorithm: Algorithm<Rule, unknown>,
): unknown {
  const id = rule.id
  const first = entry.rule
  if (first !== undefined && first.id === id) {
    // Another rule object of the same identity (a limit edited): its state, and the fast path from now on.
    entry.rule = rule
    return entry.state
  }
  const { ids } = entry
  if (ids !== undefined) for (let i = 0; i < ids.length; i++) if (ids[i] === id) return entry.states![i]
  const state = algorithm.create(rule, now)
  if (keep) {
    if (first === undefined) {
      entry.rule = rule
      entry.state = state
    } else if (ids === undefined) {
      entry.ids = [id]
      entry.states = [state]
    } else {
      ids.push(id)
      entry.states!.push(state)
    }
  }
  return state
}
