/**
 * @module createLimiter: resolves a call's rules, asks the store, and composes the store's per-rule
 * answers into one Decision. It knows nothing of HTTP and nothing of Redis.
 */
import { createHash } from 'node:crypto'
import { type BlockOptions, type BlockPolicy, blockOption } from './block.ts'
import { decisionChannel, storeErrorChannel } from './channels.ts'
import {
  DuplicateRuleError,
  describe,
  ErrorCode,
  InvalidCostError,
  InvalidOptionError,
  InvalidSpecError,
  RateLimitedError,
  SluiceError,
  StoreError,
} from './errors.ts'
import { hold } from './hold.ts'
import { given, isPromise, prefixOption, readOptions, storeOption } from './options.ts'
import { MAX_FIGURE, maxCost } from './rules/bounds.ts'
import { isFactoryRule, refundMark } from './rules/index.ts'
import { parseRuleSpec } from './rules/text.ts'
import { isUnlimited, type RuleInput } from './rules/unlimited.ts'
import { MemoryStore } from './stores/memory-store.ts'
import type {
  Adjustment,
  Decision,
  Rule,
  RuleDecision,
  Store,
  StoreAnswer,
  StoreMode,
  StorePlace,
} from './types.ts'

/**
 * Rules for a call: a fixed list (rules, or rules as text such as `'slidingWindow:100/1m'`), or a function
 * of the key (and the caller's context) resolved per call, which may return a promise.
 */
export type RulesOption<C> =
  | readonly (RuleInput | string)[]
  | ((key: string, context: C) => readonly RuleInput[] | null | Promise<readonly RuleInput[] | null>)

/** What the limiter does when its store fails or times out. */
export type StoreErrorPolicy<C = unknown> = 'allow' | 'deny' | 'throw' | Limiter<C>

export interface LimiterOptions<C = unknown> {
  /**
   * The rules every call must pass, all or nothing, each a rule or its text (`'fixedWindow:1000/1d'`, read
   * by `parseRuleSpec`); or a function `(key, context) => rules | null` resolved per call (a table of limits
   * per key: `null`, or a rule with `limit: -1`, means not limited).
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

export interface CallOptions<C = unknown> {
  /**
   * Units this call takes, an integer >= 1 no greater than any rule's limit (a leakyBucket or warmUp
   * admits a call whose slot is free whatever its cost, up to 2^50 ms of intervals). Default 1.
   */
  cost?: number
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
   * Releases this limiter's prefix on its store, so a new limiter may take it (an app closed and built
   * again on a long-lived store). Call it when the limiter is no longer used.
   */
  close(): void
  /**
   * Consumes and then waits out `waitMs` (leaky-bucket queues). Resolves with the decision when the
   * caller may proceed; rejects with `RateLimitedError` when denied, or an abort error from `signal`.
   */
  acquire(key: string, options?: AcquireOptions<C>): Promise<Decision>
}

/** How long a call denied by `onStoreError: 'deny'` is told to wait. */
export const STORE_ERROR_RETRY_MS = 1000

/** Keys longer than this are stored as a digest, so hostile keys cannot grow memory or Redis keys. */
export const MAX_KEY_LENGTH = 200

/** The decision for a key no rule limits. */
export const UNLIMITED_DECISION: Decision = Object.freeze({
  allowed: true,
  limit: Number.POSITIVE_INFINITY,
  remaining: Number.POSITIVE_INFINITY,
  resetMs: 0,
  retryAfterMs: 0,
  waitMs: 0,
  rule: 'unlimited',
  rules: Object.freeze([]) as readonly RuleDecision[],
  reason: 'unlimited',
})

const LIMITER_OPTIONS = ['rules', 'store', 'prefix', 'onStoreError', 'block']

/** Prefixes claimed per store object, and per place (`Store.place`'s owner) for default prefixes. */
const prefixesInUse = new WeakMap<object, Set<string>>()

