/**
 * @module RedisStore: rule state in Redis, shared by every process and machine that uses the same Redis.
 *
 * One script call applies all of a call's rules to one key, atomically and in one round trip; the
 * algorithms live in src/scripts/*.lua, which agree with @sluice/core's rules bit for bit. Time comes from
 * Redis (`TIME`), so application servers' clocks do not matter. This file holds what happens around the
 * script: the key layout, a cached plan per rule combination, the per-call timeout, the bound on calls in
 * flight, and the process-local cache of denied keys. What a failure means for a call is the limiter's
 * business (`onStoreError`); the store only rejects, with a `StoreError`, within its timeout. A call it
 * has rejected is never counted later: each script carries its call's timeout as a deadline in Redis's
 * clock (learnt from earlier replies) and counts nothing when it starts after it.
 */
import {
  ErrorCode,
  InvalidOptionError,
  type Rule,
  type RuleDecision,
  type Store,
  StoreError,
  type StoreMode,
} from '@sluice/core'
import {
  functionOption,
  given,
  integerOption,
  labelOption,
  MAX_TIMER_MS,
  readOptions,
} from '@sluice/core/store'
import { HEAD_ARGS, ruleArgs, scriptFor } from './compose.ts'
import { Deadlines, type PendingCall } from './deadlines.ts'
import { DeniedCache } from './denied-cache.ts'
import { keyBase } from './keys.ts'
import { type Script, type ScriptRunner, script, scriptRunnerFor } from './script-runner.ts'
import { RESET_LUA } from './scripts.generated.ts'

/**
 * A Redis client the store can use: an ioredis `Redis` or `Cluster`, or a node-redis client
 * (`createClient`) or cluster (`createCluster`). The store never connects, quits or reconfigures it.
 */
export type RedisClientLike =
  | { defineCommand(name: string, definition: { lua: string }): unknown; readonly status: string }
  | { sendCommand(...args: never[]): unknown; readonly isReady: boolean }
  | { sendCommand(...args: never[]): unknown; getSlotMaster(slot: never): unknown }

export interface RedisStoreOptions {
  /**
   * The Redis client, owned by the caller (`close()` leaves it open). Recommended settings, so calls
   * fail fast instead of queueing while Redis is away:
   * ioredis `new Redis({ enableOfflineQueue: false, maxRetriesPerRequest: 1 })`, or for a Cluster
   * `new Cluster(nodes, { enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } })`;
   * node-redis `createClient({ disableOfflineQueue: true })`. Wait for the client to be ready before the
   * first call (ioredis `'ready'` event, node-redis `await client.connect()`).
   */
  client: RedisClientLike
  /**
   * Namespace of every key this store writes: `<prefix>:<limiter prefix>:{<key>}:<rule id>`.
   * 1 to 128 printable ASCII characters without spaces, quotes, backslashes or braces. Default `"sluice"`.
   */
  prefix?: string
  /**
   * Longest wait for Redis per call, in ms (an integer >= 1). Past it the call rejects with a
   * `StoreError` coded `ERR_SLUICE_STORE_TIMEOUT`, and the limiter's `onStoreError` decides. The call's
   * script still reaches Redis, but it carries this deadline in Redis's clock and, starting after it,
   * counts nothing: a call answered by `onStoreError` is never counted later. Default 100.
   */
  timeoutMs?: number
  /**
   * Time in ms for the scripts, instead of Redis's `TIME`. For tests that drive the memory store and this
   * store through the same trace. Keys still expire by Redis's own clock: their TTLs are computed in the
   * given clock's ms plus 1 s of slack, so the clock must not run slower than real time. Also drives the
   * denied-key cache. Default: Redis's clock.
   */
  clock?: () => number
  /**
   * The process-local cache of denied keys: after a denial, the same call (same prefix, key and rules,
   * a cost at least as large) is answered from memory until its `retryAfterMs` has passed, with no round
   * trip. `true` (default) holds up to 10,000 keys; `{ maxKeys }` sets the bound; `false` turns it off.
   * Its answers count `retryAfterMs` and `resetMs` down and keep the rest of the denial as it was.
   */
  deniedCache?: boolean | { maxKeys?: number }
  /**
   * Most calls sent to the client and not yet answered by it (timed-out calls count until the client
   * gives up on them). Past it calls reject at once with a `StoreError`, so commands cannot pile up
   * without bound while Redis is away. An integer >= 1. Default 10,000.
   */
  maxInFlight?: number
}

