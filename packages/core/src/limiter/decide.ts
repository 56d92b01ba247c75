/**
 * @module The consume and peek path of a limiter: check the call, resolve its rules, ask the store, and
 * compose its answer into a Decision, in the same tick when the store answers synchronously. A failed
 * store call goes to `onStoreError`. Every decision is published on `sluice:decision` when observed.
 */
import { decisionChannel, storeErrorChannel } from '../channels.ts'
import { isPromise } from '../options.ts'
import { applyOneRule, MemoryStore } from '../store/memory-store.ts'
import type { BlockPolicy, Costs, Decision, Rule, Store, StoreAnswer, StoreMode } from '../types.ts'
import { callCost, costOf, keyOf, type NamedCosts } from './checks.ts'
import {
  answers,
  asInsurance,
  asStoreError,
  compose,
  composeOne,
  malformed,
  STORE_ALLOW_DECISION,
  STORE_DENY_DECISION,
  UNLIMITED_DECISION,
} from './decisions.ts'
import type { CallOptions, RuleCosts, StoreErrorPolicy } from './types.ts'

/** A call's rules, resolved per call: a fixed list, or what a rules function answered (checked). */
export type ResolveRules<C> = (key: string, context: C) => readonly Rule[] | Promise<readonly Rule[]>

/**
 * A memory store's own `apply`: a store whose `apply` is this one (not a subclass's, nor a spy put on it)
 * answers a one-rule call by its one-rule path, to the same effect.
 */
const memoryApply = MemoryStore.prototype.apply

/** What a limiter decides with: its checked options. */
export interface LimiterParts<C> {
  readonly prefix: string
  readonly store: Store
  readonly block: BlockPolicy | undefined
  readonly onStoreError: StoreErrorPolicy<C>
  readonly resolveRules: ResolveRules<C>
}

/** Decides calls for one limiter. */
export class Decider<C> {
  readonly #parts: LimiterParts<C>
  /**
   * Whether the store has answered every call so far synchronously (then an observed call is not timed: it
   * took no time). A store that has answered by promise once is timed on every call: a RedisStore that
   * prefetches answers some calls in the tick and others after a round trip.
   */
  #synchronous = false
  #promised = false

  constructor(parts: LimiterParts<C>) {
    this.#parts = parts
  }