/** Builds a limiter. Every option is checked here; a bad one throws `InvalidOptionError`. */
export function createLimiter<C = unknown>(options: LimiterOptions<C>): Limiter<C> {
  const o = readOptions('createLimiter', options, LIMITER_OPTIONS)
  const resolveRules = rulesOption<C>('createLimiter.rules', o.rules)
  const store = o.store === undefined ? new MemoryStore() : storeOption('createLimiter.store', o.store)
  const prefix = prefixOption('createLimiter.prefix', given(o.prefix, 'sluice'))
  const onStoreError = storeErrorPolicyOption<C>('createLimiter.onStoreError', o.onStoreError)
  const block = o.block === undefined ? undefined : blockOption('createLimiter.block', o.block)
  // A prefix left to its default is claimed in the store's place too: two stores on one Redis client would
  // otherwise share every count unseen. A prefix given on purpose may be shared on purpose.
  const place = o.prefix === undefined ? placeOf(store) : undefined
  claimPrefix(store, prefix, place)
  /**
   * Whether the store has answered every call so far synchronously (then an observed call is not timed: it
   * took no time). A store that has answered by promise once is timed on every call: a RedisStore that
   * prefetches answers some calls in the tick and others after a round trip.
   */
  let synchronous = false
  let promised = false

  /** Decides a call: synchronously when the store answers synchronously. Throws on a bad key, cost or rules. */
  function decide(
    key: string,
    options: CallOptions<C> | undefined,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    const storageKey = keyOf(key)
    const cost = costOf(options?.cost)
    const context = options?.context as C
    const resolved = resolveRules(key, context)
    if (isPromise(resolved)) {
      return resolved.then((rules) => decideUnder(rules, key, storageKey, cost, context, mode))
    }
    return decideUnder(resolved, key, storageKey, cost, context, mode)
  }

  /** Decides a call under its resolved rules. Throws on a cost no rule can admit. */
  function decideUnder(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    cost: number,
    context: C,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    if (cost !== 1) checkCost(cost, rules)
    const observed = decisionChannel.hasSubscribers
    if (rules.length === 0) {
      if (observed) publishDecision(prefix, key, cost, mode, UNLIMITED_DECISION, 0)
      return UNLIMITED_DECISION
    }
    const started = observed && !synchronous ? performance.now() : 0
    let answer: StoreAnswer | Promise<StoreAnswer>
    try {
      answer = store.apply(prefix, storageKey, rules, cost, mode, block)
    } catch (error) {
      return fallback(error, key, cost, context, mode, started)
    }
    if (isPromise(answer)) {
      promised = true
      synchronous = false
      return later(answer as PromiseLike<StoreAnswer>, rules.length, key, cost, context, mode, started)
    }
    synchronous = !promised
    if (!answers(answer, rules.length)) return fallback(malformed(answer), key, cost, context, mode, started)
    const decision = compose(answer)
    if (observed) publishDecision(prefix, key, cost, mode, decision, 0)
    return decision
  }

  /** The decision of a store that answered with a promise: a native promise even for another thenable. */
  function later(
    answer: PromiseLike<StoreAnswer>,
    n: number,
    key: string,
    cost: number,
    context: C,
    mode: StoreMode,
    started: number,
  ): Promise<Decision> {
    return Promise.resolve(answer).then(
      (rulesSaid) => {
        if (!answers(rulesSaid, n)) return fallback(malformed(rulesSaid), key, cost, context, mode, started)
        const decision = compose(rulesSaid)
        if (decisionChannel.hasSubscribers) {
          const storeMs = started === 0 ? 0 : performance.now() - started
          publishDecision(prefix, key, cost, mode, decision, storeMs)
        }
        return decision
      },
      (error) => fallback(error, key, cost, context, mode, started),
    )
  }

  function settle(key: string, options: CallOptions<C> | undefined, mode: StoreMode): Promise<Decision> {
    try {
      const decision = decide(key, options, mode)
      // decide answers a Decision or a native promise of one. Asking the answer itself (not `instanceof`)
      // lets V8 see the decision's shape, and so fulfil the promise without looking `then` up again.
      return 'then' in decision ? decision : Promise.resolve(decision)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** What `onStoreError` says when the store failed: published on `sluice:store-error` first. */
  function fallback(
    error: unknown,
    key: string,
    cost: number,
    context: C,
    mode: StoreMode,
    started: number,
  ): Promise<Decision> {
    if (storeErrorChannel.hasSubscribers) {
      // As `onStoreError: 'throw'` would surface it: coded, with a store's own error as its cause.
      storeErrorChannel.publish({ limiter: prefix, key, error: asStoreError(error) })
    }
    let answer: Promise<Decision>
    if (onStoreError === 'allow') answer = Promise.resolve(STORE_ALLOW_DECISION)
    else if (onStoreError === 'deny') answer = Promise.resolve(STORE_DENY_DECISION)
    else if (onStoreError === 'throw') return Promise.reject(asStoreError(error))
    else {
      const options = { cost, context }
      const asked = mode === 'consume' ? onStoreError.consume(key, options) : onStoreError.peek(key, options)
      answer = asked.then(asInsurance)
    }
    if (!decisionChannel.hasSubscribers) return answer
    return answer.then((decision) => {
      const storeMs = started === 0 ? 0 : performance.now() - started
      publishDecision(prefix, key, cost, mode, decision, storeMs)
      return decision
    })
  }

  /** Runs an adjustment on the store; a failure rejects with a `StoreError`, whatever `onStoreError` says. */
  async function adjust(
    key: string,
    options: AdjustOptions<C> | undefined,
    adjustment: Adjustment,
    marksOf?: readonly (string | undefined)[] | ((rules: readonly Rule[]) => readonly (string | undefined)[]),
  ): Promise<StoreAnswer | undefined> {
    const storageKey = keyOf(key)
    const cost = adjustCostOf(options?.cost)
    const rules = await resolveRules(key, options?.context as C)
    if (rules.length === 0) return undefined
    if (adjustment === 'penalize') checkCost(cost, rules, true)
    const marks = typeof marksOf === 'function' ? marksOf(rules) : marksOf
    if (typeof store.adjust !== 'function') {
      throw new SluiceError(
        ErrorCode.UNSUPPORTED,
        `This store cannot ${adjustment}: it has no adjust method.`,
      )
    }
    let answer: StoreAnswer | undefined
    try {
      answer = await store.adjust(prefix, storageKey, rules, cost, adjustment, block, marks)
    } catch (error) {
      throw asStoreError(error)
    }
    if (adjustment === 'penalize' && !answers(answer, rules.length)) throw malformed(answer)
    return answer
  }

  const limiter: Limiter<C> = {
    prefix,
    store,
    block,
    consume: (key, options) => settle(key, options, 'consume'),
    consumeNow: (key, options) => decide(key, options, 'consume'),
    peek: (key, options) => settle(key, options, 'peek'),

    async reset(key, options) {
      // The key is checked before the store is tried, so a bad key is never taken for a store failure.
      const storageKey = keyOf(key)
      const rules = await resolveRules(key, options?.context as C)
      // With blocks a key no rule limits now may still be blocked from before: its block is lifted all the same.
      if (rules.length === 0 && block === undefined) return
      // The insurance limiter is reset too, or its old counts would greet the next outage.
      if (typeof onStoreError === 'object') await onStoreError.reset(key, options)
      // A reset that did not happen is never reported as done, whatever the policy for decisions.
      try {
        await store.reset(prefix, storageKey, rules)
      } catch (error) {
        throw asStoreError(error)
      }
    },

    async refund(key, options) {
      const decision = options?.decision
      if (decision === undefined) {
        await adjust(key, options, 'refund')
        return
      }
      // Only a call the store counted has units to give back.
      if (!decision.allowed || (decision.reason !== 'rules' && decision.reason !== 'prefetch')) return
      const at = (decision as { countedAt?: unknown }).countedAt
      if (at === undefined) {
        // A store that does not say when it counted a call: its newest units, as without a decision.
        await adjust(key, options, 'refund')
        return
      }
      if (typeof at !== 'number' || !Number.isSafeInteger(at) || !Array.isArray(decision.rules)) {
        throw new InvalidOptionError('refund.decision', decision, 'a decision from consume')
      }
      await adjust(key, options, 'refund', (rules) =>
        rules.map((rule, i) => {
          // The rules may have changed since (a table edit): a rule the call was not decided by gives nothing.
          const d = decision.rules[i]
          return d !== undefined && d.rule === rule.name ? refundMark(rule, d, at) : undefined
        }),
      )
    },

    async penalize(key, options) {
      const answer = await adjust(key, options, 'penalize')
      return answer === undefined ? UNLIMITED_DECISION : compose(answer)
    },

    async unqueue(key, decision, options) {
      // Best effort: a store that cannot adjust keeps the slot taken, as any store did before.
      if (!decision.allowed || decision.waitMs === 0 || typeof store.adjust !== 'function') return
      const queues = decision.rules.map((d) => d.queue)
      if (queues.every((q) => q === undefined)) return
      await adjust(key, options, 'unqueue', queues)
    },

    async release(key, decision, options) {
      const lease = decision.lease
      if (lease === undefined) return
      const marks = decision.rules.map((d) => d.lease)
      if (typeof store.adjust !== 'function') return
      await adjust(key, options, 'release', marks)
    },

    close() {
      prefixesInUse.get(store)?.delete(prefix)
      if (place !== undefined) prefixesInUse.get(place.owner)?.delete(placed(place, prefix))
    },

    async acquire(key, options) {
      const signal = options?.signal
      signal?.throwIfAborted()
      const decision = await settle(key, options, 'consume')
      if (!decision.allowed) throw new RateLimitedError(decision)
      if (decision.waitMs > 0 && !(await hold(decision.waitMs, signal))) {
        // Given up: the slot goes back if nobody queued behind it. The abort is what the caller hears.
        await limiter.unqueue(key, decision, options).catch(() => {})
        throw signal!.reason
      }
      return decision
    },
  }
  return limiter
}

function publishDecision(
  limiter: string,
  key: string,
  cost: number,
  mode: StoreMode,
  decision: Decision,
  storeMs: number,
): void {
  decisionChannel.publish({ limiter, key, cost, mode, decision, storeMs })
}

/**
 * Checks a `rules` option (`option` names it in errors) and turns it into a per-call resolver that returns
 * only limiting rules. For `createLimiter` and for the HTTP kit, which checks it in the adapter's words.
 */
export function rulesOption<C>(
  option: string,
  value: unknown,
): (key: string, context: C) => readonly Rule[] | Promise<readonly Rule[]> {
  if (typeof value === 'function') {
    const fn = value as (key: string, context: C) => readonly RuleInput[] | null | PromiseLike<unknown>
    const checked = (rules: unknown) =>
      rules === null || rules === undefined
        ? []
        : checkRules(rules as readonly RuleInput[], 'the rules function', ErrorCode.INVALID_RULES)
    return (key, context) => {
      const rules = fn(key, context)
      // A native promise, whatever thenable the function answered with.
      return isPromise(rules) ? Promise.resolve(rules).then(checked) : checked(rules)
    }
  }
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError(option, value, 'a non-empty list of rules, or a function')
  }
  const rules = checkRules(value.map(ruleOfText(option)), option, ErrorCode.INVALID_OPTION)
  return () => rules
}

/** Builds a rule given as text (once, at construction); text outside the grammar is an error naming the option. */
function ruleOfText(option: string): (item: unknown, i: number) => RuleInput {
  return (item, i) => {
    if (typeof item !== 'string') return item as RuleInput
    try {
      return parseRuleSpec(item)
    } catch (error) {
      if (!(error instanceof InvalidSpecError)) throw error
      throw new InvalidOptionError(`${option}[${i}]`, item, `rule text such as ${error.expected}`)
    }
  }
}

/**
 * Drops unlimited markers; rejects anything a rule factory did not build (`code`), and two rules sharing a
 * state identity (`DuplicateRuleError`, `ERR_SLUICE_DUPLICATE_RULE`, at construction and per call alike).
 */
function checkRules(list: readonly RuleInput[], where: string, code: ErrorCode): readonly Rule[] {
  if (!Array.isArray(list)) throw rulesError(code, where, list, 'a list of rules or null')
  let rules: Rule[] | undefined
  for (let i = 0; i < list.length; i++) {
    const rule = list[i]!
    if (!isFactoryRule(rule)) {
      throw rulesError(
        code,
        where,
        rule,
        'rules built by fixedWindow, slidingLog, slidingWindow, tokenBucket, leakyBucket, concurrency or warmUp',
      )
    }
    if (isUnlimited(rule)) {
      rules ??= list.slice(0, i) as Rule[]
      continue
    }
    // State is keyed by identity (kind, shape, name), not by limits: two rules sharing one would share counts.
    for (let j = 0; j < i; j++) {
      const other = list[j] as Rule
      if (other.id === rule.id) throw new DuplicateRuleError(where, rule.id, other.name, rule.name)
    }
    rules?.push(rule)
  }
  return rules ?? (list as readonly Rule[])
}

function rulesError(code: ErrorCode, where: string, value: unknown, expected: string): SluiceError {
  if (code === ErrorCode.INVALID_OPTION) return new InvalidOptionError(where, value, expected)
  return new SluiceError(code, `Invalid rules from ${where}: ${describe(value)}; expected ${expected}.`)
}

/** Checks an `onStoreError` option: one of the three policies, or a limiter to ask instead. */
export function storeErrorPolicyOption<C>(option: string, value: unknown): StoreErrorPolicy<C> {
  if (value === undefined) return 'allow'
  if (value === 'allow' || value === 'deny' || value === 'throw') return value
  return limiterOption<C>(option, value, "'allow', 'deny', 'throw' or a limiter built with createLimiter")
}

/** A limiter: what `createLimiter` builds (its methods and prefix), perhaps wrapped. */
export function limiterOption<C>(
  option: string,
  value: unknown,
  expected = 'a limiter built with createLimiter',
): Limiter<C> {
  const limiter = value as Partial<Limiter<C>> | null
  if (
    limiter === null ||
    typeof limiter !== 'object' ||
    typeof limiter.consume !== 'function' ||
    typeof limiter.consumeNow !== 'function' ||
    typeof limiter.peek !== 'function' ||
    typeof limiter.reset !== 'function' ||
    typeof limiter.prefix !== 'string'
  ) {
    throw new InvalidOptionError(option, value, expected)
  }
  return value as Limiter<C>
}

function claimPrefix(store: Store, prefix: string, place: StorePlace | undefined): void {
  const inStore = claimsOf(store)
  if (inStore.has(prefix)) {
    throw new SluiceError(
      ErrorCode.PREFIX_COLLISION,
      `Another limiter on this store already uses prefix "${prefix}": give each limiter its own prefix, or share one limiter.`,
    )
  }
  if (place !== undefined) {
    const inPlace = claimsOf(place.owner)
    if (inPlace.has(placed(place, prefix))) {
      throw new SluiceError(
        ErrorCode.PREFIX_COLLISION,
        `Another limiter already counts under the default prefix "${prefix}" on this store's client, in another store: the two would share every count. Give each limiter (each rate-limit middleware) its own prefix, e.g. prefix: 'login'; give two the same prefix only to share their counts.`,
      )
    }
    inPlace.add(placed(place, prefix))
  }
  inStore.add(prefix)
}

/** A store's place, when it names one an object can stand for (a custom store's odd answer names none). */
function placeOf(store: Store): StorePlace | undefined {
  const place = store.place
  if (place === null || typeof place !== 'object') return undefined
  const { owner, namespace } = place
  const isObject = (typeof owner === 'object' && owner !== null) || typeof owner === 'function'
  return isObject && typeof namespace === 'string' ? place : undefined
}

function claimsOf(owner: object): Set<string> {
  let inUse = prefixesInUse.get(owner)
  if (inUse === undefined) {
    inUse = new Set()
    prefixesInUse.set(owner, inUse)
  }
  return inUse
}

/** A prefix claimed in a place, apart from the same prefix under another store prefix there. */
function placed(place: StorePlace, prefix: string): string {
  return `${place.namespace}\u0000${prefix}`
}

function keyOf(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new SluiceError(ErrorCode.INVALID_KEY, `Invalid key ${describe(key)}: expected a non-empty string.`)
  }
  // A digest keeps stored keys short; the NUL mark keeps digests apart from every key stored as is.
  if (key.length > MAX_KEY_LENGTH || key.charCodeAt(0) === 0) {
    return `\u0000${createHash('sha256').update(key).digest('base64url')}`
  }
  return key
}