/** What the store sends for one combination of rules, computed once and kept. */
interface Plan {
  /**
   * The rules' specs (kind, numbers, given name), joined: the combination with its numbers. Rules that
   * share state identities but differ in their limits get different plans, each sending its own numbers.
   */
  readonly id: string
  /** Per rule: `<rule.id>`, its state identity (no limits), appended to the key base. */
  readonly ids: readonly string[]
  /** Every rule's numbers, in order, as the script reads them. */
  readonly args: readonly string[]
  /** The script for this sequence of rule kinds (src/compose.ts). */
  readonly script: Script
  readonly limits: readonly number[]
}

const RESET = script(RESET_LUA)
const DEFAULT_DENIED_CACHE_KEYS = 10_000
/** Rule combinations remembered by their ids; a rules function could otherwise grow the map forever. */
const MAX_PLANS = 1024
const KNOWN_OPTIONS: (keyof RedisStoreOptions)[] = [
  'client',
  'prefix',
  'timeoutMs',
  'clock',
  'deniedCache',
  'maxInFlight',
]

export class RedisStore implements Store {
  readonly #runner: ScriptRunner
  readonly #prefix: string
  readonly #timeoutMs: number
  readonly #clock: (() => number) | undefined
  readonly #cache: DeniedCache | undefined
  readonly #maxInFlight: number
  readonly #deadlines: Deadlines
  readonly #plans = new WeakMap<readonly Rule[], Plan>()
  readonly #plansById = new Map<string, Plan>()
  #inFlight = 0
  /**
   * Redis's ms minus `performance.now()`, as low as the replies so far allow (see `#learnClock`); undefined
   * until the first reply. It turns a call's local timeout into the deadline its script is sent.
   */
  #offset: number | undefined
  /** Resets made so far: a denial sent before the latest one is not cached. */
  #resets = 0
  #closed = false

