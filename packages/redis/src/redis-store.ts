/**
 * @module RedisStore: rule state in Redis, shared by every process and machine that uses the same Redis.
 *
 * Over 400 lines, not split further: the store's acts (apply, adjust, reset, close) and a batch's round trips
 * (fetch, return, recount: the store's side of prefetch's `PrefetchWire`) read the same call state at each
 * step (timeouts, resets, the denied-key cache, giving back a late reply); everything else is apart: the
 * wire (wire.ts), the client (client.ts), calls and deadlines (calls.ts), plans (plans.ts), scripts
 * (compose.ts), local answers (local.ts and its layers), batched releases (releases.ts), the options and
 * their checks (store-options.ts).
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
import type {
  Adjustment,
  BlockPolicy,
  ConcurrencyRule,
  Costs,
  Rule,
  Store,
  StoreAnswer,
  StoreMode,
} from '@sluice/core'
import { InvalidCostError } from '@sluice/core'
import { newLease, refundMark, type StorePlace } from '@sluice/core/store'

import { ScriptCalls } from './calls.ts'
import { type Script, script } from './client.ts'
import { DeniedCache } from './denied-cache.ts'
import { keyBase } from './keys.ts'
import { REDIS_KINDS } from './kinds.ts'
import type { LocalAnswers, LocalCall } from './local.ts'
import { type Plan, Plans, scriptOf } from './plans.ts'
import { type Batch, type Claim, type Fetch, Prefetch, type PrefetchWire } from './prefetch.ts'
import { Releases } from './releases.ts'
import { RESET_LUA } from './scripts.generated.ts'
import { type RedisStoreOptions, storeOptions } from './store-options.ts'
import {
  type Call,
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

export type { RedisStoreOptions } from './store-options.ts'

const RESET = script(RESET_LUA)

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
    const o = storeOptions(options)
    this.#prefix = o.prefix
    this.place = Object.freeze({ owner: o.client as object, namespace: o.prefix })
    this.#calls = new ScriptCalls(o.connection, 'RedisStore', o.timeoutMs, o.maxInFlight)
    this.#releases = new Releases(this.#calls, o.connection.cluster)
    this.#clock = o.clock
    this.#prefetch =
      o.prefetch === undefined
        ? undefined
        : new Prefetch({ ...o.prefetch, clock: this.#localNow, wire: this.#batchWire })
    // A block the cache answers ends the key's local spending at once.
    this.#cache =
      o.deniedCacheKeys === undefined
        ? undefined
        : new DeniedCache(o.deniedCacheKeys, (id) => this.#prefetch?.drop(id))
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
    cost: number | Costs,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Promise<StoreAnswer> | StoreAnswer {
    // Per-rule costs that are all equal are a plain cost: the same script and arguments as any such call.
    const call = this.#call(prefix, key, rules, typeof cost === 'number' ? cost : oneCost(cost), mode, block)
    return this.#localAnswer(call) ?? this.#wire(call, false)
  }

  /** The call as the store carries it, timed now. */
  #call(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    mode: StoreMode,
    block: BlockPolicy | undefined,
  ): StoreCall {
    const now = this.#scriptNow()
    return {
      id: `${prefix}\u0000${key}`,
      prefix,
      key,
      plan: this.#plans.of(rules),
      rules,
      cost,
      block,
      now: now ?? performance.now(),
      consume: mode === 'consume',
      scriptNow: now,
    }
  }

  /** The call's answer from this process's memory (see local.ts): the first layer that answers, or none. */
  #localAnswer(call: StoreCall): StoreAnswer | Promise<StoreAnswer> | undefined {
    if (!call.consume) return undefined
    for (const layer of this.#local) {
      const answer = layer.answer(call)
      if (answer !== undefined) return answer
    }
    return undefined
  }

  /**
   * The call's answer from Redis: a fetch it leads, else one script call. `inFlight`: a call made before
   * `close()` asking again, which goes even while closing.
   */
  #wire(call: StoreCall, inFlight: boolean): Promise<StoreAnswer> {
    // A reset while this call is on its way may have removed what denies it: then its denial is not cached.
    const resets = this.#resets
    const refused = this.#calls.refuse(inFlight)
    if (refused !== undefined) return Promise.reject(refused)
    const fetch = call.consume ? this.#prefetch?.lead(call) : undefined
    if (fetch !== undefined) return this.#fetch(fetch, call.scriptNow, resets)
    return this.#send(call, resets)
  }

  /**
   * Asks again, from the top and timed now, for a call that joined a fetch which brought too few units for
   * it: it was made before any `close()`, so it goes even while closing.
   */
  #again(joined: LocalCall<Plan>): StoreAnswer | Promise<StoreAnswer> {
    try {
      const { prefix, key, rules, cost, block } = joined
      const call = this.#call(prefix, key, rules, cost, 'consume', block)
      return this.#localAnswer(call) ?? this.#wire(call, true)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** One script call for the call: its rules applied to the key in Redis. */
  #send(c: StoreCall, resets: number): Promise<StoreAnswer> {
    const { key, plan, rules, cost, block, consume } = c
    const now = c.scriptNow
    // A lease id made here, random: unique across processes without a round trip to agree on one.
    const lease = plan.leases ? (consume ? newLease(leaseUnits(plan, cost)) : '') : undefined
    // A release of this key still waiting in this process goes first (releases.ts).
    this.#releases.before(key)
    const base = keyBase(this.#prefix, c.prefix, key)
    const mode = consume ? '1' : '0'
    const call = this.#calls.start<StoreAnswer>()
    let sent: Call
    let s: Script
    if (typeof cost !== 'number') {
      // Each rule at its own cost: the per-rule script, the costs after the params.
      sent = encode(base, plan, now, mode, cost, block, false, lease === undefined ? undefined : [lease])
      s = scriptOf(plan, 'apply', block !== undefined, true)
    } else if (block === undefined && consume && cost > 0 && plan.consume !== undefined) {
      // The common call (one rule's consume, no block) goes by its straight-down script, in the short call.
      sent = encodeConsume(base, plan, now, cost, lease)
      s = plan.consume
    } else {
      sent = encode(base, plan, now, mode, cost, block, false, lease === undefined ? undefined : [lease])
      s = block !== undefined ? scriptOf(plan, 'apply', true) : plan.script
    }
    this.#calls.attempt(call, s, sent, true, (reply, late) => {
      const [answer, blocked] = decode(plan.limits, rules, reply, false, lease)
      if (late) {
        // Answered by onStoreError already: what the script counted goes back.
        if (consume) this.#undo(key, base, plan, rules, cost, answer, now ?? serverNowOf(reply)!)
        return answer
      }
      if (consume) countedAt(answer, now ?? serverNowOf(reply)!)
      if (consume && this.#cache !== undefined) {
        this.#remember(c.id, plan, cost, c.now, resets, answer, blocked)
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
    plan: Plan,
    cost: number | Costs,
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
        if (this.#prefetch?.holds(cacheKey) !== true)
          cache.set(cacheKey, plan.id, cost, sentAt, answer, plan.certainRetry)
      } else if (cache.size > 0) cache.delete(cacheKey)
    }
  }

  /**
   * Sends a fetch: its leader's `cost` (0 for a fetch ahead) and up to its `want` more units, counted in
   * Redis; the reply keeps the units the leader does not spend, and its joiners spend theirs once it settles.
   */
  #fetch(fetch: Fetch<Plan>, now: number | undefined, resets: number): Promise<StoreAnswer> {
    const prefetch = this.#prefetch!
    const { batch, cost } = fetch
    const { plan, rules } = batch.of
    // The units spent since the last round trip go with it: counted again if another process has reset the key.
    const claim = prefetch.claim(batch)
    this.#releases.before(batch.of.key)
    const base = keyBase(this.#prefix, batch.of.prefix, batch.of.key)
    const extras = fetchExtras({ want: fetch.want, ...claim })
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
        const fetched = answer.reason === 'blocked' ? undefined : fetchedOf(reply, fetch.want)
        if (late) {
          // Its calls were answered by onStoreError: the whole batch, theirs included, goes back.
          if (fetched !== undefined && fetched.taken > 0) {
            this.#undo(batch.of.key, base, plan, rules, fetched.taken, answer, now ?? fetched.serverNow)
          }
          return answer
        }
        if (this.#cache !== undefined)
          this.#remember(batch.of.id, plan, cost, fetch.at, resets, answer, blocked)
        const counted =
          fetched === undefined
            ? { answer, taken: 0, countedAt: 0, resets: claim.seen }
            : { answer, taken: fetched.taken, countedAt: now ?? fetched.serverNow, resets: fetched.resets }
        return prefetch.fetched(fetch, claim, counted)
      },
    )
    this.#track(
      call.promise.then(
        () => this.#landed(fetch),
        (error: unknown) => prefetch.failed(fetch, claim, error),
      ),
    )
    return call.promise
  }

  /** A fetch has landed: its joiners spend what it brought, and those it brought too few for ask again. */
  #landed(fetch: Fetch<Plan>): void {
    for (const short of this.#prefetch!.arrived(fetch)) {
      short.resolve(this.#again(short.call))
    }
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
    cost: number | Costs,
    answer: StoreAnswer,
    countedAt: number,
  ): void {
    if (answer.reason !== undefined) return
    for (const d of answer) if (!d.allowed) return
    const marks = rules.map((rule, i) => refundMark(rule, answer[i]!, countedAt) ?? '')
    if (marks.some((mark) => mark !== '') && this.#calls.refuse(true) === undefined) {
      const now = this.#scriptNow()
      // Per-rule costs go back as a settle of each rule to nothing (its reply, a peek, says nothing here).
      const call = this.#calls.start<unknown>()
      if (typeof cost === 'number') {
        const sent = encode(base, plan, now, 'refund', cost, undefined, false, marks)
        this.#calls.attempt(call, scriptOf(plan, 'refundCall', false), sent, true, expectOk)
      } else {
        const back = cost.map((c) => -c)
        const sent = encode(base, plan, now, 'settle', back, undefined, false, marks)
        this.#calls.attempt(call, scriptOf(plan, 'settle', false, true), sent, true, () => undefined)
      }
      this.#track(call.promise.then(undefined, () => {}))
    }
    const held = answer.map((d) => d.lease)
    if (held.some((lease) => lease !== undefined)) {
      this.#track(this.#release(key, base, plan, rules, held).then(undefined, () => {}))
    }
  }

  /** A batch's round trips, as prefetch asks for them (see `PrefetchWire`). */
  readonly #batchWire: PrefetchWire<Plan> = {
    fetchAhead: (fetch) => {
      const refused = this.#calls.refuse()
      if (refused !== undefined) {
        this.#prefetch!.failed(fetch, NO_CLAIM, refused)
        return
      }
      this.#fetch(fetch, this.#scriptNow(), this.#resets).then(undefined, () => {})
    },
    giveBack: (batch, units) => this.#giveBack(batch, units),
    recount: (batch, units) => this.#recount(batch, units),
  }

  /**
   * Gives a key's unspent prefetched units back to Redis. Sent even once the store is closing: a batch that
   * lands after `close()` goes back (the client is still the caller's). A return that Redis answered `late`
   * (sent while Redis was paused or slow) surely did nothing, and goes again, up to `RETURN_TRIES` in all;
   * any other failure leaves the units counted (it may have run: a return is not idempotent).
   */
  #giveBack(batch: Batch<Plan>, units: number): void {
    if (this.#calls.refuse(true) !== undefined) return
    const { prefix, key, plan } = batch.of
    this.#releases.before(key)
    const base = keyBase(this.#prefix, prefix, key)
    const claim = this.#prefetch!.claim(batch)
    const extras = returnExtras({ countedAt: batch.newest.countedAt, ...claim })
    const sent = encode(base, plan, this.#scriptNow(), 'return', units, undefined, true, extras)
    const s = scriptOf(plan, 'return', false)
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
  #recount(batch: Batch<Plan>, units: number): void {
    if (this.#calls.refuse(true) !== undefined) return
    const { prefix, key, plan } = batch.of
    this.#releases.before(key)
    const base = keyBase(this.#prefix, prefix, key)
    const sent = encode(base, plan, this.#scriptNow(), 'penalize', units)
    const call = this.#calls.start<void>()
    this.#calls.attempt(call, scriptOf(plan, 'penalize', false), sent, true, () => undefined)
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
    cost: number | Costs,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): Promise<StoreAnswer | undefined> {
    const refused = this.#calls.refuse()
    if (refused !== undefined) return Promise.reject(refused)
    const plan = this.#plans.of(rules)
    if (adjustment === 'settle') return this.#settle(prefix, key, plan, rules, cost, block, marks)
    // Per-rule costs that are all the same go as one cost, by the act's plain script.
    if (typeof cost !== 'number') cost = oneCost(cost)
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
    const s = scriptOf(plan, act, withBlock, typeof cost !== 'number')
    const call = this.#calls.start<StoreAnswer | undefined>()
    this.#calls.attempt(call, s, sent, true, (reply) =>
      penalize ? decode(plan.limits, rules, reply, false)[0] : expectOk(reply),
    )
    return call.promise
  }

  /**
   * Settles one call: each rule by its signed amount (`cost`, or one number for every rule), in one script
   * call that answers as a peek of cost 1 (with `block`) right after, as a penalty does. A settle that gives
   * anything back drops the key's cached denial, as a refund does; one that only counts more keeps it.
   */
  #settle(
    prefix: string,
    key: string,
    plan: Plan,
    rules: readonly Rule[],
    cost: number | Costs,
    block: BlockPolicy | undefined,
    marks: readonly (string | undefined)[] | undefined,
  ): Promise<StoreAnswer | undefined> {
    const amounts = typeof cost === 'number' ? rules.map(() => cost) : cost
    if (amounts.length !== rules.length) {
      return Promise.reject(
        new InvalidCostError(cost, `a settle has one amount per rule, and the call has ${rules.length}`),
      )
    }
    if (amounts.some((a) => a < 0)) this.#cache?.delete(`${prefix}\u0000${key}`)
    this.#releases.before(key)
    const base = keyBase(this.#prefix, prefix, key)
    // Each rule's mark follows the amounts: '' for a rule that gives nothing back.
    const extras = rules.map((_, i) => marks?.[i] ?? '')
    const sent = encode(base, plan, this.#scriptNow(), 'settle', amounts, block, false, extras)
    const call = this.#calls.start<StoreAnswer | undefined>()
    this.#calls.attempt(call, scriptOf(plan, 'settle', block !== undefined, true), sent, true, (reply) => {
      return decode(plan.limits, rules, reply, false)[0]
    })
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
      if (REDIS_KINDS[rule.kind].mark === 'lease' && lease !== undefined && lease !== '' && holdable(lease)) {
        keys.push(base + plan.ids[i]!)
        leases.push(lease)
        ends.push(now + (rule as ConcurrencyRule).leaseMs)
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

/** Per-rule costs as one number when they are all the same, else as they are. */
function oneCost(costs: Costs): number | Costs {
  const first = costs[0]!
  for (let i = 1; i < costs.length; i++) if (costs[i] !== first) return costs
  return first
}

/** The units a consume's lease takes: the call's cost, or its first concurrency rule's. */
function leaseUnits(plan: Plan, cost: number | Costs): number {
  if (typeof cost === 'number') return cost
  for (let i = 0; i < plan.kinds.length; i++)
    if (REDIS_KINDS[plan.kinds[i]!].mark === 'lease') return cost[i]!
  return 0
}

/** A call as the store carries it: what its local layers read, and what the wire needs besides. */
interface StoreCall extends LocalCall<Plan> {
  readonly consume: boolean
  /** The ms its script is sent as its `now`, or undefined for Redis's clock (see `#scriptNow`). */
  readonly scriptNow: number | undefined
}

/** What a fetch refused before it was sent took with it: nothing. */
const NO_CLAIM: Claim = { seen: '', spent: 0 }

/** Most times a batch's return is sent when Redis answers it `late` (see `#giveBack`). */
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