  /** `decide`, always as a promise: a bad key, cost or rules rejects it. */
  promised(key: string, options: CallOptions<C> | undefined, mode: StoreMode): Promise<Decision> {
    try {
      const decision = this.decide(key, options, mode)
      // decide answers a Decision or a native promise of one. Asking the answer itself (not `instanceof`)
      // lets V8 see the decision's shape, and so fulfil the promise without looking `then` up again.
      return 'then' in decision ? decision : Promise.resolve(decision)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Decides a call: synchronously when the store answers synchronously. Throws on a bad key, cost or rules. */
  decide(key: string, options: CallOptions<C> | undefined, mode: StoreMode): Decision | Promise<Decision> {
    const storageKey = keyOf(key)
    const cost = options === undefined ? 1 : costOf(options.cost)
    const context = options?.context as C
    const resolved = this.#parts.resolveRules(key, context)
    // A fixed list is a list; a rules function's answer may be a promise (a native one: rulesOption).
    if (!Array.isArray(resolved)) {
      return this.#resolved(resolved as Promise<readonly Rule[]>, key, storageKey, cost, context, mode)
    }
    return this.#under(resolved as readonly Rule[], key, storageKey, cost, context, mode)
  }

  /** `#under` once a rules function's promise has settled (out of `decide`, which every call runs). */
  #resolved(
    resolved: Promise<readonly Rule[]>,
    key: string,
    storageKey: string,
    cost: number | NamedCosts,
    context: C,
    mode: StoreMode,
  ): Promise<Decision> {
    return resolved.then((rules) => this.#under(rules, key, storageKey, cost, context, mode))
  }

  /**
   * Decides a call under its resolved rules. The commonest call, of cost 1 under one rule on a memory store
   * that nobody observes, is answered here by the store's one-rule path, to the effect of its `apply`; a
   * call of another cost goes by `#costly`, every other call by `#ask`. They are apart so that the compiler
   * can take this path whole into the limiter's call: a function it takes in counts against a budget
   * however much of it a call runs.
   */
  #under(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    cost: number | NamedCosts,
    context: C,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    if (cost !== 1) return this.#costly(rules, key, storageKey, cost, context, mode)
    const { prefix, store, block } = this.#parts
    if (
      rules.length !== 1 ||
      store.apply !== memoryApply ||
      block !== undefined ||
      decisionChannel.hasSubscribers
    ) {
      return this.#ask(rules, key, storageKey, 1, context, mode)
    }
    let decision: Decision
    try {
      decision = (store as MemoryStore)[applyOneRule](prefix, storageKey, rules[0]!, 1, mode, composeOne)
    } catch (error) {
      return this.#fallback(error, rules, key, 1, context, mode, 0)
    }
    this.#synchronous = !this.#promised
    return decision
  }

  /**
   * A call of a cost other than 1: checked against its rules (a name no rule has, a cost a rule can never
   * admit: a coded error), decided as `#under` decides (a number under one rule on a memory store by the
   * same one-rule path), and an admitted call's decision records what it reserved (`Decision.cost`).
   */
  #costly(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    given: number | NamedCosts,
    context: C,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    const cost = callCost(given, rules)
    const { prefix, store, block } = this.#parts
    let decision: Decision | Promise<Decision>
    if (
      typeof cost !== 'number' ||
      rules.length !== 1 ||
      store.apply !== memoryApply ||
      block !== undefined ||
      decisionChannel.hasSubscribers
    ) {
      decision = this.#ask(rules, key, storageKey, cost, context, mode)
    } else {
      try {
        decision = (store as MemoryStore)[applyOneRule](prefix, storageKey, rules[0]!, cost, mode, composeOne)
        this.#synchronous = !this.#promised
      } catch (error) {
        decision = this.#fallback(error, rules, key, cost, context, mode, 0)
      }
    }
    if (mode !== 'consume') return decision
    return isPromise(decision) ? decision.then((d) => reserved(d, cost)) : reserved(decision, cost)
  }

