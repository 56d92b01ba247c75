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
  type Adjustment,
  type BlockPolicy,
  ErrorCode,
  InvalidOptionError,
  type Rule,
  type Store,
  type StoreAnswer,
  StoreError,
  type StoreMode,
} from '@sluice/core'
import {
  blockedAnswer,
  functionOption,
  given,
  integerOption,
  labelOption,
  MAX_TIMER_MS,
  newLease,
  readOptions,
  type StorePlace,
} from '@sluice/core/store'
import { connectionFor, type RedisClientLike, type RedisConnection, type Script, script } from './client.ts'
import { type Act, scriptFor } from './compose.ts'
import { Deadlines, type PendingCall } from './deadlines.ts'
import { DeniedCache } from './denied-cache.ts'
import { keyBase } from './keys.ts'
import { type Fetch, fetchedUnder, type Held, Prefetch } from './prefetch.ts'
import { RESET_LUA } from './scripts.generated.ts'
import {
  type Call,
  decode,
  encode,
  fetchedOf,
  isLate,
  resetKeys,
  ruleArgs,
  serverNowOf,
  unexpectedReply,
  withDeadline,
} from './wire.ts'

export interface RedisStoreOptions {
  /**
   * The Redis client, owned by the caller (`close()` leaves it open). Recommended settings, so calls
   * fail fast instead of queueing while Redis is away:
   * ioredis `new Redis({ enableOfflineQueue: false, maxRetriesPerRequest: 1 })`, or for a Cluster
   * `new Cluster(nodes, { enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } })`;
   * node-redis `createClient({ disableOfflineQueue: true })`; iovalkey as ioredis; Valkey GLIDE
   * `GlideClient.createClient({ addresses, requestTimeout })` or `GlideClusterClient.createClient(...)`.
   * Wait for the client to be ready before the first call (ioredis `'ready'` event, node-redis
   * `await client.connect()`; GLIDE's `createClient` resolves once connected).
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
  /**
   * Prefetch: for consumes whose rules are all fixedWindow, slidingWindow, slidingLog or tokenBucket, one
   * script call counts a batch of up to `units` units on the key (default 64), which this process then
   * spends locally, answering `reason: 'prefetch'` with no round trip, for at most `ms` (default 100);
   * units left then are given back. The next batch is fetched once half of one is spent. A batch starts
   * at 1, grows with the key's local demand and is never more than 1/16 of what any rule has left, so
   * near the limit every call is decided in Redis. The count is never exceeded; a sliding window can pass,
   * in any span of `windowMs`, at most the units prefetched in the `ms` before it beyond its limit.
   * `true` for the defaults. Default off.
   */
  prefetch?: boolean | { units?: number; ms?: number }
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
  readonly kinds: readonly Rule['kind'][]
  /** Every rule's numbers, in order, as the script reads them (the wire's `params`). */
  readonly params: readonly string[]
  /** The script that applies this sequence of rule kinds without a block (src/compose.ts). */
  readonly script: Script
  readonly limits: readonly number[]
  /** The scripts of the other acts (and of calls with a block), by act and `+b`, made when first needed. */
  acts?: { [act: string]: Script }
  /** Whether a rule holds leases (concurrency): a consume then brings a lease id. */
  readonly leases: boolean
  /** Whether every rule is of a kind the store can prefetch units for. */
  readonly batchable: boolean
}

/** The rule kinds whose units a store can fetch ahead and give back. */
const BATCHABLE = new Set<Rule['kind']>(['fixedWindow', 'slidingWindow', 'slidingLog', 'tokenBucket'])

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
  'prefetch',
]

export class RedisStore implements Store {
  readonly #runner: RedisConnection
  readonly #prefix: string
  readonly #timeoutMs: number
  readonly #clock: (() => number) | undefined
  readonly #cache: DeniedCache | undefined
  readonly #maxInFlight: number
  readonly #deadlines: Deadlines
  readonly #prefetch: Prefetch<Plan> | undefined
  readonly #plans = new WeakMap<readonly Rule[], Plan>()
  readonly #plansById = new Map<string, Plan>()
  #inFlight = 0
  /**
   * Redis's ms minus `performance.now()`, as low as the replies so far allow (see `#learnClock`); undefined
   * until the first reply. It turns a call's local timeout into the deadline its script is sent.
   */
  #offset: number | undefined
  /** Fetches and give-backs on their way: `close()` waits for them, so no batch in flight is lost. */
  readonly #batches = new Set<Promise<unknown>>()
  /** Resets made so far: a denial sent before the latest one is not cached. */
  #resets = 0
  #closed = false

