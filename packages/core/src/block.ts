/**
 * @module Blocks: a key the rules deny is shut out for a while, longer each time it comes back soon.
 *
 * A block lives in the store beside the key's rule state (the Redis store keeps it in the same hash slot
 * and decides it in the same script call), so every process sharing a store shares its blocks. This file
 * holds the option, the escalation arithmetic and the block's state as the memory store keeps it; the Lua
 * in @sluice/redis's prelude.lua performs the same operations in the same order, so both stores block for
 * the same number of ms.
 *
 * Escalation is bounded: the `n`-th block within `forgetMs` lasts `ms × factor^(n−1)`, at most `maxMs`, so
 * past the `n` that reaches `maxMs` the count no longer matters. A key keeps the starts of only its last
 * `keep` blocks (at most `MAX_BLOCK_HISTORY`), which is all the count ever needs.
 */
import { InvalidOptionError } from './errors.ts'
import { given, integerOption, readOptions } from './options.ts'
import { MAX_FIGURE } from './rules/bounds.ts'
import { ruleDecision } from './rules/index.ts'
import type { BlockPolicy, Rule, RuleDecision } from './types.ts'

export type { BlockPolicy } from './types.ts'

/** `createLimiter`'s `block` option: how long a key the rules deny is blocked. */
export interface BlockOptions {
  /** The first block's length, in ms: an integer from 1 to 2^50. */
  ms: number
  /**
   * Each block begun within `forgetMs` of earlier ones lasts `factor` times the one before: `ms ×
   * factor^(n−1)` for the `n`-th, rounded up to whole ms. A number >= 1. Default 1 (no escalation).
   */
  factor?: number
  /** The longest a block lasts, in ms: an integer from `ms` to 2^50. Default `ms`. */
  maxMs?: number
  /**
   * How long a block counts towards escalation after it began, in ms: an integer from 1 to 2^50.
   * Default `ms`.
   */
  forgetMs?: number
}

/** The most block starts a key keeps; escalation must reach `maxMs` within this many blocks. */
export const MAX_BLOCK_HISTORY = 63

/** Checks a `block` option (`option` names it in errors). */
export function blockOption(option: string, value: unknown): BlockPolicy {
  const o = readOptions(option, value as BlockOptions, ['ms', 'factor', 'maxMs', 'forgetMs'], true)
  const ms = integerOption(`${option}.ms`, o.ms, 1, MAX_FIGURE)
  const factor = given(o.factor, 1)
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1) {
    throw new InvalidOptionError(`${option}.factor`, factor, 'a finite number >= 1')
  }
  const maxMs = integerOption(`${option}.maxMs`, given(o.maxMs, ms), ms, MAX_FIGURE)
  const forgetMs = integerOption(`${option}.forgetMs`, given(o.forgetMs, ms), 1, MAX_FIGURE)
  // The count matters up to the first block that lasts maxMs; the starts before it are all a key keeps.
  let keep = 0
  if (factor > 1) {
    let d = ms
    while (d < maxMs) {
      if (keep === MAX_BLOCK_HISTORY) {
        throw new InvalidOptionError(
          `${option}.factor`,
          factor,
          `a factor large enough that blocks reach maxMs (${maxMs}) within ${MAX_BLOCK_HISTORY + 1} ` +
            'escalations (a key keeps the starts of that many blocks, no more): raise factor or lower maxMs',
        )
      }
      d *= factor
      keep++
    }
  }
  return Object.freeze({ ms, factor, maxMs, forgetMs, keep })
}

/**
 * The length of the `n`-th block within `forgetMs`: `ms × factor^(n−1)`, multiplied out step by step (no
 * `pow`, whose last bit may differ between V8 and Lua's C library), rounded up, at most `maxMs`.
 */
export function blockLength(policy: BlockPolicy, n: number): number {
  let d = policy.ms
  for (let i = 1; i < n && d < policy.maxMs; i++) d *= policy.factor
  return Math.min(Math.ceil(d), policy.maxMs)
}

/** A key's block as the memory store keeps it. */
export interface BlockState {
  /** The block lasts while `now < until`. */
  until: number
  /** When the key's last blocks began, oldest first: at most `keep` of them. */
  starts: number[]
}

/** Whole ms the block in `state` has left at `now`; 0 when the key is not blocked. */
export function blockLeft(state: BlockState | undefined, now: number): number {
  return state !== undefined && state.until > now ? state.until - now : 0
}

/**
 * Begins a block at `now` (the rules have just denied a consume): counts the blocks that began less than
 * `forgetMs` ago, sets the end, keeps the latest starts. Returns the block's length.
 */
export function beginBlock(state: BlockState, policy: BlockPolicy, now: number): number {
  const { starts } = state
  let first = 0
  while (first < starts.length && starts[first]! <= now - policy.forgetMs) first++
  const length = blockLength(policy, starts.length - first + 1)
  starts.splice(0, first)
  starts.push(now)
  if (starts.length > policy.keep) starts.splice(0, starts.length - policy.keep)
  state.until = now + length
  return length
}

/** From this time on the block state says nothing: the block is over and no start counts any more. */
export function blockExpiresAt(state: BlockState, policy: BlockPolicy): number {
  const last = state.starts.length === 0 ? Number.NEGATIVE_INFINITY : state.starts[state.starts.length - 1]!
  return Math.max(state.until, last + policy.forgetMs)
}

/**
 * The answer to a call on a blocked key: every rule denies it until the block ends, with nothing left.
 * Both stores answer with exactly this, so a blocked decision reads the same from either.
 */
export function blockedAnswer(
  rules: readonly Rule[],
  left: number,
): RuleDecision[] & { readonly reason: 'blocked' } {
  const out = new Array<RuleDecision>(rules.length) as RuleDecision[] & { reason: 'blocked' }
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    out[i] = ruleDecision(rule, false, 0, left, left, 0)
  }
  out.reason = 'blocked'
  return out
}

/**
 * The answer to the consume that began a block of `length` ms: the denying rules say to come back when
 * the block ends (or later, when they say so themselves).
 */
export function withBlock(decisions: RuleDecision[], length: number): RuleDecision[] {
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i]!
    if (!d.allowed && d.retryAfterMs < length) decisions[i] = { ...d, retryAfterMs: length }
  }
  return decisions
}
