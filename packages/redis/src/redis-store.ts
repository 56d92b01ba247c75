/**
 * @module RedisStore: rule state in Redis, shared by every process and machine that uses the same Redis.
 *
 * Over 300 lines: the store's acts (apply, adjust, reset, close) and a batch's round trips (fetch, return,
 * recount) share its state; everything else is apart: the wire (wire.ts), the client (client.ts), calls and
 * deadlines (calls.ts), plans (plans.ts), scripts (compose.ts), local answers (local.ts and its layers),
 * batched releases (releases.ts).
 *
 * One script call applies all of a call's rules to one key, atomically and in one round trip; the
 * algorithms live in src/scripts/*.lua, which agree with @sluice/core's rules bit for bit. Time comes from
 * Redis (`TIME`), so application servers' clocks do not matter. This file holds what happens around the
 * script: the key layout, a cached plan per rule combination, the per-call timeout, the bound on calls in
 * flight, and the process-local cache of denied keys. What a failure means for a call is the limiter's
 * business (`onStoreError`); the store only rejects, with a `StoreError`, within its timeout. A call it
 * has rejected is not left counted: each script carries its call's timeout as a deadline in Redis's
 * clock (learnt from earlier replies) and counts nothing when it starts after it, and what a script that
 * ran in time counted is given back when its reply comes after the timeout (`#undo`).
 */
import {
  type Adjustment,
  type BlockPolicy,
  InvalidOptionError,
  type Rule,
  type Store,
  type StoreAnswer,
  type StoreMode,
} from '@sluice/core'
import {
  functionOption,
  given,
  integerOption,
  labelOption,
  MAX_TIMER_MS,
  readOptions,
} from '@sluice/core/options'
import { newLease, refundMark, type StorePlace } from '@sluice/core/store'
import { ScriptCalls } from './calls.ts'
import { connectionFor, type RedisClientLike, script } from './client.ts'
import { DeniedCache } from './denied-cache.ts'
import { keyBase } from './keys.ts'
import type { LocalAnswers, LocalCall } from './local.ts'
import { type Plan, Plans, scriptOf } from './plans.ts'
import { type Batch, type Fetch, Prefetch } from './prefetch.ts'
import { Releases } from './releases.ts'
import { RESET_LUA } from './scripts.generated.ts'
import {
  decode,
  encode,
  encodeConsume,
  expectOk,
  fetchExtras,
  fetchedOf,
  holdable,
  resetKeys,
  returnExtras,
  serverNowOf,
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
   * counts nothing; one that ran in time but answered late has its units given back: a call answered by
   * `onStoreError` is not left counted (docs/redis.md states the bounds). Default 100.
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
   * units left then are returned. The next batch is fetched once half of one is spent. A batch starts
   * at 1, grows with the key's local demand and is never more than 1/16 of what any rule has left, so
   * near the limit every call is decided in Redis. The count is never exceeded; a sliding window can pass,
   * in any span of `windowMs`, at most the units prefetched in the `ms` before it beyond its limit.
   * `true` for the defaults. Default off.
   */
  prefetch?: boolean | { units?: number; ms?: number }
}

