/**
 * @module A process-local memory of recent denials, so a hot denied key costs no round trip.
 *
 * A denied call changes no state, and other calls can only push the earliest admission later, never
 * earlier (short of a `reset`, a refund or a slot given back). So a call with the same rules and a cost at
 * least the denied one's (with per-rule costs: at least its cost on every rule) is still denied until the denial's `retryAfterMs` has passed. A block is kept the
 * same way, until its end, and answers every call on the key `reason: 'blocked'`; a plain denial is
 * answered `reason: 'cache'`. Until then it is answered from here, with its ms figures counted down.
 * Entries are dropped when the key is admitted or reset through this store, when they expire, and oldest
 * first when the cache is full.
 *
 * What it promises to each rule: a denial is kept only as long as its rules say for certain. fixedWindow,
 * slidingLog, slidingWindow and tokenBucket report the exact time their units come back; leakyBucket and
 * warmUp the exact time their slot comes round. Those are kept until their `retryAfterMs`. A concurrency
 * rule's `retryAfterMs` is only an upper bound (the oldest lease's end: a release frees units at once),
 * so its denial is never kept on its own: a call with several rules is kept until the latest certain
 * `retryAfterMs` among the rules that denied it, and not at all when only concurrency rules denied it.
 */
import type { Costs, RuleDecision, StoreAnswer } from '@sluice/core'
import { blockedAnswer } from '@sluice/core/store'
import type { LocalAnswers, LocalCall } from './local.ts'

interface Entry {
  /** The rule combination (its ids) the denial was for. */
  readonly plan: string
  /** The denied call's cost: one for every rule, or per rule. */
  readonly cost: number | Costs
  /**
   * Local clock when the call was sent, not when Redis answered: Redis decided somewhere in between, so
   * counting the denial's wait from the send can only end the entry early, never keep it past the wait.
   */
  readonly at: number
  /** Local clock from which the call may be admitted again. */
  readonly until: number
  /** The denial, marked as the cache's answer (`reason: 'cache'`). */
  readonly decisions: StoreAnswer
  /** A block: every call on the key is blocked until `until`, whatever its rules and cost. */
  readonly blocked: boolean
}

/** `decisions` as the cache answers them: the store did not run the rules. */
function cached(decisions: RuleDecision[]): StoreAnswer {
  return Object.assign(decisions, { reason: 'cache' as const })
}

export class DeniedCache implements LocalAnswers<{ readonly id: string }> {
  readonly #entries = new Map<string, Entry>()
  readonly #maxKeys: number
  /** Told when a cached block answers a call: the key's prefetched units stop being spent. */
  readonly #whenBlocked: (id: string) => void

  constructor(maxKeys: number, whenBlocked: (id: string) => void = () => {}) {
    this.#maxKeys = maxKeys
    this.#whenBlocked = whenBlocked
  }

  /** A cached denial of this call, or the key's cached block (for a limiter that blocks). */
  answer(call: LocalCall<{ readonly id: string }>): Promise<StoreAnswer> | undefined {
    if (this.#entries.size === 0) return undefined
    const hit = this.get(call.id, call.plan.id, call.cost, call.now)
    if (hit !== undefined) return Promise.resolve(hit)
    if (call.block === undefined) return undefined
    const left = this.blockedLeft(call.id, call.now)
    if (left === 0) return undefined
    this.#whenBlocked(call.id)
    return Promise.resolve(blockedAnswer(call.rules, left))
  }

  get size(): number {
    return this.#entries.size
  }

  /** The cached answer for this call at local time `now`, or undefined when Redis must be asked. */
  get(id: string, plan: string, cost: number | Costs, now: number): StoreAnswer | undefined {
    const entry = this.#entries.get(id)
    if (entry === undefined) return undefined
    if (now >= entry.until) {
      this.#entries.delete(id)
      return undefined
    }
    if (entry.blocked || entry.plan !== plan || !atLeast(cost, entry.cost)) return undefined
    const elapsed = now - entry.at
    if (elapsed < 1) return entry.decisions
    return cached(entry.decisions.map((d) => countDown(d, entry.at, now)))
  }

  /**
   * Remembers a denial of `cost` decided at local time `now`; `certain` says, per rule, whether its denial
   * holds for certain until its `retryAfterMs` (each kind's `certainRetry`).
   */
  set(
    id: string,
    plan: string,
    cost: number | Costs,
    now: number,
    decisions: readonly RuleDecision[],
    certain: readonly boolean[],
  ): void {
    let retryAfterMs = 0
    for (let i = 0; i < decisions.length; i++) {
      const d = decisions[i]!
      if (!d.allowed && certain[i] === true && d.retryAfterMs > retryAfterMs) retryAfterMs = d.retryAfterMs
    }
    if (retryAfterMs <= 0) return
    this.#put(id, {
      plan,
      cost,
      at: now,
      until: now + retryAfterMs,
      decisions: cached([...decisions]),
      blocked: false,
    })
  }

  /**
   * Remembers that the key is blocked for `ms` from local time `now` (when the call was sent: the block
   * began later, so the entry can only end early). A block is the store's, shared by every process: this
   * process forgets it on its own `reset`; another process's reset is seen once the block's original
   * end has passed here.
   */
  setBlocked(id: string, now: number, ms: number): void {
    if (ms <= 0) return
    this.#put(id, { plan: '', cost: 0, at: now, until: now + ms, decisions: cached([]), blocked: true })
  }

  /** Whole ms the cached block on `id` has left at local time `now`; 0 when none is cached. */
  blockedLeft(id: string, now: number): number {
    const entry = this.#entries.get(id)
    if (entry === undefined || !entry.blocked) return 0
    if (now >= entry.until) {
      this.#entries.delete(id)
      return 0
    }
    return Math.max(1, Math.ceil(entry.until - now))
  }

  #put(id: string, entry: Entry): void {
    if (!this.#entries.delete(id) && this.#entries.size >= this.#maxKeys) {
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    this.#entries.set(id, entry)
  }

  delete(id: string): void {
    this.#entries.delete(id)
  }

  clear(): void {
    this.#entries.clear()
  }
}

/**
 * Whether a call of `cost` takes, on every rule, at least the units of the denied call of `denied` (a cost
 * or per-rule costs, for the same rules): then each rule that denied that call denies this one too.
 */
function atLeast(cost: number | Costs, denied: number | Costs): boolean {
  if (typeof cost === 'number' && typeof denied === 'number') return cost >= denied
  const n = typeof cost === 'number' ? (denied as Costs).length : cost.length
  for (let i = 0; i < n; i++) {
    if ((typeof cost === 'number' ? cost : cost[i]!) < (typeof denied === 'number' ? denied : denied[i]!))
      return false
  }
  return true
}

/** `d` as it reads at local time `now`, having been decided at `at`: every ms figure counted down. */
function countDown(d: RuleDecision, at: number, now: number): RuleDecision {
  const resetMs = Math.max(0, Math.ceil(at + d.resetMs - now))
  const retryAfterMs = d.allowed ? 0 : Math.max(1, Math.ceil(at + d.retryAfterMs - now))
  return { ...d, resetMs, retryAfterMs }
}