  constructor(options: RedisStoreOptions) {
    const o = readOptions('RedisStore', options, KNOWN_OPTIONS, true)
    this.#runner = scriptRunnerFor(o.client, 'RedisStore.client')
    // No ':' either: the store prefix ends at the first ':', so two stores' prefixes can never run into
    // each other's limiter prefixes (`a:b` + `c` against `a` + `b:c`).
    this.#prefix = labelOption('RedisStore.prefix', given(o.prefix, 'sluice'), " ':{}")
    this.#timeoutMs = integerOption('RedisStore.timeoutMs', given(o.timeoutMs, 100), 1, MAX_TIMER_MS)
    this.#maxInFlight = integerOption('RedisStore.maxInFlight', given(o.maxInFlight, 10_000), 1, MAX_TIMER_MS)
    this.#clock = o.clock === undefined ? undefined : functionOption('RedisStore.clock', o.clock)
    this.#cache = deniedCache(o.deniedCache)
    this.#deadlines = new Deadlines(this.#timeoutMs, () => performance.now(), this.#timeoutError)
  }

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    mode: StoreMode,
  ): Promise<readonly RuleDecision[]> {
    const plan = this.#plan(rules)
    const consume = mode === 'consume'
    const cache = consume ? this.#cache : undefined
    // Whole ms, as TIME gives them inside the script: PEXPIRE takes integers only.
    const now = this.#clock === undefined ? undefined : Math.floor(this.#clock())
    const localNow = cache === undefined ? 0 : (now ?? performance.now())
    const cacheKey = cache === undefined ? '' : `${prefix}\u0000${key}`
    if (cache !== undefined && cache.size > 0) {
      const hit = cache.get(cacheKey, plan.id, cost, localNow)
      if (hit !== undefined) return Promise.resolve(hit)
    }
    // A reset while this call is on its way may have removed what denies it: then its denial is not cached.
    const resets = this.#resets
    const refused = this.#refuse()
    if (refused !== undefined) return Promise.reject(refused)

    const base = keyBase(this.#prefix, prefix, key)
    const n = rules.length
    const keys = new Array<string>(n)
    for (let i = 0; i < n; i++) keys[i] = base + plan.ids[i]
    const args = new Array<string>(HEAD_ARGS + plan.args.length)
    args[0] = now === undefined ? '' : String(now)
    args[1] = consume ? '1' : '0'
    args[2] = String(cost)
    for (let i = 0; i < plan.args.length; i++) args[i + HEAD_ARGS] = plan.args[i]!

    const call = this.#deadlines.start<readonly RuleDecision[]>()
    this.#attempt(call, plan, rules, keys, args, true, (decisions) => {
      if (cache !== undefined) {
        let denied = false
        for (const d of decisions) if (!d.allowed) denied = true
        if (denied && resets === this.#resets) cache.set(cacheKey, plan.id, cost, localNow, decisions)
        else if (cache.size > 0) cache.delete(cacheKey)
      }
      call.resolve(decisions)
    })
    return call.promise
  }

  /**
   * Sends one call's script with the deadline of `call` in Redis's ms: past it, the call has been answered
   * by its timeout, so a script that starts later counts nothing and answers `late`. A `late` answer
   * that arrives while the call is still waiting means the deadline was wrong (no reply had told the
   * store Redis's clock yet, or that clock moved): the clock is learnt from that answer, and the call is
   * sent once more (`retry`), with a deadline from it.
   */
  #attempt(
    call: PendingCall<readonly RuleDecision[]>,
    plan: Plan,
    rules: readonly Rule[],
    keys: readonly string[],
    args: string[],
    retry: boolean,
    done: (decisions: RuleDecision[]) => void,
  ): void {
    args[3] = this.#offset === undefined ? '0' : String(Math.floor(call.deadline + this.#offset))
    const sent = performance.now()
    this.#send(plan.script, keys, args).then(
      (reply) => {
        this.#inFlight--
        const late = isLate(reply)
        const serverNow = late ? Number(reply[1]) : serverNowOf(reply, rules.length)
        if (serverNow !== undefined) this.#learnClock(serverNow, sent, performance.now())
        if (call.done) return
        if (late) {
          const refused = retry ? this.#refuse() : this.#timeoutError()
          if (refused !== undefined) call.reject(refused)
          else this.#attempt(call, plan, rules, keys, args, false, done)
          return
        }
        let decisions: RuleDecision[]
        try {
          decisions = decisionsOf(plan, rules, reply)
        } catch (error) {
          call.reject(error)
          return
        }
        done(decisions)
      },
      (error: unknown) => {
        this.#inFlight--
        this.#runner.troubled()
        call.reject(storeError(error))
      },
    )
  }

  /**
   * Learns Redis's clock from a reply: Redis read `serverNow` (whole ms) between `sent` and `received`, so
   * its offset from the local clock lies in [serverNow - received, serverNow + 1 - sent]. The store keeps
   * the highest lower bound seen, which errs early: a deadline from it falls before the call's timeout
   * by about the time a reply takes to come back, so a call counted just before its deadline is still
   * answered by Redis rather than by the timeout. A reply whose range lies wholly below the kept
   * bound means Redis's clock went back (or a cluster node's clock runs behind): the bound restarts there.
   */
  #learnClock(serverNow: number, sent: number, received: number): void {
    const lower = serverNow - received
    if (this.#offset === undefined || this.#offset > serverNow + 1 - sent || lower > this.#offset) {
      this.#offset = lower
    }
  }

  reset(prefix: string, key: string, rules: readonly Rule[]): Promise<void> {
    this.#resets++
    this.#cache?.delete(`${prefix}\u0000${key}`)
    const refused = this.#refuse()
    if (refused !== undefined) return Promise.reject(refused)
    const plan = this.#plan(rules)
    const base = keyBase(this.#prefix, prefix, key)
    const keys = plan.ids.map((id) => base + id)
    const call = this.#deadlines.start<void>()
    this.#send(RESET, keys, []).then(
      () => {
        this.#inFlight--
        call.resolve()
      },
      (error: unknown) => {
        this.#inFlight--
        call.reject(storeError(error))
      },
    )
    return call.promise
  }

  /** Stops answering and forgets the denied-key cache. The client stays open: it is the caller's. */
  close(): void {
    this.#closed = true
    this.#cache?.clear()
  }

  /** Why a call cannot be sent now, or undefined when it can. */
  #refuse(): StoreError | undefined {
    if (this.#closed) return new StoreError(ErrorCode.STORE_ERROR, 'The RedisStore is closed.')
    if (this.#inFlight >= this.#maxInFlight) {
      return new StoreError(
        ErrorCode.STORE_ERROR,
        `Redis has ${this.#inFlight} calls unanswered (maxInFlight ${this.#maxInFlight}); not sending more.`,
      )
    }
    if (!this.#runner.connected()) {
      return new StoreError(ErrorCode.STORE_ERROR, 'The Redis client is not connected.')
    }
    return undefined
  }

  /** Sends a script call, counted in flight until the client settles it. */
  #send(s: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    this.#inFlight++
    try {
      return this.#runner.run(s, keys, args, this.#inFlight === 1)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  readonly #timeoutError = (): StoreError => {
    this.#runner.troubled()
    return new StoreError(ErrorCode.STORE_TIMEOUT, `Redis did not answer within ${this.#timeoutMs} ms.`)
  }

  /**
   * The plan for `rules`: by identity of the list first (fixed rules, and a limit table's entries, pass
   * the same list every call), then by the rules' specs.
   */
  #plan(rules: readonly Rule[]): Plan {
    let plan = this.#plans.get(rules)
    if (plan !== undefined) return plan
    let id = specOf(rules[0]!)
    for (let i = 1; i < rules.length; i++) id += `|${specOf(rules[i]!)}`
    plan = this.#plansById.get(id)
    if (plan === undefined) {
      plan = planOf(id, rules)
      if (this.#plansById.size >= MAX_PLANS) this.#plansById.clear()
      this.#plansById.set(id, plan)
    }
    this.#plans.set(rules, plan)
    return plan
  }
}