const RESET = script(RESET_LUA)
const DEFAULT_DENIED_CACHE_KEYS = 10_000
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
  /** Its script calls: timeouts, the bound in flight, deadlines in Redis's clock (calls.ts). */
  readonly #calls: ScriptCalls
  readonly #prefix: string
  readonly #clock: (() => number) | undefined
  readonly #cache: DeniedCache | undefined
  readonly #prefetch: Prefetch<Plan> | undefined
  /** The local answers that are on, asked in turn before Redis (local.ts). */
  readonly #local: readonly LocalAnswers<Plan>[]
  readonly #plans = new Plans()
  /** Releases waiting to share one script call (releases.ts). */
  readonly #releases: Releases
  /** A batch's round trips on their way (fetches, returns, recounts): `close()` waits for them all. */
  readonly #pending = new Set<Promise<unknown>>()
  /** Resets made so far: a denial sent before the latest one is not cached. */
  #resets = 0

  /** Its client and prefix: limiters on the default prefix of stores sharing both are refused (core's `Store.place`). */
  readonly place: StorePlace

  constructor(options: RedisStoreOptions) {
    const o = readOptions('RedisStore', options, KNOWN_OPTIONS, true)
    const connection = connectionFor(o.client, 'RedisStore.client')
    // No ':' either: the store prefix ends at the first ':', so two stores' prefixes can never run into
    // each other's limiter prefixes (`a:b` + `c` against `a` + `b:c`).
    this.#prefix = labelOption('RedisStore.prefix', given(o.prefix, 'sluice'), " ':{}")
    this.place = Object.freeze({ owner: o.client as object, namespace: this.#prefix })
    const timeoutMs = integerOption('RedisStore.timeoutMs', given(o.timeoutMs, 100), 1, MAX_TIMER_MS)
    const maxInFlight = integerOption('RedisStore.maxInFlight', given(o.maxInFlight, 10_000), 1, MAX_TIMER_MS)
    this.#calls = new ScriptCalls(connection, 'RedisStore', timeoutMs, maxInFlight)
    this.#releases = new Releases(this.#calls, connection.cluster)
    this.#clock = o.clock === undefined ? undefined : functionOption('RedisStore.clock', o.clock)
    const p = prefetchOption(o.prefetch)
    this.#prefetch =
      p === undefined
        ? undefined
        : new Prefetch(
            p.units,
            p.ms,
            this.#localNow,
            this.#fetchAhead,
            this.#returnBatch,
            this.#recount,
            // A call that joined a fetch and got too few units asks again, even once closing: it was in flight.
            (c) => this.#apply(c.prefix, c.key, c.rules, c.cost, 'consume', c.block, true),
          )
    const maxKeys = deniedCacheOption(o.deniedCache)
    // A block the cache answers ends the key's local spending at once.
    this.#cache =
      maxKeys === undefined ? undefined : new DeniedCache(maxKeys, (id) => this.#prefetch?.drop(id))
    // The denied-key cache first: a denial or a block stands whatever units this process holds.
    this.#local = [this.#cache, this.#prefetch].filter((layer) => layer !== undefined)
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
    return this.#apply(prefix, key, rules, cost, mode, block, false)
  }

  /** `apply`; `inFlight`: a call made before `close()`, asking again, which goes even while closing. */
  #apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number,
    mode: StoreMode,
    block: BlockPolicy | undefined,
    inFlight: boolean,
  ): Promise<StoreAnswer> | StoreAnswer {
    const plan = this.#plans.of(rules)
    const consume = mode === 'consume'
    const now = this.#scriptNow()
    // A local answer (see local.ts), else the wire.
    let local: LocalCall<Plan> | undefined
    if (consume && this.#local.length > 0) {
      const id = `${prefix}\u0000${key}`
      local = { id, prefix, key, plan, rules, cost, block, now: now ?? performance.now() }
      for (const layer of this.#local) {
        const answer = layer.answer(local)
        if (answer !== undefined) return answer
      }
    }
    // A reset while this call is on its way may have removed what denies it: then its denial is not cached.
    const resets = this.#resets
    const refused = this.#calls.refuse(inFlight)
    if (refused !== undefined) return Promise.reject(refused)
    if (local !== undefined && plan.batchable && this.#prefetch !== undefined) {
      const fetch = this.#prefetch.lead(local.id, prefix, key, plan, rules, cost, block, local.now)
      if (fetch !== undefined) return this.#fetch(fetch[0], fetch[1], cost, now, local.now, resets)
    }

    // A lease id made here, random: unique across processes without a round trip to agree on one.
    const lease = plan.leases ? (consume ? newLease(cost) : '') : undefined
    // A release of this key still waiting in this process goes first (releases.ts).
    this.#releases.before(key)
    const base = keyBase(this.#prefix, prefix, key)
    // The common call (one rule's consume, no block) goes by its straight-down script, in the short call.
    const straight = block === undefined && consume && cost > 0 && plan.consume !== undefined
    const sent = straight
      ? encodeConsume(base, plan, now, cost, lease)
      : encode(
          base,
          plan,
          now,
          consume ? '1' : '0',
          cost,
          block,
          false,
          lease === undefined ? undefined : [lease],
        )

    const call = this.#calls.start<StoreAnswer>()
    const s = straight ? plan.consume! : block !== undefined ? scriptOf(plan, 'apply', true) : plan.script
    this.#calls.attempt(call, s, sent, true, (reply, late) => {
      const [answer, blocked] = decode(plan.limits, rules, reply, false, lease)
      if (late) {
        // Answered by onStoreError already: what the script counted goes back.
        if (consume) this.#undo(key, base, plan, rules, cost, answer, now ?? serverNowOf(reply)!)
        return answer
      }
      if (consume) countedAt(answer, now ?? serverNowOf(reply)!)
      if (local !== undefined && this.#cache !== undefined) {
        this.#remember(local.id, plan.id, cost, local.now, resets, answer, blocked)
      }
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
    batch: Batch<Plan>,
    ask: Fetch,
    cost: number,
    now: number | undefined,
    localNow: number,
    resets: number,
  ): Promise<StoreAnswer> {
    const prefetch = this.#prefetch!
    const { plan, rules } = batch
    // The units spent since the last round trip go with it: counted again if another process has reset the key.
    const seen = batch.resets
    const spent = prefetch.claim(batch)
    this.#releases.before(batch.key)
    const base = keyBase(this.#prefix, batch.prefix, batch.key)
    const extras = fetchExtras({ want: ask.want, seen, spent })
    const sent = encode(base, plan, now, '1', cost, batch.block, true, extras)
    const call = this.#calls.start<StoreAnswer>()
    this.#calls.attempt(
      call,
      scriptOf(plan, 'fetch', batch.block !== undefined),
      sent,
      true,
      (reply, late) => {
        const [answer, blocked] = decode(plan.limits, rules, reply, true)
        // A blocked key's reply has no batch; else it ends with the units taken, the key's reset count, then
        // Redis's ms: when they were counted, without a clock. The whole reply is read before anything is kept.
        const fetched = answer.reason === 'blocked' ? undefined : fetchedOf(reply, ask.want)
        if (late) {
          // Its calls were answered by onStoreError: the whole batch, theirs included, goes back.
          if (fetched !== undefined && fetched.taken > 0) {
            this.#undo(batch.key, base, plan, rules, fetched.taken, answer, now ?? fetched.serverNow)
          }
          return answer
        }
        if (this.#cache !== undefined)
          this.#remember(batch.id, plan.id, cost, localNow, resets, answer, blocked)
        if (fetched === undefined) return prefetch.fetched(batch, answer, 0, cost, localNow, 0, seen, seen)
        const { taken, resets: nowResets, serverNow } = fetched
        return prefetch.fetched(batch, answer, taken, cost, localNow, now ?? serverNow, seen, nowResets)
      },
    )
    this.#track(
      call.promise.then(
        () => prefetch.arrived(batch, ask),
        (error: unknown) => {
          // The script did not run (or ran after its deadline, counting nothing): the units are still unclaimed.
          prefetch.unclaim(batch, spent)
          prefetch.failed(batch, ask, error)
        },
      ),
    )
    return call.promise
  }

  /**
   * Gives back what a consume (or a fetch: `cost` its batch) counted in a script that ran after its call had
   * been answered by its timeout, and so by `onStoreError`: the call's units by a refund of that call (as
   * `refund` with its decision gives them back, `countedAt` its time), its leases by a release. A denied
   * or blocked call counted nothing. What cannot be given back stays counted (see docs/redis.md): a
   * sliding log's units once something was logged after them, and all of it when this call fails too.
   */
  #undo(
    key: string,
    base: string,
    plan: Plan,
    rules: readonly Rule[],
    cost: number,
    answer: StoreAnswer,
    countedAt: number,
  ): void {
    if (answer.reason !== undefined) return
    for (const d of answer) if (!d.allowed) return
    const marks = rules.map((rule, i) => refundMark(rule, answer[i]!, countedAt) ?? '')
    if (marks.some((mark) => mark !== '') && this.#calls.refuse(true) === undefined) {
      const sent = encode(base, plan, this.#scriptNow(), 'refund', cost, undefined, false, marks)
      const call = this.#calls.start<undefined>()
      this.#calls.attempt(call, scriptOf(plan, 'refundCall', false), sent, true, expectOk)
      this.#track(call.promise.then(undefined, () => {}))
    }
    const held = answer.map((d) => d.lease)
    if (held.some((lease) => lease !== undefined)) {
      this.#track(this.#release(key, base, plan, rules, held).then(undefined, () => {}))
    }
  }

  /** Fetches a batch for a key whose units are running low, before calls find none (see Prefetch.spend). */
  readonly #fetchAhead = (batch: Batch<Plan>, ask: Fetch): void => {
    const refused = this.#calls.refuse()
    if (refused !== undefined) {
      this.#prefetch!.failed(batch, ask, refused)
      return
    }
    const now = this.#scriptNow()
    this.#fetch(batch, ask, 0, now, now ?? performance.now(), this.#resets).then(undefined, () => {})
  }

  /**
   * Gives a key's unspent prefetched units back to Redis. Sent even once the store is closing: a batch that
   * lands after `close()` goes back (the client is still the caller's). A return that Redis answered `late`
   * (sent while Redis was paused or slow) surely did nothing, and goes again, up to `RETURN_TRIES` in all;
   * any other failure leaves the units counted (it may have run: a return is not idempotent).
   */
  readonly #returnBatch = (batch: Batch<Plan>, units: number): void => {
    if (this.#calls.refuse(true) !== undefined) return
    this.#releases.before(batch.key)
    const base = keyBase(this.#prefix, batch.prefix, batch.key)
    const spent = this.#prefetch!.claim(batch)
    const extras = returnExtras({ countedAt: batch.countedAt, seen: batch.resets, spent })
    const sent = encode(base, batch.plan, this.#scriptNow(), 'return', units, undefined, true, extras)
    const s = scriptOf(batch.plan, 'return', false)
    let tries = 0
    const send = (): void => {
      tries++
      const call = this.#calls.start<void>()
      this.#calls.attempt(call, s, sent, true, expectOk, (late) => {
        if (late && tries < RETURN_TRIES && this.#calls.refuse(true) === undefined) send()
      })
      this.#track(call.promise.then(undefined, () => {}))
    }
    send()
  }

  /**
   * Counts units spent from a batch after another process reset its key, in the key's new state, as a
   * penalty counts them (whatever the rules say). A failure leaves them uncounted.
   */
  readonly #recount = (batch: Batch<Plan>, units: number): void => {
    if (this.#calls.refuse(true) !== undefined) return
    this.#releases.before(batch.key)
    const base = keyBase(this.#prefix, batch.prefix, batch.key)
    const sent = encode(base, batch.plan, this.#scriptNow(), 'penalize', units)
    const call = this.#calls.start<void>()
    this.#calls.attempt(call, scriptOf(batch.plan, 'penalize', false), sent, true, () => undefined)
    this.#track(call.promise.then(undefined, () => {}))
  }

  /** Keeps `work` (settling, never rejecting) until it settles, for `close()`. */
  #track(work: Promise<unknown>): void {
    this.#pending.add(work)
    work.then(() => this.#pending.delete(work))
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
    const refused = this.#calls.refuse()
    if (refused !== undefined) return Promise.reject(refused)
    const plan = this.#plans.of(rules)
    const penalize = adjustment === 'penalize'
    // A refund or a lifted slot can make a cached denial wrong; a penalty cannot, but it may block.
    if (!penalize) this.#cache?.delete(`${prefix}\u0000${key}`)
    const base = keyBase(this.#prefix, prefix, key)
    // A release reads no clock (releases.ts).
    if (adjustment === 'release') return this.#release(key, base, plan, rules, marks)
    const withBlock = penalize && block !== undefined
    const now = this.#scriptNow()
    this.#releases.before(key)
    // A refund with marks gives back one call's units (`refundCall`); without, the newest units.
    const act = adjustment === 'refund' && marks !== undefined ? 'refundCall' : adjustment
    // Each rule's mark follows the params for the acts that name one call's units, lease or queue slot.
    const extras = act === 'refund' || act === 'penalize' ? undefined : rules.map((_, i) => marks?.[i] ?? '')
    const sent = encode(base, plan, now, adjustment, cost, withBlock ? block : undefined, false, extras)
    const s = scriptOf(plan, act, withBlock)
    const call = this.#calls.start<StoreAnswer | undefined>()
    this.#calls.attempt(call, s, sent, true, (reply) =>
      penalize ? decode(plan.limits, rules, reply, false)[0] : expectOk(reply),
    )
    return call.promise
  }

  /**
   * Ends a call's leases, each concurrency rule's by its mark, with the releases batched in this turn
   * (releases.ts): its promise settles with their script call's reply. A lease was taken before its
   * release, so it ends by itself within its rule's `leaseMs` from now: a lost release is retried until then.
   */
  #release(
    key: string,
    base: string,
    plan: Plan,
    rules: readonly Rule[],
    marks: readonly (string | undefined)[] | undefined,
  ): Promise<undefined> {
    const keys: string[] = []
    const leases: string[] = []
    const ends: number[] = []
    const now = performance.now()
    for (let i = 0; i < plan.kinds.length; i++) {
      const lease = marks?.[i]
      const rule = rules[i]!
      // A lease no consume sent (see wire.ts `holdable`) belongs to nobody: its release changes nothing.
      if (rule.kind === 'concurrency' && lease !== undefined && lease !== '' && holdable(lease)) {
        keys.push(base + plan.ids[i]!)
        leases.push(lease)
        ends.push(now + rule.leaseMs)
      }
    }
    // No lease to end: nothing to ask Redis.
    if (keys.length === 0) return NOTHING
    return this.#releases.add(key, keys, leases, ends)
  }

  reset(prefix: string, key: string, rules: readonly Rule[]): Promise<void> {
    this.#resets++
    this.#cache?.delete(`${prefix}\u0000${key}`)
    this.#prefetch?.forget(`${prefix}\u0000${key}`)
    const refused = this.#calls.refuse()
    if (refused !== undefined) return Promise.reject(refused)
    this.#releases.before(key)
    const base = keyBase(this.#prefix, prefix, key)
    // The block goes too, with its escalation (DEL of a key that is not there costs nothing), and the reset
    // count: a process holding prefetched units learns of the reset from it.
    const keys = resetKeys(
      base,
      rules.map((rule) => rule.id),
    )
    const call = this.#calls.start<void>()
    this.#calls.sendPlain(call, RESET, keys)
    return call.promise
  }

  /**
   * Gives prefetched units back, stops answering and forgets the denied-key cache. Resolves once every
   * batch that was on its way has landed and its unspent units have been returned (or failed to be), so
   * the caller may close the client then. The client stays open: it is the caller's.
   */
  async close(): Promise<void> {
    // Releases made before closing go out now, and those waiting to go again once more.
    this.#track(this.#releases.close())
    this.#prefetch?.close()
    this.#calls.closed = true
    this.#cache?.clear()
    // A batch landing now gives its units back, which may start another return: wait until none is left.
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
  }
}

const NOTHING: Promise<undefined> = Promise.resolve(undefined)

/** Most times a batch's return is sent when Redis answers it `late` (see `#returnBatch`). */
const RETURN_TRIES = 3

/** Says in an admitted consume's answer when Redis counted it (`StoreAnswer.countedAt`, in the scripts' ms). */
function countedAt(answer: StoreAnswer, at: number): void {
  if (answer.reason !== undefined) return
  for (const d of answer)
    if (!d.allowed)
      return // A plain field (a defined, hidden one cost a call thousands of instructions): the limiter copies the
      // decisions into the Decision's own list, so it never shows there.
  ;(answer as { countedAt?: number }).countedAt = at
}

const DEFAULT_PREFETCH_UNITS = 64
const DEFAULT_PREFETCH_MS = 100

/** Prefetch's units and ms, or undefined when it is off. */
function prefetchOption(option: unknown): { units: number; ms: number } | undefined {
  if (option === undefined || option === false) return undefined
  if (option === true) return { units: DEFAULT_PREFETCH_UNITS, ms: DEFAULT_PREFETCH_MS }
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ units?: number; ms?: number }>('RedisStore.prefetch', option, ['units', 'ms'])
    const units = integerOption(
      'RedisStore.prefetch.units',
      given(o.units, DEFAULT_PREFETCH_UNITS),
      1,
      1_000_000,
    )
    const ms = integerOption('RedisStore.prefetch.ms', given(o.ms, DEFAULT_PREFETCH_MS), 1, 60_000)
    return { units, ms }
  }
  throw new InvalidOptionError('RedisStore.prefetch', option, 'true, false or { units, ms }')
}

/** The denied-key cache's bound, or undefined when it is off. */
function deniedCacheOption(option: unknown): number | undefined {
  if (option === undefined || option === true) return DEFAULT_DENIED_CACHE_KEYS
  if (option === false) return undefined
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ maxKeys?: number }>('RedisStore.deniedCache', option, ['maxKeys'])
    const maxKeys = integerOption(
      'RedisStore.deniedCache.maxKeys',
      given(o.maxKeys, DEFAULT_DENIED_CACHE_KEYS),
      1,
    )
    return maxKeys
  }
  throw new InvalidOptionError('RedisStore.deniedCache', option, 'true, false or { maxKeys }')
}
