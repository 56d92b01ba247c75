/**
 * @module MemoryStore: rule state in this process. It keeps state and runs the rule algorithms; it
 * holds no algorithm logic of its own, and keeps its keys (their bound and their generations) in
 * memory-keys.ts.
 */
import {
  type BlockPolicy,
  beginBlock,
  blockExpiresAt,
  blockedAnswer,
  blockLeft,
  withBlock,
} from '../block.ts'
import { functionOption, given, integerOption, MAX_TIMER_MS, readOptions } from '../options.ts'
import { type ConcurrencyState, release } from '../rules/concurrency.ts'
import { algorithmOf } from '../rules/index.ts'
import { type LeakyBucketState, unqueue } from '../rules/leaky-bucket.ts'
import type {
  Adjustment,
  Costs,
  LeakyBucketRule,
  Rule,
  RuleDecision,
  Store,
  StoreAnswer,
  StoreMode,
} from '../types.ts'
import {
  type Answer,
  applyOne,
  counted,
  decideAll,
  type Entry,
  existingState,
  stateOf,
} from './memory-entry.ts'
import { Keys } from './memory-keys.ts'

export interface MemoryStoreOptions {
  /** The store's clock in ms. Default `Date.now`. Tests pass a manual clock. */
  clock?: () => number
  /** Most keys held at once, across all prefixes; least recently used go first. Default 1,000,000. */
  maxKeys?: number
  /** How often idle keys are swept, in ms; 0 turns the sweep off (expiry stays lazy). Default 60,000. */
  sweepIntervalMs?: number
}

/**
 * The key of a memory store's one-rule path, for `createLimiter` and the store's own `apply` (the package
 * does not export it): a call of one rule and no block, with the rule's answer handed to a function of the
 * caller's instead of returned in a list. A limiter on a memory store composes its Decision from the answer
 * directly, without a list and its `countedAt` field in between: two objects fewer on every call of the
 * commonest limiter.
 */
export const applyOneRule: unique symbol = Symbol('sluice.applyOneRule')

/** The Store contract's answer of one rule's decision `d`, counted at `countedAt` (undefined: not counted). */
function answerOf(d: RuleDecision, countedAt: number | undefined): Answer {
  const out: Answer = [d]
  if (countedAt !== undefined) out.countedAt = countedAt
  return out
}

/** Rule `i`'s cost: `cost` itself for every rule, or its own of a list of one per rule. */
function costAt(cost: number | Costs, i: number): number {
  return typeof cost === 'number' ? cost : cost[i]!
}

export class MemoryStore implements Store {
  readonly #clock: () => number
  readonly #keys: Keys
  #sweep: NodeJS.Timeout | undefined

  constructor(options?: MemoryStoreOptions) {
    const o = readOptions('MemoryStore', options, ['clock', 'maxKeys', 'sweepIntervalMs'])
    this.#clock = o.clock === undefined ? Date.now : functionOption('MemoryStore.clock', o.clock)
    this.#keys = new Keys(integerOption('MemoryStore.maxKeys', given(o.maxKeys, 1_000_000), 2))
    const sweepIntervalMs = integerOption(
      'MemoryStore.sweepIntervalMs',
      given(o.sweepIntervalMs, 60_000),
      0,
      MAX_TIMER_MS,
    )
    if (sweepIntervalMs > 0) {
      this.#sweep = setInterval(this.#timedSweep, sweepIntervalMs)
      this.#sweep.unref()
    }
  }

  /** Keys held now, across all prefixes. */
  get size(): number {
    return this.#keys.size
  }

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Answer {
    if (block === undefined && rules.length === 1) {
      const one = typeof cost === 'number' ? cost : cost[0]!
      return this[applyOneRule](prefix, key, rules[0]!, one, mode, answerOf)
    }
    const now = this.#now()
    const consume = mode === 'consume'
    const entry = consume ? this.#keys.entry(prefix, key, now) : this.#keys.peek(prefix, key, now)
    return this.#applyAll(entry, rules, now, cost, consume, block)
  }

  /**
   * A call of one rule without a block, `apply`'s own for such a call: `answer` receives the rule's decision
   * and, for a consume it admitted, the ms it was counted at (`apply` hands both to `answerOf`).
   */
  [applyOneRule]<T>(
    prefix: string,
    key: string,
    rule: Rule,
    cost: number,
    mode: StoreMode,
    answer: (d: RuleDecision, countedAt: number | undefined) => T,
  ): T {
    const now = this.#now()
    const consume = mode === 'consume'
    const entry = consume ? this.#keys.entry(prefix, key, now) : this.#keys.peek(prefix, key, now)
    const d = applyOne(entry, rule, now, cost, consume)
    return answer(d, consume && d.allowed ? now : undefined)
  }