  /** A call `#under` does not answer itself: by `#observed` when it has no rule or is observed, else by `apply`. */
  #ask(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    cost: number | Costs,
    context: C,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    if (rules.length === 0 || decisionChannel.hasSubscribers) {
      return this.#observed(rules, key, storageKey, cost, context, mode)
    }
    return this.#askStore(rules, key, storageKey, cost, context, mode, 0)
  }

  /** A call with no rule, or one `sluice:decision` observes: published, timed when the store takes time. */
  #observed(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    cost: number | Costs,
    context: C,
    mode: StoreMode,
  ): Decision | Promise<Decision> {
    const observed = decisionChannel.hasSubscribers
    if (rules.length === 0) {
      if (observed) publishDecision(this.#parts.prefix, key, cost, mode, UNLIMITED_DECISION, 0)
      return UNLIMITED_DECISION
    }
    const started = observed && !this.#synchronous ? performance.now() : 0
    const decision = this.#askStore(rules, key, storageKey, cost, context, mode, started)
    // A promised decision is published when it settles (`#later`, `#fallback`).
    if (observed && !isPromise(decision)) publishDecision(this.#parts.prefix, key, cost, mode, decision, 0)
    return decision
  }

  /** Asks the store's `apply` and composes its answer; a failed or malformed answer goes to `#fallback`. */
  #askStore(
    rules: readonly Rule[],
    key: string,
    storageKey: string,
    cost: number | Costs,
    context: C,
    mode: StoreMode,
    started: number,
  ): Decision | Promise<Decision> {
    const { prefix, store, block } = this.#parts
    let answer: StoreAnswer | Promise<StoreAnswer>
    try {
      answer = store.apply(prefix, storageKey, rules, cost, mode, block)
    } catch (error) {
      return this.#fallback(error, rules, key, cost, context, mode, started)
    }
    if (isPromise(answer)) {
      this.#promised = true
      this.#synchronous = false
      return this.#later(answer as PromiseLike<StoreAnswer>, rules, key, cost, context, mode, started)
    }
    this.#synchronous = !this.#promised
    if (!answers(answer, rules.length)) {
      return this.#fallback(malformed(answer), rules, key, cost, context, mode, started)
    }
    return compose(answer)
  }

  /** The decision of a store that answered with a promise: a native promise even for another thenable. */
  #later(
    answer: PromiseLike<StoreAnswer>,
    rules: readonly Rule[],
    key: string,
    cost: number | Costs,
    context: C,
    mode: StoreMode,
    started: number,
  ): Promise<Decision> {
    return Promise.resolve(answer).then(
      (rulesSaid) => {
        if (!answers(rulesSaid, rules.length))
          return this.#fallback(malformed(rulesSaid), rules, key, cost, context, mode, started)
        const decision = compose(rulesSaid)
        if (decisionChannel.hasSubscribers) this.#publishTimed(key, cost, mode, decision, started)
        return decision
      },
      (error) => this.#fallback(error, rules, key, cost, context, mode, started),
    )
  }

  /** What `onStoreError` says when the store failed: published on `sluice:store-error` first. */
  #fallback(
    error: unknown,
    rules: readonly Rule[],
    key: string,
    cost: number | Costs,
    context: C,
    mode: StoreMode,
    started: number,
  ): Promise<Decision> {
    const { prefix, onStoreError } = this.#parts
    if (storeErrorChannel.hasSubscribers) {
      // As `onStoreError: 'throw'` would surface it: coded, with a store's own error as its cause.
      storeErrorChannel.publish({ limiter: prefix, key, error: asStoreError(error) })
    }
    let answer: Promise<Decision>
    if (onStoreError === 'allow') answer = Promise.resolve(STORE_ALLOW_DECISION)
    else if (onStoreError === 'deny') answer = Promise.resolve(STORE_DENY_DECISION)
    else if (onStoreError === 'throw') return Promise.reject(asStoreError(error))
    else {
      // The insurance limiter resolves rules of its own: per-rule costs reach it by the rules' names.
      const options = { cost: typeof cost === 'number' ? cost : byName(cost, rules), context }
      const asked = mode === 'consume' ? onStoreError.consume(key, options) : onStoreError.peek(key, options)
      answer = asked.then(asInsurance)
    }
    if (!decisionChannel.hasSubscribers) return answer
    return answer.then((decision) => {
      this.#publishTimed(key, cost, mode, decision, started)
      return decision
    })
  }

  /** Publishes a decision the store took time over: from `started` (0: not timed) until now. */
  #publishTimed(
    key: string,
    cost: number | Costs,
    mode: StoreMode,
    decision: Decision,
    started: number,
  ): void {
    const storeMs = started === 0 ? 0 : performance.now() - started
    publishDecision(this.#parts.prefix, key, cost, mode, decision, storeMs)
  }
}

function publishDecision(
  limiter: string,
  key: string,
  cost: number | Costs,
  mode: StoreMode,
  decision: Decision,
  storeMs: number,
): void {
  decisionChannel.publish({ limiter, key, cost, mode, decision, storeMs })
}

/** An admitted call's decision, recording what it reserved under each rule when that was not 1. */
function reserved(decision: Decision, cost: number | Costs): Decision {
  if (cost === 1 || decision.countedAt === undefined || decision.reason === 'insurance') return decision
  ;(decision as { cost?: number | Costs }).cost = cost
  return decision
}

/**
 * Per-rule costs by the rules' names, those other than 1 (a rule not named takes 1): a name's figure is one,
 * however many rules carry it.
 */
function byName(costs: Costs, rules: readonly Rule[]): RuleCosts {
  const named: Record<string, number> = Object.create(null)
  for (let i = 0; i < rules.length; i++) if (costs[i] !== 1) named[rules[i]!.name] = costs[i]!
  return named
}