/** Each rule's JSON (its spec: kind, numbers, given name), computed once per rule object. */
const specs = new WeakMap<Rule, string>()

function specOf(rule: Rule): string {
  let spec = specs.get(rule)
  if (spec === undefined) {
    spec = JSON.stringify(rule)
    specs.set(rule, spec)
  }
  return spec
}

function planOf(id: string, rules: readonly Rule[]): Plan {
  return {
    id,
    ids: rules.map((r) => r.id),
    args: rules.flatMap(ruleArgs),
    script: scriptFor(rules.map((r) => r.kind)),
    limits: rules.map((r) => ('limit' in r ? r.limit : r.capacity)),
  }
}

/** True for a script's answer that it started after its deadline and counted nothing. */
function isLate(reply: unknown): reply is [string, unknown] {
  return Array.isArray(reply) && reply.length === 2 && String(reply[0]) === 'late'
}

/** Redis's ms at the end of a script's reply, or undefined when the reply is not one. */
function serverNowOf(reply: unknown, rules: number): number | undefined {
  if (!Array.isArray(reply) || reply.length !== rules * 5 + 1) return undefined
  const serverNow = Number(reply[rules * 5])
  return Number.isFinite(serverNow) ? serverNow : undefined
}

/** The script's reply (five integers per rule, then Redis's ms) as RuleDecisions. */
function decisionsOf(plan: Plan, rules: readonly Rule[], reply: unknown): RuleDecision[] {
  const n = rules.length
  if (!Array.isArray(reply) || reply.length !== n * 5 + 1) {
    throw new StoreError(ErrorCode.STORE_ERROR, 'Redis answered the sluice script with an unexpected reply.')
  }
  const out = new Array<RuleDecision>(n)
  for (let i = 0; i < n; i++) {
    const o = i * 5
    out[i] = {
      rule: rules[i]!.name,
      allowed: Number(reply[o]) === 1,
      limit: plan.limits[i]!,
      remaining: Number(reply[o + 1]),
      resetMs: Number(reply[o + 2]),
      retryAfterMs: Number(reply[o + 3]),
      waitMs: Number(reply[o + 4]),
      windowSeconds: rules[i]!.policyWindowSeconds,
    }
  }
  return out
}

function storeError(error: unknown): StoreError {
  if (error instanceof StoreError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new StoreError(ErrorCode.STORE_ERROR, `Redis failed: ${message}`, { cause: error })
}

function deniedCache(option: unknown): DeniedCache | undefined {
  if (option === undefined || option === true) return new DeniedCache(DEFAULT_DENIED_CACHE_KEYS)
  if (option === false) return undefined
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ maxKeys?: number }>('RedisStore.deniedCache', option, ['maxKeys'])
    const maxKeys = integerOption(
      'RedisStore.deniedCache.maxKeys',
      given(o.maxKeys, DEFAULT_DENIED_CACHE_KEYS),
      1,
    )
    return new DeniedCache(maxKeys)
  }
  throw new InvalidOptionError('RedisStore.deniedCache', option, 'true, false or { maxKeys }')
}