  /** `apply` for several rules, or a limiter with blocks: a blocked key is denied outright; a consume the rules deny begins a block. */
  #applyAll(
    entry: Entry,
    rules: readonly Rule[],
    now: number,
    cost: number | Costs,
    consume: boolean,
    block: BlockPolicy | undefined,
  ): Answer {
    if (block !== undefined) {
      const left = blockLeft(entry.block, now)
      if (left > 0) return blockedAnswer(rules, left)
    }
    const decisions = decideAll(entry, rules, now, cost, consume)
    if (!consume) return decisions.out
    if (decisions.allowed) return counted(decisions.out, now)
    return block === undefined ? decisions.out : this.#block(entry, decisions.out, block, now)
  }

  adjust(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): StoreAnswer | undefined {
    if (adjustment === 'release') {
      this.#release(prefix, key, rules, marks)
      return undefined
    }
    const now = this.#now()
    if (adjustment === 'settle') {
      this.#settle(prefix, key, rules, cost, marks, now)
      return this.apply(prefix, key, rules, 1, 'peek', block)
    }
    if (adjustment === 'penalize') {
      const entry = this.#keys.entry(prefix, key, now)
      let expiresAt = entry.expiresAt
      for (let i = 0; i < rules.length; i++) {
        const rule = rules[i]!
        const algorithm = algorithmOf(rule)
        const state = stateOf(entry, rule, now, true, algorithm)
        algorithm.penalize(state, rule, now, costAt(cost, i))
        const until = algorithm.expiresAt(state, rule)
        if (until > expiresAt) expiresAt = until
      }
      entry.expiresAt = expiresAt
      return this.apply(prefix, key, rules, 1, 'peek', block)
    }
    // A refund never creates state: a key or rule with none has nothing to give back.
    const entry = this.#keys.peek(prefix, key, now)
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const state = existingState(entry, rule)
      if (state === undefined) continue
      const mark = marks?.[i]
      const c = costAt(cost, i)
      if (adjustment === 'refund' && marks === undefined) algorithmOf(rule).refund(state, rule, now, c)
      else if (mark === undefined) continue
      else if (adjustment === 'refund') algorithmOf(rule).refundCall(state, rule, now, c, Number(mark))
      else if (adjustment === 'unqueue' && algorithmOf(rule).mark === 'queue') {
        unqueue(state as LeakyBucketState, rule as LeakyBucketRule, now, c, mark)
      }
      // A state written under other numbers (an edited limit) may now live longer than the entry did, as
      // the Redis key's TTL follows what the script writes: the entry must not be forgotten before it.
      const until = algorithmOf(rule).expiresAt(state, rule)
      if (until > entry.expiresAt) entry.expiresAt = until
    }
    return undefined
  }

  /**
   * Settles one call's reservation, each rule by its own signed amount (`cost`, or one for every rule): below
   * 0 its call's units named by its mark go back as a refund naming the call gives them (never creating
   * state), above 0 they are counted as a penalty counts them, 0 leaves the rule alone. Nothing here can
   * fail half way, so the rules change together.
   */
  #settle(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    marks: readonly (string | undefined)[] | undefined,
    now: number,
  ): void {
    let counts = false
    for (let i = 0; i < rules.length; i++) if (costAt(cost, i) > 0) counts = true
    // Only a count makes the key's entry; a refund alone never creates state.
    const entry = counts ? this.#keys.entry(prefix, key, now) : this.#keys.peek(prefix, key, now)
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const amount = costAt(cost, i)
      const algorithm = algorithmOf(rule)
      let state: unknown
      if (amount > 0) {
        state = stateOf(entry, rule, now, true, algorithm)
        algorithm.penalize(state, rule, now, amount)
      } else {
        const mark = marks?.[i]
        state = amount < 0 && mark !== undefined ? existingState(entry, rule) : undefined
        if (state === undefined) continue
        algorithm.refundCall(state, rule, now, -amount, Number(mark))
      }
      const until = algorithm.expiresAt(state, rule)
      if (until > entry.expiresAt) entry.expiresAt = until
    }
  }

  /**
   * Ends a call's leases (`marks`, one per rule) under the key's concurrency rules. Reads no clock and
   * creates nothing: a lease that has ended belongs to nobody, so ending it changes no answer, and an entry
   * that has expired answers as a fresh one whatever its states hold (`Keys.entry` resets it before a consume,
   * a peek passes it by). A release never lengthens a state's life, so the entry's `expiresAt` stands.
   */
  #release(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    marks: readonly (string | undefined)[] | undefined,
  ): void {
    if (marks === undefined) return
    const entry = this.#keys.find(prefix, key)
    if (entry === undefined) return
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const mark = marks[i]
      if (mark === undefined || algorithmOf(rule).mark !== 'lease') continue
      const state = existingState(entry, rule)
      if (state !== undefined) release(state as ConcurrencyState, mark)
    }
  }

  /** Begins a block on `entry`: the consume the rules just denied says to come back when it ends. */
  #block(entry: Entry, decisions: RuleDecision[], block: BlockPolicy, now: number): RuleDecision[] {
    entry.block ??= { until: Number.NEGATIVE_INFINITY, starts: [] }
    const length = beginBlock(entry.block, block, now)
    const until = blockExpiresAt(entry.block, block)
    if (until > entry.expiresAt) entry.expiresAt = until
    return withBlock(decisions, length)
  }

  reset(prefix: string, key: string): void {
    this.#keys.delete(prefix, key)
  }

  /** Drops every expired key now. Runs by itself every `sweepIntervalMs`. */
  sweep(): void {
    this.#keys.sweep(this.#now())
  }

  /** Stops the sweep and forgets every key. */
  close(): void {
    clearInterval(this.#sweep)
    this.#keys.clear()
  }

  /**
   * The sweep the interval runs. A clock that throws fails the calls that read it (`onStoreError` decides
   * them); here nobody could catch it, and the process would end, so the sweep skips its turn.
   */
  readonly #timedSweep = (): void => {
    try {
      this.sweep()
    } catch {}
  }

  /** The clock in whole ms, as the algorithms and the Redis store's `TIME` take it (a clock may have fractions). */
  #now(): number {
    return Math.floor(this.#clock())
  }
}
