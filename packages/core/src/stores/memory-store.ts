/**
 * @module MemoryStore: rule state in this process. It keeps state and runs the rule algorithms; it
 * holds no algorithm logic of its own.
 *
 * Bounded without a timer per key: keys live in two generations. New and recently used keys go to
 * the current one; when it holds half of `maxKeys`, the previous generation is dropped whole and the
 * current one takes its place. A key used since the last turnover is moved forward, so the keys
 * dropped are always the least recently used. Idle keys also expire lazily on access and in one
 * unref'd sweep.
 */
import { definedOnly, functionOption, given, integerOption, knownKeys } from '../options.ts'
import { algorithmOf } from '../rules/index.ts'
import type { Rule, RuleDecision, Store, StoreMode } from '../types.ts'

export interface MemoryStoreOptions {
  /** The store's clock in ms. Default `Date.now`. Tests pass a manual clock. */
  clock?: () => number
  /** Most keys held at once, across all prefixes; least recently used go first. Default 1,000,000. */
  maxKeys?: number
  /** How often idle keys are swept, in ms; 0 turns the sweep off (expiry stays lazy). Default 60,000. */
  sweepIntervalMs?: number
}

/** One key's state: one slot per rule id it has seen. */
interface Entry {
  ids: string[]
  states: unknown[]
  /** From this time on every state answers as a fresh one would. */
  expiresAt: number
}

/** The keys of one prefix, in two generations. */
interface Namespace {
  current: Map<string, Entry>
  previous: Map<string, Entry>
}

export class MemoryStore implements Store {
  readonly #clock: () => number
  readonly #maxKeys: number
  readonly #generationSize: number
  readonly #namespaces = new Map<string, Namespace>()
  /** Keys in the current generations of all namespaces. */
  #currentCount = 0
  #sweep: NodeJS.Timeout | undefined

  constructor(options?: MemoryStoreOptions) {
    const o = definedOnly(options)
    knownKeys('MemoryStore', o, ['clock', 'maxKeys', 'sweepIntervalMs'])
    this.#clock = o.clock === undefined ? Date.now : functionOption('MemoryStore.clock', o.clock)
    this.#maxKeys = integerOption('MemoryStore.maxKeys', given(o.maxKeys, 1_000_000), 2)
    this.#generationSize = Math.floor(this.#maxKeys / 2)
    const sweepIntervalMs = integerOption('MemoryStore.sweepIntervalMs', given(o.sweepIntervalMs, 60_000), 0)
    if (sweepIntervalMs > 0) {
      this.#sweep = setInterval(() => this.sweep(), sweepIntervalMs)
      this.#sweep.unref()
    }
  }

  /** Keys held now, across all prefixes. */
  get size(): number {
    let size = 0
    for (const ns of this.#namespaces.values()) size += ns.current.size + ns.previous.size
    return size
  }

  apply(prefix: string, key: string, rules: readonly Rule[], cost: number, mode: StoreMode): RuleDecision[] {
    const now = this.#now()
    const consume = mode === 'consume'
    const entry = consume ? this.#entry(prefix, key, now) : this.#peekEntry(prefix, key, now)
    const decisions = new Array<RuleDecision>(rules.length)
    let allowed = true
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const d = algorithmOf(rule).decide(stateOf(entry, rule, now, consume), rule, now, cost)
      decisions[i] = d
      if (!d.allowed) allowed = false
    }
    if (!allowed && rules.length > 1) {
      // Nothing is counted: the rules that would have admitted the call report what they have left.
      for (let i = 0; i < rules.length; i++) {
        const rule = rules[i]!
        if (decisions[i]!.allowed)
          decisions[i] = algorithmOf(rule).decide(stateOf(entry, rule, now, consume), rule, now, 0)
      }
    } else if (allowed && consume) {
      let expiresAt = Number.NEGATIVE_INFINITY
      for (let i = 0; i < rules.length; i++) {
        const rule = rules[i]!
        const algorithm = algorithmOf(rule)
        const state = stateOf(entry, rule, now, true)
        algorithm.admit(state, rule, now, cost)
        const until = algorithm.expiresAt(state, rule)
        if (until > expiresAt) expiresAt = until
      }
      if (expiresAt > entry.expiresAt) entry.expiresAt = expiresAt
    }
    return decisions
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
    this.#currentCount = 0
  }

  /** The clock in whole ms, as the algorithms and the Redis store's `TIME` take it (a clock may have fractions). */
  #now(): number {
    return Math.floor(this.#clock())
  }

  /** The entry for `key`, created or brought forward into the current generation; reset if expired. */
  #entry(prefix: string, key: string, now: number): Entry {
    let ns = this.#namespaces.get(prefix)
    if (ns === undefined) {
      ns = { current: new Map(), previous: new Map() }
      this.#namespaces.set(prefix, ns)
    }
    let entry = ns.current.get(key)
    if (entry === undefined) {
      entry = ns.previous.get(key)
      if (entry === undefined) entry = { ids: [], states: [], expiresAt: Number.NEGATIVE_INFINITY }
      else ns.previous.delete(key)
      this.#admitKey(ns, key, entry)
    }
    if (entry.expiresAt <= now && entry.ids.length > 0) {
      entry.ids.length = 0
      entry.states.length = 0
      entry.expiresAt = Number.NEGATIVE_INFINITY
    }
    return entry
  }

  /**
   * The entry for `key` as it stands, for a peek: never created, moved or reset, so a peek cannot
   * push other keys out. A missing or expired key reads as a fresh, unstored entry.
   */
  #peekEntry(prefix: string, key: string, now: number): Entry {
    const ns = this.#namespaces.get(prefix)
    const entry = ns?.current.get(key) ?? ns?.previous.get(key)
    if (entry === undefined || entry.expiresAt <= now) {
      return { ids: [], states: [], expiresAt: Number.NEGATIVE_INFINITY }
    }
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

/** The state `entry` keeps for `rule`; when missing, a fresh one, kept in `entry` only if `keep`. */
function stateOf(entry: Entry, rule: Rule, now: number, keep: boolean): unknown {
  const { ids } = entry
  for (let i = 0; i < ids.length; i++) if (ids[i] === rule.id) return entry.states[i]
  const state = algorithmOf(rule).create(rule, now)
  if (keep) {
    ids.push(rule.id)
    entry.states.push(state)
  }
  return state
}
