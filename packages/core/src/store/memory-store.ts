/**
 * @module MemoryStore: rule state in this process. It keeps state and runs the rule algorithms; it
 * holds no algorithm logic of its own.
 *
 * Bounded without a timer per key: keys live in two generations. New and recently used keys go to
 * the current one; when it holds half of `maxKeys`, the previous generation is dropped whole and the
 * current one takes its place. A key used since the last turnover is moved forward, so the keys
 * dropped are always the least recently used. Idle keys also expire lazily on access and in one
 * unref'd sweep.
 *
 * Over 300 lines: every way into a key (apply, the one-rule path, adjust, release, reset, sweep) goes
 * through the generations this class keeps private; split, each file would need them opened to the others.
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
import type { Adjustment, Rule, RuleDecision, Store, StoreAnswer, StoreMode } from '../types.ts'
import {
  type Answer,
  applyOne,
  counted,
  decideAll,
  type Entry,
  emptyEntry,
  existingState,
  stateOf,
} from './memory-entry.ts'

export interface MemoryStoreOptions {
  /** The store's clock in ms. Default `Date.now`. Tests pass a manual clock. */
  clock?: () => number
  /** Most keys held at once, across all prefixes; least recently used go first. Default 1,000,000. */
  maxKeys?: number
  /** How often idle keys are swept, in ms; 0 turns the sweep off (expiry stays lazy). Default 60,000. */
  sweepIntervalMs?: number
}