  /** Its client and prefix: limiters on the default prefix of stores sharing both are refused (core's `Store.place`). */
  readonly place: StorePlace

  constructor(options: RedisStoreOptions) {
    const o = readOptions('RedisStore', options, KNOWN_OPTIONS, true)
    this.#runner = connectionFor(o.client, 'RedisStore.client')
    // No ':' either: the store prefix ends at the first ':', so two stores' prefixes can never run into
    // each other's limiter prefixes (`a:b` + `c` against `a` + `b:c`).
    this.#prefix = labelOption('RedisStore.prefix', given(o.prefix, 'sluice'), " ':{}")
    this.place = Object.freeze({ owner: o.client as object, namespace: this.#prefix })
    this.#timeoutMs = integerOption('RedisStore.timeoutMs', given(o.timeoutMs, 100), 1, MAX_TIMER_MS)
    this.#maxInFlight = integerOption('RedisStore.maxInFlight', given(o.maxInFlight, 10_000), 1, MAX_TIMER_MS)
    this.#clock = o.clock === undefined ? undefined : functionOption('RedisStore.clock', o.clock)
    this.#cache = deniedCache(o.deniedCache)
    this.#deadlines = new Deadlines(this.#timeoutMs, () => performance.now(), this.#timeoutError)
    this.#prefetch = prefetchOf(o.prefetch, this.#localNow, this.#fetchAhead, this.#giveBack, this.#recount)
  }

  /** The ms a script is sent as its `now`: the given clock's, whole (PEXPIRE takes integers); else Redis's. */
  #scriptNow(): number | undefined {
    return this.#clock === undefined ? undefined : Math.floor(this.#clock())
  }

  /** Local ms: the given clock, or the process's monotonic one. */
  readonly #localNow = (): number => this.#scriptNow() ?? performance.now()

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Promise<StoreAnswer> | StoreAnswer {
    const plan = this.#plan(rules)
    const consume = mode === 'consume'
    const cache = consume ? this.#cache : undefined
    const prefetch = consume && plan.batchable ? this.#prefetch : undefined
    const now = this.#scriptNow()
    const localNow = cache === undefined && prefetch === undefined ? 0 : (now ?? performance.now())
    const cacheKey = cache === undefined && prefetch === undefined ? '' : `${prefix}\u0000${key}`
    if (cache !== undefined && cache.size > 0) {
      const hit = cache.get(cacheKey, plan.id, cost, localNow)
      if (hit !== undefined) return Promise.resolve(hit)
      if (block !== undefined) {
        const left = cache.blockedLeft(cacheKey, localNow)
        if (left > 0) {
          // A block ends the key's local spending at once.
          prefetch?.drop(cacheKey)
          return Promise.resolve(blockedAnswer(rules, left))
        }
      }
    }
    if (prefetch !== undefined) {
      const held = prefetch.get(cacheKey)
      if (held !== undefined && fetchedUnder(held, plan)) {
        const local = prefetch.spend(held, cost, localNow)
        if (local !== undefined) return local
        const joined = prefetch.join(held, cost, () => this.apply(prefix, key, rules, cost, mode, block))
        if (joined !== undefined) return joined
      }
    }
    // A reset while this call is on its way may have removed what denies it: then its denial is not cached.
    const resets = this.#resets
    const refused = this.#refuse()
    if (refused !== undefined) return Promise.reject(refused)
    const fetch = prefetch?.lead(cacheKey, prefix, key, plan, rules, cost, block, localNow)
    if (fetch !== undefined) return this.#fetch(fetch[0], fetch[1], cost, now, localNow, resets)

    // A lease id made here, random: unique across processes without a round trip to agree on one.
    const lease = plan.leases ? [consume ? newLease(cost) : ''] : undefined
    const base = keyBase(this.#prefix, prefix, key)
    const sent = encode(base, plan, now, consume ? '1' : '0', cost, block, false, lease)

    const call = this.#deadlines.start<StoreAnswer>()
    const s = block === undefined ? plan.script : this.#script(plan, 'apply', true)
    this.#attempt(call, s, sent, true, (reply) => {
      const [answer, blocked] = decode(plan.limits, rules, reply, false)
      if (consume) countedAt(answer, now ?? serverNowOf(reply)!)
      if (cache !== undefined) this.#remember(cacheKey, plan.id, cost, localNow, resets, answer, blocked)
      return answer
    })
    return call.promise
  }