function costOf(cost: unknown): number {
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new InvalidCostError(cost, 'expected an integer >= 1')
  }
  return cost
}

/** A refund's or a penalty's cost: an integer from 1 to 2^50 (it may exceed a limit; a refund then empties). */
function adjustCostOf(cost: unknown): number {
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1 || cost > MAX_FIGURE) {
    throw new InvalidCostError(cost, 'expected an integer from 1 to 2^50')
  }
  return cost
}

/** Refuses a cost some rule cannot take in one consume (or, `penalty`, one penalty): see `maxCost`. */
function checkCost(cost: number, rules: readonly Rule[], penalty = false): void {
  for (const rule of rules) {
    const { max, why } = maxCost(rule, penalty)
    if (cost > max) throw new InvalidCostError(cost, why)
  }
}

/**
 * Whether a store's answer is what the Store contract says: one RuleDecision per rule. A custom store's
 * answer is data to check like any other: a wrong one is a store failure, for `onStoreError` to decide.
 */
function answers(answer: unknown, n: number): answer is StoreAnswer {
  if (!Array.isArray(answer) || answer.length !== n) return false
  for (let i = 0; i < n; i++) {
    const d: unknown = answer[i]
    if (d === null || typeof d !== 'object') return false
  }
  return true
}

function malformed(answer: unknown): StoreError {
  return new StoreError(
    ErrorCode.STORE_ERROR,
    `The store answered ${describe(answer)}: expected one decision per rule of the call.`,
  )
}