/** Forgets an expired entry's states and block: from now on it answers as a fresh one. */
function forget(entry: Entry): void {
  entry.id = undefined
  entry.state = undefined
  entry.ids = undefined
  entry.states = undefined
  entry.block = undefined
  entry.expiresAt = Number.NEGATIVE_INFINITY
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

/** The keys of one prefix, in two generations. */
interface Namespace {
  readonly prefix: string
  current: Map<string, Entry>
  previous: Map<string, Entry>
}

export class MemoryStore implements Store {
  readonly #clock: () => number
  readonly #maxKeys: number
  readonly #generationSize: number
  readonly #namespaces = new Map<string, Namespace>()
  /** The namespace a call last used: calls come in runs from one limiter, so most skip a Map lookup. */
  #lastNamespace: Namespace | undefined
  /** Keys in the current generations of all namespaces. */
  #currentCount = 0
  #sweep: NodeJS.Timeout | undefined

  constructor(options?: MemoryStoreOptions) {
    const o = readOptions('MemoryStore', options, ['clock', 'maxKeys', 'sweepIntervalMs'])
    this.#clock = o.clock === undefined ? Date.now : functionOption('MemoryStore.clock', o.clock)
    this.#maxKeys = integerOption('MemoryStore.maxKeys', given(o.maxKeys, 1_000_000), 2)
    this.#generationSize = Math.floor(this.#maxKeys / 2)
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
    let size = 0
    for (const ns of this.#namespaces.values()) size += ns.current.size + ns.previous.size
    return size
  }

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Answer {
    if (block === undefined && rules.length === 1) {
      return this[applyOneRule](prefix, key, rules[0]!, cost, mode, answerOf)
    }
    const now = this.#now()
    const consume = mode === 'consume'
    const entry = consume ? this.#entry(prefix, key, now) : this.#peekEntry(prefix, key, now)
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
    const entry = consume ? this.#entry(prefix, key, now) : this.#peekEntry(prefix, key, now)
    const d = applyOne(entry, rule, now, cost, consume)
    return answer(d, consume && d.allowed ? now : undefined)
  }

  /** `apply` for several rules, or a limiter with blocks: a blocked key is denied outright; a consume the rules deny begins a block. */
  #applyAll(
    entry: Entry,
    rules: readonly Rule[],
    now: number,
    cost: number,
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
    cost: number,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): StoreAnswer | undefined {
    if (adjustment === 'release') {
      this.#release(prefix, key, rules, marks)
      return undefined
    }
    const now = this.#now()
    if (adjustment === 'penalize') {
      const entry = this.#entry(prefix, key, now)
      let expiresAt = entry.expiresAt
      for (const rule of rules) {
        const algorithm = algorithmOf(rule)
        const state = stateOf(entry, rule, now, true, algorithm)
        algorithm.penalize(state, rule, now, cost)
        const until = algorithm.expiresAt(state, rule)
        if (until > expiresAt) expiresAt = until
      }
      entry.expiresAt = expiresAt
      return this.apply(prefix, key, rules, 1, 'peek', block)
    }
    // A refund never creates state: a key or rule with none has nothing to give back.
    const entry = this.#peekEntry(prefix, key, now)
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const state = existingState(entry, rule)
      if (state === undefined) continue
      const mark = marks?.[i]
      if (adjustment === 'refund' && marks === undefined) algorithmOf(rule).refund(state, rule, now, cost)
      else if (mark === undefined) continue
      else if (adjustment === 'refund') algorithmOf(rule).refundCall(state, rule, now, cost, Number(mark))
      else if (adjustment === 'unqueue' && rule.kind === 'leakyBucket') {
        unqueue(state as LeakyBucketState, rule, now, cost, mark)
      }
      // A state written under other numbers (an edited limit) may now live longer than the entry did, as
      // the Redis key's TTL follows what the script writes: the entry must not be forgotten before it.
      const until = algorithmOf(rule).expiresAt(state, rule)
      if (until > entry.expiresAt) entry.expiresAt = until
    }
    return undefined
  }

  /**
   * Ends a call's leases (`marks`, one per rule) under the key's concurrency rules. Reads no clock and
   * creates nothing: a lease that has ended is held by nobody, so ending it changes no answer, and an entry
   * that has expired answers as a fresh one whatever its states hold (`#entry` resets it before a consume,
   * a peek passes it by). A release never lengthens a state's life, so the entry's `expiresAt` stands.
   */
  #release(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    marks: readonly (string | undefined)[] | undefined,
  ): void {
    if (marks === undefined) return
    const last = this.#lastNamespace
    const ns = last !== undefined && last.prefix === prefix ? last : this.#namespaces.get(prefix)
    if (ns === undefined) return
    const entry = ns.current.get(key) ?? ns.previous.get(key)
    if (entry === undefined) return
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const mark = marks[i]
      if (mark === undefined || rule.kind !== 'concurrency') continue
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
    const ns = this.#namespaces.get(prefix)
    if (ns === undefined) return
    if (ns.current.delete(key)) this.#currentCount--
    ns.previous.delete(key)
  }

  /** Drops every expired key now. Runs by itself every `sweepIntervalMs`. */
  sweep(): void {
    const now = this.#now()
    for (const ns of this.#namespaces.values()) {
      for (const [key, entry] of ns.current) {
        if (entry.expiresAt <= now) {
          ns.current.delete(key)
          this.#currentCount--
        }
      }
      for (const [key, entry] of ns.previous) if (entry.expiresAt <= now) ns.previous.delete(key)
    }
  }

  /** Stops the sweep and forgets every key. */
  close(): void {
    clearInterval(this.#sweep)
    this.#namespaces.clear()
    this.#lastNamespace = undefined
    this.#currentCount = 0
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

  /** The entry for `key`, created or brought forward into the current generation; reset if expired. */
  #entry(prefix: string, key: string, now: number): Entry {
    const ns = this.#namespace(prefix)
    const entry = ns.current.get(key) ?? this.#forward(ns, key)
    if (entry.expiresAt <= now && (entry.id !== undefined || entry.block !== undefined)) forget(entry)
    return entry
  }

  /** A key missing from the current generation: brought forward from the previous one, or new. */
  #forward(ns: Namespace, key: string): Entry {
    let entry = ns.previous.get(key)
    if (entry === undefined) entry = emptyEntry()
    else ns.previous.delete(key)
    this.#admitKey(ns, key, entry)
    return entry
  }

  /** The namespace of `prefix`, created when missing. */
  #namespace(prefix: string): Namespace {
    const last = this.#lastNamespace
    if (last !== undefined && last.prefix === prefix) return last
    return this.#otherNamespace(prefix)
  }

  #otherNamespace(prefix: string): Namespace {
    let ns = this.#namespaces.get(prefix)
    if (ns === undefined) {
      ns = { prefix, current: new Map(), previous: new Map() }
      this.#namespaces.set(prefix, ns)
    }
    this.#lastNamespace = ns
    return ns
  }

  /**
   * The entry for `key` as it stands, for a peek: never created, moved or reset, so a peek cannot
   * push other keys out. A missing or expired key reads as a fresh, unstored entry.
   */
  #peekEntry(prefix: string, key: string, now: number): Entry {
    const ns = this.#namespaces.get(prefix)
    const entry = ns?.current.get(key) ?? ns?.previous.get(key)
    if (entry === undefined || entry.expiresAt <= now) return emptyEntry()
    return entry
  }

  /** Puts `entry` in the current generation, turning generations over when it is full. */
  #admitKey(ns: Namespace, key: string, entry: Entry): void {
    if (this.#currentCount >= this.#generationSize) {
      for (const other of this.#namespaces.values()) {
        other.previous = other.current
        other.current = new Map()
      }
      this.#currentCount = 0
    }
    ns.current.set(key, entry)
    this.#currentCount++
  }
}
