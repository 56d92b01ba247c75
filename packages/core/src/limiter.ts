/**
 * @module createLimiter: resolves a call's rules, asks the store, and composes the store's per-rule
 * answers into one Decision. It knows nothing of HTTP and nothing of Redis.
 */
import { createHash } from 'node:crypto'
import {
  describe,
  ErrorCode,
  InvalidCostError,
  InvalidOptionError,
  RateLimitedError,
  SluiceError,
  StoreError,
} from './errors.ts'
import { hold } from './hold.ts'
import { definedOnly, given, isPromise, knownKeys, prefixOption, storeOption } from './options.ts'
import { isUnlimited, type RuleInput } from './rules/unlimited.ts'
import { MemoryStore } from './stores/memory-store.ts'
import type { Decision, Rule, RuleDecision, Store, StoreMode } from './types.ts'

/** Rules for a call: a fixed list, or a function of the key (and the caller's context) resolved per call. */
export type RulesOption<C> = readonly RuleInput[] | ((key: string, context: C) => readonly RuleInput[] | null)

/** What the limiter does when its store fails or times out. */
export type StoreErrorPolicy<C = unknown> = 'allow' | 'deny' | 'throw' | Limiter<C>

export interface LimiterOptions<C = unknown> {
  /**
   * The rules every call must pass, all or nothing; or a function `(key, context) => rules | null`
   * resolved per call (a table of limits per key: `null`, or a rule with `limit: -1`, means not limited).
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
}

export interface CallOptions<C = unknown> {
  /** Units this call takes, an integer >= 1 no greater than any rule's limit. Default 1. */
  cost?: number
  /** Passed to a rules function. */
  context?: C
}

export interface AcquireOptions<C = unknown> extends CallOptions<C> {
  /** Stops waiting when aborted; the call's place in the queue is not given back. */
  signal?: AbortSignal
}

export interface Limiter<C = unknown> {
  readonly prefix: string
  readonly store: Store
  /** Decides a call and, when it is admitted, counts it. */
  consume(key: string, options?: CallOptions<C>): Promise<Decision>
  /** The decision `consume` would give now, counting nothing. */
  peek(key: string, options?: CallOptions<C>): Promise<Decision>
  /** Forgets the key's state under every rule that applies to it. */
  reset(key: string, options?: { context?: C }): Promise<void>
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
})

const prefixesInUse = new WeakMap<Store, Set<string>>()

