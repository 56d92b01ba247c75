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
import { functionOption, given, integerOption, MAX_TIMER_MS, readOptions } from '../options.ts'
import type { Algorithm } from '../rules/algorithm.ts'
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

/**
 * One key's state, one slot per rule id it has seen. Most keys only ever see one rule, so the first
 * rule's state sits in the entry itself (`id`, `state`): a call then reaches it without an array walk,
 * and a key costs two objects (entry and state) instead of four. Further rules go in `ids`/`states`.
 */
interface Entry {
  id: string | undefined
  state: unknown
  ids: string[] | undefined
  states: unknown[] | undefined
  /** From this time on every state answers as a fresh one would. */
  expiresAt: number
}

function emptyEntry(): Entry {
  return {
    id: undefined,
    state: undefined,
    ids: undefined,
    states: undefined,
    expiresAt: Number.NEGATIVE_INFINITY,
  }
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
    if (rules.length === 1) return [applyOne(entry, rules[0]!, now, cost, consume)]
    const n = rules.length
    const algorithms = new Array<Algorithm<Rule, unknown>>(n)
    const states = new Array<unknown>(n)
    const decisions = new Array<RuleDecision>(n)
    let allowed = true
    for (let i = 0; i < n; i++) {
      const rule = rules[i]!
      const algorithm = algorithmOf(rule)
      const state = stateOf(entry, rule, now, consume, algorithm)
      const d = algorithm.decide(state, rule, now, cost)
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
      for (let i = 0; i < n; i++) {
        const until = admit(algorithms[i]!, states[i], rules[i]!, now, cost)
        if (until > expiresAt) expiresAt = until
      }
      entry.expiresAt = expiresAt
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
      if (entry === undefined) entry = emptyEntry()
      else ns.previous.delete(key)
      this.#admitKey(ns, key, entry)
    }
    if (entry.expiresAt <= now && entry.id !== undefined) {
      entry.id = undefined
      entry.state = undefined
      entry.ids = undefined
      entry.states = undefined
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

/** The one rule of a call: the common case, without the arrays of the all-or-nothing loop. */
function applyOne(entry: Entry, rule: Rule, now: number, cost: number, consume: boolean): RuleDecision {
  const algorithm = algorithmOf(rule)
  const state = stateOf(entry, rule, now, consume, algorithm)
  const d = algorithm.decide(state, rule, now, cost)
  if (consume && d.allowed) {
    const until = admit(algorithm, state, rule, now, cost)
    if (until > entry.expiresAt) entry.expiresAt = until
  }
  return d
}

/** Records an admitted call; returns when the state will answer as a fresh one would. */
function admit(
  algorithm: Algorithm<Rule, unknown>,
  state: unknown,
  rule: Rule,
  now: number,
  cost: number,
): number {
  algorithm.admit(state, rule, now, cost)
  return algorithm.expiresAt(state, rule)
}

/** The state `entry` keeps for `rule`; when missing, a fresh one, kept in `entry` only if `keep`. */
function stateOf(
  entry: Entry,
  rule: Rule,
  now: number,
  keep: boolean,
  algorithm: Algorithm<Rule, unknown>,
): unknown {
  const id = rule.id
  if (entry.id === id) return entry.state
  const { ids } = entry
  if (ids !== undefined) for (let i = 0; i < ids.length; i++) if (ids[i] === id) return entry.states![i]
  const state = algorithm.create(rule, now)
  if (keep) {
    if (entry.id === undefined) {
      entry.id = id
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