  /**
   * Keeps what a consume's reply says about the key in the denied-key cache: a block, a denial (not while
   * this process holds units for the key: they would be stranded behind it), or nothing after an admission
   * or a reset made while the call was on its way.
   */
  #remember(
    cacheKey: string,
    planId: string,
    cost: number,
    sentAt: number,
    resets: number,
    answer: StoreAnswer,
    blocked: number,
  ): void {
    const cache = this.#cache!
    if (resets !== this.#resets) {
      if (cache.size > 0) cache.delete(cacheKey)
    } else if (answer.reason === 'blocked') {
      cache.setBlocked(cacheKey, sentAt, answer[0]!.retryAfterMs)
    } else if (blocked > 0) {
      // This denial began a block: until it ends, the key is blocked, whatever the call.
      cache.setBlocked(cacheKey, sentAt, blocked)
    } else {
      let denied = false
      for (const d of answer) if (!d.allowed) denied = true
      if (denied) {
        if (this.#prefetch?.holds(cacheKey) !== true) cache.set(cacheKey, planId, cost, sentAt, answer)
      } else if (cache.size > 0) cache.delete(cacheKey)
    }
  }

  /**
   * Sends a fetch: the call's `cost` and up to the batch's `want` more units, counted in Redis; the reply
   * keeps the units the call does not spend. With cost 0 (a fetch ahead) no call waits on it but its joiners.
   */
  #fetch(
    held: Held<Plan>,
    batch: Fetch,
    cost: number,
    now: number | undefined,
    localNow: number,
    resets: number,
  ): Promise<StoreAnswer> {
    const prefetch = this.#prefetch!
    const { plan, rules } = held
    // The units spent since the last round trip go with it: counted again if another process has reset the key.
    const seen = held.resets
    const spent = prefetch.claim(held)
    const base = keyBase(this.#prefix, held.prefix, held.key)
    const extras = [String(batch.want), seen, String(spent)]
    const sent = encode(base, plan, now, '1', cost, held.block, true, extras)
    const call = this.#deadlines.start<StoreAnswer>()
    this.#attempt(call, this.#script(plan, 'fetch', held.block !== undefined), sent, true, (reply) => {
      const [answer, blocked] = decode(plan.limits, rules, reply, true)
      if (this.#cache !== undefined) this.#remember(held.id, plan.id, cost, localNow, resets, answer, blocked)
      // A blocked key's reply has no batch; else it ends with the units taken, the key's reset count, then
      // Redis's ms: when they were counted, without a clock.
      if (answer.reason === 'blocked') return prefetch.fetched(held, answer, 0, cost, localNow, 0, seen, seen)
      const { taken, resets: nowResets, serverNow } = fetchedOf(reply)
      return prefetch.fetched(held, answer, taken, cost, localNow, now ?? serverNow, seen, nowResets)
    })
    this.#track(
      call.promise.then(
        () => prefetch.arrived(held, batch),
        (error: unknown) => {
          // The script did not run (or ran after its deadline, counting nothing): the units are still unclaimed.
          prefetch.unclaim(held, spent)
          prefetch.failed(held, batch, error)
        },
      ),
    )
    return call.promise
  }

  /** Fetches a batch for a key whose units are running low, before calls find none (see Prefetch.spend). */
  readonly #fetchAhead = (held: Held<Plan>, batch: Fetch): void => {
    const refused = this.#refuse()
    if (refused !== undefined) {
      this.#prefetch!.failed(held, batch, refused)
      return
    }
    const now = this.#scriptNow()
    this.#fetch(held, batch, 0, now, now ?? performance.now(), this.#resets).then(undefined, () => {})
  }

  /**
   * Gives a key's unspent prefetched units back to Redis; a failure leaves them counted. Sent even once the
   * store is closing: a batch that lands after `close()` goes back (the client is still the caller's).
   */
  readonly #giveBack = (held: Held<Plan>, units: number): void => {
    if (this.#refuse(true) !== undefined) return
    const base = keyBase(this.#prefix, held.prefix, held.key)
    const extras = [String(held.countedAt), held.resets, String(this.#prefetch!.claim(held))]
    const sent = encode(base, held.plan, this.#scriptNow(), 'g', units, undefined, true, extras)
    const call = this.#deadlines.start<void>()
    this.#attempt(call, this.#script(held.plan, 'giveBack', false), sent, true, () => undefined)
    this.#track(call.promise.then(undefined, () => {}))
  }

  /**
   * Counts units spent from a batch after another process reset its key, in the key's new state, as a
   * penalty counts them (whatever the rules say). A failure leaves them uncounted.
   */
  readonly #recount = (held: Held<Plan>, units: number): void => {
    if (this.#refuse(true) !== undefined) return
    const base = keyBase(this.#prefix, held.prefix, held.key)
    const sent = encode(base, held.plan, this.#scriptNow(), 'p', units)
    const call = this.#deadlines.start<void>()
    this.#attempt(call, this.#script(held.plan, 'penalize', false), sent, true, () => undefined)
    this.#track(call.promise.then(undefined, () => {}))
  }

  /** Keeps `batch` (settling, never rejecting) until it settles, for `close()`. */
  #track(batch: Promise<unknown>): void {
    this.#batches.add(batch)
    batch.then(() => this.#batches.delete(batch))
  }

  /** The script of `act` for the plan's rules, with or without a block, made when first needed. */
  #script(plan: Plan, act: Act, withBlock: boolean): Script {
    plan.acts ??= {}
    const id = withBlock ? `${act}+b` : act
    let s = plan.acts[id]
    if (s === undefined) {
      s = scriptFor(plan.kinds, act, withBlock)
      plan.acts[id] = s
    }
    return s
  }

  adjust(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): Promise<StoreAnswer | undefined> {
    const refused = this.#refuse()
    if (refused !== undefined) return Promise.reject(refused)
    const plan = this.#plan(rules)
    const penalize = adjustment === 'penalize'
    // A refund or a lifted slot can make a cached denial wrong; a penalty cannot, but it may block.
    if (!penalize) this.#cache?.delete(`${prefix}\u0000${key}`)
    const withBlock = penalize && block !== undefined
    const now = this.#scriptNow()
    const mode = penalize ? 'p' : adjustment === 'refund' ? 'r' : 'u'
    // A refund with marks gives back one call's units (`refundCall`); without, the newest units.
    const act = adjustment === 'refund' && marks !== undefined ? 'refundCall' : adjustment
    // Each rule's mark follows the params for the acts that name one call's units, lease or queue slot.
    const extras = act === 'refund' || act === 'penalize' ? undefined : rules.map((_, i) => marks?.[i] ?? '')
    const base = keyBase(this.#prefix, prefix, key)
    const sent = encode(base, plan, now, mode, cost, withBlock ? block : undefined, false, extras)
    const s = this.#script(plan, act, withBlock)
    const call = this.#deadlines.start<StoreAnswer | undefined>()
    this.#attempt(call, s, sent, true, (reply) =>
      penalize ? decode(plan.limits, rules, reply, false)[0] : undefined,
    )
    return call.promise
  }

  /**
   * Sends one call's script with the deadline of `call` in Redis's ms: past it, the call has been answered
   * by its timeout, so a script that starts later counts nothing and answers `late`. A `late` answer
   * that arrives while the call is still waiting means the deadline was wrong (no reply had told the
   * store Redis's clock yet, or that clock moved): the clock is learnt from that answer, and the call is
   * sent once more (`retry`), with a deadline from it.
   */
  #attempt<T>(
    call: PendingCall<T>,
    s: Script,
    wire: Call,
    retry: boolean,
    done: (reply: unknown[]) => T,
  ): void {
    withDeadline(wire, this.#offset === undefined ? undefined : call.deadline + this.#offset)
    const sent = performance.now()
    this.#send(s, wire.keys, wire.args).then(
      (reply) => {
        this.#inFlight--
        const serverNow = serverNowOf(reply)
        if (serverNow !== undefined) this.#learnClock(serverNow, sent, performance.now())
        if (call.done) return
        if (isLate(reply)) {
          const refused = retry ? this.#refuse() : this.#timeoutError()
          if (refused !== undefined) call.reject(refused)
          else this.#attempt(call, s, wire, false, done)
          return
        }
        let answer: T
        try {
          if (serverNow === undefined) throw unexpectedReply()
          answer = done(reply as unknown[])
        } catch (error) {
          call.reject(error)
          return
        }
        call.resolve(answer)
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
    this.#prefetch?.forget(`${prefix}\u0000${key}`)
    const refused = this.#refuse()
    if (refused !== undefined) return Promise.reject(refused)
    // The block goes too, with its escalation (DEL of a key that is not there costs nothing), and the reset
    // count: a process holding prefetched units learns of the reset from it.
    const keys = resetKeys(
      keyBase(this.#prefix, prefix, key),
      rules.map((rule) => rule.id),
    )
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

  /**
   * Gives prefetched units back, stops answering and forgets the denied-key cache. Resolves once every
   * batch that was on its way has landed and its unspent units have been given back (or failed to be), so
   * the caller may close the client then. The client stays open: it is the caller's.
   */
  async close(): Promise<void> {
    this.#prefetch?.close()
    this.#closed = true
    this.#cache?.clear()
    // A batch landing now gives its units back, which may start another give-back: wait until none is left.
    while (this.#batches.size > 0) await Promise.all([...this.#batches])
  }

  /** Why a call cannot be sent now (`closing`: a give-back, which goes out even while the store closes). */
  #refuse(closing = false): StoreError | undefined {
    if (this.#closed && !closing) return new StoreError(ErrorCode.STORE_ERROR, 'The RedisStore is closed.')
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
  const kinds = rules.map((r) => r.kind)
  return {
    id,
    ids: rules.map((r) => r.id),
    kinds,
    params: rules.flatMap(ruleArgs),
    script: scriptFor(kinds, 'apply', false),
    limits: rules.map((r) => ('limit' in r ? r.limit : r.capacity)),
    leases: kinds.includes('concurrency'),
    batchable: kinds.every((kind) => BATCHABLE.has(kind)),
  }
}

/** Says in an admitted consume's answer when Redis counted it (`StoreAnswer.countedAt`, in the scripts' ms). */
function countedAt(answer: StoreAnswer, at: number): void {
  if (answer.reason !== undefined) return
  for (const d of answer) if (!d.allowed) return
  // Not enumerable: the answer becomes the decision's `rules`, whose JSON stays the list of rule decisions.
  Object.defineProperty(answer, 'countedAt', { value: at })
}

function storeError(error: unknown): StoreError {
  if (error instanceof StoreError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new StoreError(ErrorCode.STORE_ERROR, `Redis failed: ${message}`, { cause: error })
}

const DEFAULT_PREFETCH_UNITS = 64
const DEFAULT_PREFETCH_MS = 100

function prefetchOf(
  option: unknown,
  clock: () => number,
  fetchAhead: (held: Held<Plan>, batch: Fetch) => void,
  giveBack: (held: Held<Plan>, units: number) => void,
  recount: (held: Held<Plan>, units: number) => void,
): Prefetch<Plan> | undefined {
  if (option === undefined || option === false) return undefined
  const make = (units: number, ms: number) => new Prefetch(units, ms, clock, fetchAhead, giveBack, recount)
  if (option === true) return make(DEFAULT_PREFETCH_UNITS, DEFAULT_PREFETCH_MS)
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ units?: number; ms?: number }>('RedisStore.prefetch', option, ['units', 'ms'])
    const units = integerOption(
      'RedisStore.prefetch.units',
      given(o.units, DEFAULT_PREFETCH_UNITS),
      1,
      1_000_000,
    )
    const ms = integerOption('RedisStore.prefetch.ms', given(o.ms, DEFAULT_PREFETCH_MS), 1, 60_000)
    return make(units, ms)
  }
  throw new InvalidOptionError('RedisStore.prefetch', option, 'true, false or { units, ms }')
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