/** Builds a limiter. Every option is checked here; a bad one throws `InvalidOptionError`. */
export function createLimiter<C = unknown>(options: LimiterOptions<C>): Limiter<C> {
  const o = definedOnly(options)
  knownKeys('createLimiter', o, ['rules', 'store', 'prefix', 'onStoreError'])
  const resolveRules = rulesResolver(o.rules)
  const store = o.store === undefined ? new MemoryStore() : storeOption('createLimiter.store', o.store)
  const prefix = prefixOption('createLimiter.prefix', given(o.prefix, 'sluice'))
  const onStoreError = storeErrorPolicy<C>(o.onStoreError)
  claimPrefix(store, prefix)

  /**
   * Decides a call, synchronously when the store answers synchronously (the memory store): the HTTP kit
   * then answers without a promise hop. Throws on a bad key, cost or rules function.
   */
  function decideNow(key: string, callCost: unknown, context: C, mode: StoreMode): Decided {
    const storageKey = keyOf(key)
    const cost = costOf(callCost)
    const rules = resolveRules(key, context)
    checkCost(cost, rules)
    if (rules.length === 0) return UNLIMITED_DECISION
    let answer: readonly RuleDecision[] | Promise<readonly RuleDecision[]>
    try {
      answer = store.apply(prefix, storageKey, rules, cost, mode)
    } catch (error) {
      return fallback(error, key, callCost, context, mode)
    }
    if (isPromise(answer)) {
      // A native promise even when the store answers with another thenable.
      return Promise.resolve(answer).then(compose, (error) => fallback(error, key, callCost, context, mode))
    }
    return compose(answer)
  }

  function decide(key: string, options: CallOptions<C> | undefined, mode: StoreMode): Promise<Decision> {
    try {
      const decision = decideNow(key, options?.cost, options?.context as C, mode)
      return decision instanceof Promise ? decision : Promise.resolve(decision)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  function fallback(
    error: unknown,
    key: string,
    cost: unknown,
    context: C,
    mode: StoreMode,
  ): Promise<Decision> {
    if (onStoreError === 'allow') return Promise.resolve(STORE_ALLOW_DECISION)
    if (onStoreError === 'deny') return Promise.resolve(STORE_DENY_DECISION)
    if (onStoreError === 'throw') return Promise.reject(asStoreError(error))
    const options = { cost: cost as number | undefined, context }
    return mode === 'consume' ? onStoreError.consume(key, options) : onStoreError.peek(key, options)
  }

  const limiter: Limiter<C> = {
    prefix,
    store,
    consume: (key, options) => decide(key, options, 'consume'),
    peek: (key, options) => decide(key, options, 'peek'),

    async reset(key, options) {
      // The key is checked before the store is tried, so a bad key is never taken for a store failure.
      const storageKey = keyOf(key)
      const rules = resolveRules(key, options?.context as C)
      if (rules.length === 0) return
      // The insurance limiter is reset too, or its old counts would greet the next outage.
      if (typeof onStoreError === 'object') await onStoreError.reset(key, options)
      // A reset that did not happen is never reported as done, whatever the policy for decisions.
      try {
        await store.reset(prefix, storageKey, rules)
      } catch (error) {
        throw asStoreError(error)
      }
    },

    close() {
      prefixesInUse.get(store)?.delete(prefix)
    },

    async acquire(key, options) {
      const signal = options?.signal
      signal?.throwIfAborted()
      const decision = await decide(key, options, 'consume')
      if (!decision.allowed) throw new RateLimitedError(decision)
      if (decision.waitMs > 0 && !(await hold(decision.waitMs, signal))) throw signal!.reason
      return decision
    },
  }
  immediate.set(limiter, {
    consume: limiter.consume,
    now: (key, cost, context) => decideNow(key, cost, context as C, 'consume'),
  })
  return limiter
}

/** A decision, or the promise of one when the store answers asynchronously. */
type Decided = Decision | Promise<Decision>

/** Each limiter built here: its own `consume`, and a consume that answers synchronously when its store does. */
const immediate = new WeakMap<
  object,
  { consume: unknown; now: (key: string, cost: number | undefined, context: unknown) => Decided }
>()

/**
 * `limiter.consume`, but without the promise when the store answers synchronously (for core's HTTP kit,
 * so a request limited on a memory store goes on in the same tick); otherwise a native promise. A limiter
 * not built by `createLimiter`, or whose `consume` has been replaced (say, wrapped for metrics), is asked
 * through `consume`. Throws where `consume` would reject on its arguments.
 */
export function consumeNow<C>(
  limiter: Limiter<C>,
  key: string,
  cost: number | undefined,
  context: C,
): Decided {
  const own = immediate.get(limiter)
  if (own !== undefined && own.consume === limiter.consume) return own.now(key, cost, context)
  return Promise.resolve(limiter.consume(key, { cost, context }))
}

/** Turns the `rules` option into a per-call resolver that returns only limiting rules. */
function rulesResolver<C>(option: unknown): (key: string, context: C) => readonly Rule[] {
  if (typeof option === 'function') {
    const fn = option as (key: string, context: C) => readonly RuleInput[] | null
    return (key, context) => {
      const rules = fn(key, context)
      return rules === null || rules === undefined
        ? []
        : checkRules(rules, 'the rules function', ErrorCode.INVALID_RULES)
    }
  }
  if (!Array.isArray(option) || option.length === 0) {
    throw new InvalidOptionError('createLimiter.rules', option, 'a non-empty list of rules, or a function')
  }
  const rules = checkRules(option as readonly RuleInput[], 'createLimiter.rules', ErrorCode.INVALID_OPTION)
  return () => rules
}

const RULE_KINDS = new Set(['fixedWindow', 'slidingLog', 'slidingWindow', 'tokenBucket', 'leakyBucket'])

/** Drops unlimited markers; rejects anything not built by a rule factory, and duplicate rules. */
function checkRules(list: readonly RuleInput[], where: string, code: ErrorCode): readonly Rule[] {
  if (!Array.isArray(list)) throw rulesError(code, where, list, 'a list of rules or null')
  const rules: Rule[] = []
  for (const rule of list) {
    if (rule === null || typeof rule !== 'object' || !(RULE_KINDS.has(rule.kind) || isUnlimited(rule))) {
      throw rulesError(
        code,
        where,
        rule,
        'rules built by fixedWindow, slidingLog, slidingWindow, tokenBucket or leakyBucket',
      )
    }
    if (isUnlimited(rule)) continue
    if (rules.some((r) => r.id === rule.id)) {
      throw rulesError(code, where, rule.name, 'no two rules with the same algorithm and numbers')
    }
    rules.push(rule)
  }
  return rules.length === list.length ? (list as readonly Rule[]) : rules
}

function rulesError(code: ErrorCode, where: string, value: unknown, expected: string): SluiceError {
  if (code === ErrorCode.INVALID_OPTION) return new InvalidOptionError(where, value, expected)
  return new SluiceError(code, `Invalid rules from ${where}: ${describe(value)}; expected ${expected}.`)
}

function storeErrorPolicy<C>(value: unknown): StoreErrorPolicy<C> {
  if (value === undefined) return 'allow'
  if (value === 'allow' || value === 'deny' || value === 'throw') return value
  if (value !== null && typeof value === 'object' && typeof (value as Limiter<C>).consume === 'function') {
    return value as Limiter<C>
  }
  throw new InvalidOptionError('createLimiter.onStoreError', value, "'allow', 'deny', 'throw' or a limiter")
}

function claimPrefix(store: Store, prefix: string): void {
  let inUse = prefixesInUse.get(store)
  if (inUse === undefined) {
    inUse = new Set()
    prefixesInUse.set(store, inUse)
  }
  if (inUse.has(prefix)) {
    throw new SluiceError(
      ErrorCode.PREFIX_COLLISION,
      `Another limiter on this store already uses prefix "${prefix}": give each limiter its own prefix, or share one limiter.`,
    )
  }
  inUse.add(prefix)
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

function checkCost(cost: number, rules: readonly Rule[]): void {
  if (cost === 1) return
  for (const rule of rules) {
    const limit = 'limit' in rule ? rule.limit : rule.capacity
    if (cost > limit) throw new InvalidCostError(cost, `rule ${rule.name} can never admit more than ${limit}`)
  }
}

/** One Decision from the store's per-rule answers. */
function compose(rules: readonly RuleDecision[]): Decision {
  if (rules.length === 1) {
    const d = rules[0]!
    return {
      allowed: d.allowed,
      limit: d.limit,
      remaining: d.remaining,
      resetMs: d.resetMs,
      retryAfterMs: d.retryAfterMs,
      waitMs: d.waitMs,
      rule: d.rule,
      rules,
    }
  }
  let deciding = rules[0]!
  let allowed = true
  let waitMs = 0
  for (const d of rules) {
    if (d.waitMs > waitMs) waitMs = d.waitMs
    if (!d.allowed) {
      if (allowed || d.retryAfterMs > deciding.retryAfterMs) deciding = d
      allowed = false
    } else if (allowed && d.remaining < deciding.remaining) deciding = d
  }
  return {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: allowed ? 0 : deciding.retryAfterMs,
    waitMs: allowed ? waitMs : 0,
    rule: deciding.rule,
    rules,
  }
}

const STORE_ALLOW_DECISION: Decision = Object.freeze({ ...UNLIMITED_DECISION, rule: 'store-unavailable' })
const STORE_DENY_DECISION: Decision = Object.freeze({
  ...UNLIMITED_DECISION,
  allowed: false,
  limit: 0,
  remaining: 0,
  resetMs: STORE_ERROR_RETRY_MS,
  retryAfterMs: STORE_ERROR_RETRY_MS,
  rule: 'store-unavailable',
})

function asStoreError(error: unknown): SluiceError {
  if (error instanceof SluiceError) return error
  return new StoreError(ErrorCode.STORE_ERROR, `The rate-limit store failed: ${String(error)}`, {
    cause: error,
  })
}