/** One Decision from the store's per-rule answers. */
function compose(rules: StoreAnswer): Decision {
  if (rules.length > 1) return composeSeveral(rules)
  const d = rules[0]!
  const decision: { -readonly [F in keyof Decision]: Decision[F] } = {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    waitMs: d.waitMs,
    rule: d.rule,
    rules,
    reason: rules.reason ?? 'rules',
  }
  if (rules.countedAt !== undefined) decision.countedAt = rules.countedAt
  return d.lease === undefined ? decision : { ...decision, lease: d.lease }
}

/** The Decision of several rules: the denying one decides, else the one with least remaining. */
function composeSeveral(rules: StoreAnswer): Decision {
  let deciding = rules[0]!
  let allowed = true
  let waitMs = 0
  let lease: string | undefined
  for (const d of rules) {
    if (d.lease !== undefined) lease = d.lease
    if (d.waitMs > waitMs) waitMs = d.waitMs
    if (!d.allowed) {
      if (allowed || d.retryAfterMs > deciding.retryAfterMs) deciding = d
      allowed = false
    } else if (allowed && d.remaining < deciding.remaining) deciding = d
  }
  const decision: { -readonly [F in keyof Decision]: Decision[F] } = {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: allowed ? 0 : deciding.retryAfterMs,
    waitMs: allowed ? waitMs : 0,
    rule: deciding.rule,
    rules,
    reason: rules.reason ?? 'rules',
  }
  if (rules.countedAt !== undefined) decision.countedAt = rules.countedAt
  return lease === undefined ? decision : { ...decision, lease }
}

const STORE_ALLOW_DECISION: Decision = Object.freeze({
  ...UNLIMITED_DECISION,
  rule: '',
  reason: 'store-error',
})
const STORE_DENY_DECISION: Decision = Object.freeze({
  ...STORE_ALLOW_DECISION,
  allowed: false,
  limit: 0,
  remaining: 0,
  resetMs: STORE_ERROR_RETRY_MS,
  retryAfterMs: STORE_ERROR_RETRY_MS,
})

/** The insurance limiter's decision, marked as its. */
function asInsurance(decision: Decision): Decision {
  return { ...decision, reason: 'insurance' }
}

function asStoreError(error: unknown): SluiceError {
  if (error instanceof SluiceError) return error
  return new StoreError(ErrorCode.STORE_ERROR, `The rate-limit store failed: ${String(error)}`, {
    cause: error,
  })
}
