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
import {
  type BlockPolicy,
  type BlockState,
  beginBlock,
  blockExpiresAt,
  blockedAnswer,
  blockLeft,
  withBlock,
} from '../block.ts'
import { functionOption, given, integerOption, MAX_TIMER_MS, readOptions } from '../options.ts'
import type { Algorithm } from '../rules/algorithm.ts'
import { type ConcurrencyState, newLease, release } from '../rules/concurrency.ts'
import { algorithmOf } from '../rules/index.ts'
import { type LeakyBucketState, queueMark, unqueue } from '../rules/leaky-bucket.ts'
import type {
  Adjustment,
  DecisionReason,
  Rule,
  RuleDecision,
  Store,
  StoreAnswer,
  StoreMode,
} from '../types.ts'

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
  /** The key's block and the starts escalation counts, once the key has been blocked. */
  block: BlockState | undefined
  /** From this time on every state (and the block) answers as a fresh one would. */
  expiresAt: number
}

function emptyEntry(): Entry {
  return {
    id: undefined,
    state: undefined,
    ids: undefined,
    states: undefined,
    block: undefined,
    expiresAt: Number.NEGATIVE_INFINITY,
  }
}

/** What `apply` answers: a consume the rules admitted says when it was counted (`countedAt`, the store's ms). */
type Answer = RuleDecision[] & { reason?: DecisionReason; countedAt?: number }

/**
 * Says in an admitted consume's answer when it was counted. Not enumerable: the answer becomes the
 * decision's `rules`, whose JSON and equality stay those of the list of rule decisions.
 */
function counted(answer: Answer, at: number): void {
  Object.defineProperty(answer, 'countedAt', { value: at })
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

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Answer {
    const now = this.#now()
    const consume = mode === 'consume'
    const entry = consume ? this.#entry(prefix, key, now) : this.#peekEntry(prefix, key, now)
    if (block !== undefined) return this.#applyBlocking(entry, rules, now, cost, consume, block)
    if (rules.length === 1) {
      const d = applyOne(entry, rules[0]!, now, cost, consume)
      const out: Answer = [d]
      if (consume && d.allowed) counted(out, now)
      return out
    }
    const decisions = decideAll(entry, rules, now, cost, consume)
    if (consume && decisions.allowed) counted(decisions.out, now)
    return decisions.out
  }

  /** `apply` for a limiter with blocks: a blocked key is denied outright; a consume the rules deny begins a block. */
  #applyBlocking(
    entry: Entry,
    rules: readonly Rule[],
    now: number,
    cost: number,
    consume: boolean,
    block: BlockPolicy,
  ): Answer {
    const left = blockLeft(entry.block, now)
    if (left > 0) return blockedAnswer(rules, left)
    const decisions = decideAll(entry, rules, now, cost, consume)
    if (consume && !decisions.allowed) return this.#block(entry, decisions.out, block, now)
    if (consume) counted(decisions.out, now)
    return decisions.out
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
      } else if (adjustment === 'release' && rule.kind === 'concurrency') {
        release(state as ConcurrencyState, now, mark)
      }
      // A state written under other numbers (an edited limit) may now live longer than the entry did, as
      // the Redis key's TTL follows what the script writes: the entry must not be forgotten before it.
      const until = algorithmOf(rule).expiresAt(state, rule)
      if (until > entry.expiresAt) entry.expiresAt = until
    }
    return undefined
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

  /** The clock in whole ms, as the algorithms and the Redis store's `TIME` take it (a clock may have fractions). */
  #now(): number {
    return Math.floor(this.#clock())
  }

  /** The entry for `key`, created or brought forward into the current generation; reset if expired. */
  #entry(prefix: string, key: string, now: number): Entry {
    const ns = this.#namespace(prefix)
    let entry = ns.current.get(key)
    if (entry === undefined) {
      entry = ns.previous.get(key)
      if (entry === undefined) entry = emptyEntry()
      else ns.previous.delete(key)
      this.#admitKey(ns, key, entry)
    }
    if (entry.expiresAt <= now && (entry.id !== undefined || entry.block !== undefined)) {
      entry.id = undefined
      entry.state = undefined
      entry.ids = undefined
      entry.states = undefined
      entry.block = undefined
      entry.expiresAt = Number.NEGATIVE_INFINITY
    }
    return entry
  }

  /** The namespace of `prefix`, created when missing. */
  #namespace(prefix: string): Namespace {
    const last = this.#lastNamespace
    if (last !== undefined && last.prefix === prefix) return last
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

/**
 * Every rule of a call, all or nothing: when any rule denies, nothing is counted and the rules that would
 * have admitted the call report what they have left. A queued leakyBucket call learns where it left the queue.
 */
function decideAll(
  entry: Entry,
  rules: readonly Rule[],
  now: number,
  cost: number,
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
    // One lease for the call, shared by its concurrency rules.
    let lease: string | undefined
    for (let i = 0; i < n; i++) {
      const rule = rules[i]!
      if (rule.kind === 'concurrency') lease ??= newLease(cost)
      const until = admit(algorithms[i]!, states[i], rule, now, cost, lease)
      if (until > expiresAt) expiresAt = until
      if (decisions[i]!.waitMs > 0 && rule.kind === 'leakyBucket') {
        decisions[i] = { ...decisions[i]!, queue: queueMark(states[i] as LeakyBucketState) }
      } else if (rule.kind === 'concurrency') decisions[i] = { ...decisions[i]!, lease }
    }
    entry.expiresAt = expiresAt
  }
  return { out: decisions, allowed }
}

/** The one rule of a call: the common case, without the arrays of the all-or-nothing loop. */
function applyOne(entry: Entry, rule: Rule, now: number, cost: number, consume: boolean): RuleDecision {
  const algorithm = algorithmOf(rule)
  const state = stateOf(entry, rule, now, consume, algorithm)
  const d = algorithm.decide(state, rule, now, cost)
  if (consume && d.allowed) {
    const lease = rule.kind === 'concurrency' ? newLease(cost) : undefined
    const until = admit(algorithm, state, rule, now, cost, lease)
    if (until > entry.expiresAt) entry.expiresAt = until
    if (d.waitMs > 0 && rule.kind === 'leakyBucket') {
      return { ...d, queue: queueMark(state as LeakyBucketState) }
    }
    if (lease !== undefined) return { ...d, lease }
  }
  return d
}

/** The state `entry` keeps for `rule`, or undefined when it keeps none. */
function existingState(entry: Entry, rule: Rule): unknown {
  const id = rule.id
  if (entry.id === id) return entry.state
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
