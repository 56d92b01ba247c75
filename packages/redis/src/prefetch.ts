/**
 * @module Prefetch: units a RedisStore takes from Redis ahead of the calls that spend them, so most calls on
 * a busy key are decided in this process, with no round trip.
 *
 * Over 400 lines, not split further: a batch's life (lead, join, spend, fetch ahead, return, recount after a
 * reset, expiry) is one piece of bookkeeping whose invariant (the count never exceeded) spans all of it. Its
 * round trips are the store's (`PrefetchWire`); when a key falls due is due.ts's.
 *
 * A call that finds no units for its key leads a fetch: one script call that counts a batch of units on
 * every rule, atomically, as that many admitted calls would (src/compose.ts, act `fetch`). Calls that come
 * while it is in flight join it as long as the batch it asked for covers them; the rest lead fetches of
 * their own. The units a reply brings are spent locally, by the leader, its joiners, then any call on the
 * key, for at most `ms` from when the fetch was sent; units left then are returned to Redis. Once a batch is
 * half spent, the next one is fetched ahead, so the calls of a busy key seldom find none.
 *
 * A batch's size follows the key's demand: it starts at 1, doubles (up to `units`) each time the units ran
 * out before their time was up, and falls to what was spent when they did not. Redis cuts it further:
 * never more than `1 / FETCH_SHARE` of what any rule has left, so near the limit every call is a round trip
 * and decisions are exact there.
 */
import type { BlockPolicy, RuleDecision, StoreAnswer } from '@sluice/core'
import { FETCH_SHARE } from './compose.ts'
import { DueQueue } from './due.ts'
import { REDIS_KINDS } from './kinds.ts'
import type { LocalAnswers, LocalCall } from './local.ts'

/** What the store hands a fetch: its rules under one identity (`id`: their specs joined). */
export interface Batchable {
  readonly id: string
  /** Whether every rule is of a kind whose units can be fetched ahead and returned (each kind's `prefetch` in `kinds.ts`). */
  readonly batchable: boolean
}

/**
 * What prefetch asks of the store's wire: a batch's round trips. Each is sent even once closing (a batch
 * that lands after `close()` goes back); what the reply of a fetch says comes back by `Prefetch.fetched`,
 * `arrived` or `failed`.
 */
export interface PrefetchWire<P extends Batchable> {
  /** Sends a fetch for a key whose units are running low, before calls find none (no call leads it). */
  fetchAhead(fetch: Fetch<P>): void
  /** Gives `units` of the key's unspent units back to Redis. */
  giveBack(batch: Batch<P>, units: number): void
  /** Counts `units` spent from the batch after another process reset its key, in the key's new state. */
  recount(batch: Batch<P>, units: number): void
}

/** A call waiting for a fetch in flight. */
export interface Joiner<P> {
  readonly call: LocalCall<P>
  /** Its cost: a call with per-rule costs never joins a fetch. */
  readonly cost: number
  readonly resolve: (answer: StoreAnswer | Promise<StoreAnswer>) => void
  readonly reject: (error: unknown) => void
}

/** A fetch in flight: the units it asked for, how many of them its leader and joiners will spend. */
export interface Fetch<P extends Batchable> {
  readonly batch: Batch<P>
  /** What its leader spends (0 for a fetch ahead), and when it was sent (local ms). */
  readonly cost: number
  readonly at: number
  readonly want: number
  promised: number
  readonly joiners: Joiner<P>[]
}

/** What a round trip took with it (`Prefetch.claim`): the reset count it was sent under, the units spent since. */
export interface Claim {
  readonly seen: string
  readonly spent: number
}

/** What Redis said of a fetch: its answer and the batch it counted (`taken` units at Redis ms `countedAt`). */
export interface FetchReply {
  readonly answer: StoreAnswer
  readonly taken: number
  readonly countedAt: number
  /** The key's reset count as Redis has it. */
  readonly resets: string
}

/** The newest batch: when its fetch was sent (local ms), when Redis counted it, its size, and its reply. */
interface Newest {
  readonly at: number
  readonly countedAt: number
  readonly taken: number
  /** Every rule's figures with the whole batch counted; the least remaining. */
  readonly figures: readonly RuleDecision[]
  readonly room: number
}

const NO_BATCH: Newest = { at: 0, countedAt: 0, taken: 0, figures: [], room: 0 }

/** One key's prefetched units. */
export interface Batch<P extends Batchable> {
  /** The key and rules it was fetched for (its leader's call, whose own cost and time do not matter here). */
  readonly of: LocalCall<P>
  /** The limiter's block policy, which a fetch ahead sends as the calls do. */
  block: BlockPolicy | undefined
  /** Units counted in Redis and not spent yet, spendable until `until` (local ms). */
  left: number
  until: number
  /**
   * The key's reset count as the latest reply said ('' before any), and the units spent here since the
   * latest round trip claimed them: sent with the next one, which counts them again in the new state when
   * another process has reset the key meanwhile (so the units a process holds are counted in whatever state
   * the key has, at the latest at its next round trip).
   */
  resets: string
  spent: number
  newest: Newest
  /** Units the next fetch asks for (before Redis cuts it). */
  size: number
  /** Fetches in flight, and the latest of them (the one new calls may join). */
  inFlight: number
  latest: Fetch<P> | undefined
  /** Whether its units are spent or returned, so the sweep forgets the key when it next falls due. */
  idle: boolean
  /** When the sweep next looks at the key, and whether it waits in the sweep's queue (due.ts). */
  due: number
  queued: boolean
}

/** Keys holding units or fetching at once; calls on further keys go to Redis one by one. */
const MAX_KEYS = 10_000

export interface PrefetchOptions<P extends Batchable> {
  /** Most units one fetch asks for, and for how long (ms) a batch's units may be spent. */
  readonly units: number
  readonly ms: number
  /** Local ms: the store's clock, or the process's monotonic one. */
  readonly clock: () => number
  readonly wire: PrefetchWire<P>
}

export class Prefetch<P extends Batchable> implements LocalAnswers<P> {
  readonly units: number
  readonly ms: number
  readonly #clock: () => number
  readonly #wire: PrefetchWire<P>
  readonly #batch = new Map<string, Batch<P>>()
  readonly #due: DueQueue<Batch<P>>
  /**
   * Set by `close()`: no batch is started from then on, but the calls already waiting on a fetch still
   * spend what it brings for them (`arrived`): their units were counted for them.
   */
  #closed = false

  constructor(options: PrefetchOptions<P>) {
    this.units = options.units
    this.ms = options.ms
    this.#clock = options.clock
    this.#wire = options.wire
    this.#due = new DueQueue(options.clock, this.#look)
  }

  /** The call spent from the key's units, or joined to the fetch on its way when that covers it. */
  answer(call: LocalCall<P>): StoreAnswer | Promise<StoreAnswer> | undefined {
    // A call with per-rule costs is never spent from a batch: a batch's units are the same on every rule.
    const cost = call.cost
    if (typeof cost !== 'number' || !call.plan.batchable) return undefined
    const batch = this.#batch.get(call.id)
    if (batch === undefined || !fetchedUnder(batch, call.plan)) return undefined
    return this.#spend(batch, cost, call.now) ?? this.#join(batch, call, cost)
  }

  /** Whether this process holds units for the key. */
  holds(id: string): boolean {
    const batch = this.#batch.get(id)
    return batch !== undefined && batch.left > 0
  }

  /** Spends `cost` of the key's units at local time `now`: the answer, or undefined when there are too few. */
  #spend(batch: Batch<P>, cost: number, now: number): StoreAnswer | undefined {
    if (batch.left < cost || now >= batch.until) return undefined
    batch.left -= cost
    batch.spent += cost
    const answer = answerAt(batch, now, true)
    // Half the newest batch spent, nothing on its way, and room for Redis to give 2 units or more: the next
    // batch is fetched now, twice as big (not once closing).
    if (
      batch.inFlight === 0 &&
      batch.left * 2 < batch.newest.taken &&
      batch.newest.room >= 2 * FETCH_SHARE &&
      !this.#closed
    ) {
      if (batch.size < this.units) batch.size = Math.min(this.units, batch.size * 2)
      this.#wire.fetchAhead(this.#start(batch, 0, now, batch.size))
    }
    return answer
  }

  /** The units spent since the latest round trip, which the round trip being sent now takes with it. */
  claim(batch: Batch<P>): Claim {
    const spent = batch.spent
    batch.spent = 0
    return { seen: batch.resets, spent }
  }

  /** Has the call wait for the key's latest fetch when that covers it; undefined when it does not. */
  #join(batch: Batch<P>, call: LocalCall<P>, cost: number): Promise<StoreAnswer> | undefined {
    const fetch = batch.latest
    if (fetch === undefined || fetch.want - fetch.promised < cost) return undefined
    fetch.promised += cost
    return new Promise<StoreAnswer>((resolve, reject) => {
      fetch.joiners.push({ call, cost, resolve, reject })
    })
  }

  /**
   * Starts a fetch for the call: the key's state (made when new) and the fetch, or undefined when the
   * call must go to Redis on its own (too many keys with batches, or units fetched under other rules still on the
   * way). Units the key holds under other rules, or past their time, are returned first.
   */
  lead(call: LocalCall<P>): Fetch<P> | undefined {
    // A call with per-rule costs goes to Redis on its own (see `answer`).
    const cost = call.cost
    if (this.#closed || typeof cost !== 'number' || !call.plan.batchable) return undefined
    let batch = this.#batch.get(call.id)
    if (batch !== undefined && !fetchedUnder(batch, call.plan)) {
      if (batch.inFlight > 0) return undefined
      this.drop(call.id)
      batch = undefined
    }
    if (batch === undefined) {
      if (this.#batch.size >= MAX_KEYS) return undefined
      batch = {
        of: call,
        block: call.block,
        left: 0,
        until: 0,
        resets: '',
        spent: 0,
        newest: NO_BATCH,
        size: 1,
        inFlight: 0,
        latest: undefined,
        idle: false,
        due: 0,
        queued: false,
      }
      this.#batch.set(call.id, batch)
    } else if (call.now < batch.until) {
      // The units ran out in time: demand outgrew the batch.
      if (batch.size < this.units) batch.size = Math.min(this.units, batch.size * 2)
    } else this.#expire(batch)
    batch.block = call.block
    return this.#start(batch, cost, call.now, Math.max(cost, batch.size))
  }

  /** A fetch of up to `want` units, `cost` of them its leader's, sent at local time `at`: now the key's latest. */
  #start(batch: Batch<P>, cost: number, at: number, want: number): Fetch<P> {
    const fetch: Fetch<P> = { batch, cost, at, want, promised: cost, joiners: [] }
    batch.inFlight++
    batch.latest = fetch
    return fetch
  }

  /**
   * A fetch's reply, read by the store (`claim`: what it was sent with). Keeps the units the leader does not
   * spend and returns the leader's answer, its figures counting those units as not yet spent.
   */
  fetched(fetch: Fetch<P>, claim: Claim, reply: FetchReply): StoreAnswer {
    const { batch, cost, at } = fetch
    const { answer, taken, countedAt } = reply
    if (claim.seen !== '' && reply.resets !== claim.seen) {
      // Another process reset the key: the batch's units left were counted in the state it removed, so they are
      // dropped (not returned), and those spent since the fetch was sent are counted in the new state.
      batch.left = 0
      const since = this.claim(batch).spent
      if (since > 0) this.#wire.recount(batch, since)
    }
    batch.resets = reply.resets
    if (answer.reason !== undefined || !admitted(answer)) return answer
    const now = this.#clock()
    if (batch.left > 0 && now >= batch.until) this.#expire(batch)
    let until = at + this.ms
    // A fixed window's units never outlive the window they were counted in.
    for (let i = 0; i < answer.length; i++) {
      if (REDIS_KINDS[batch.of.rules[i]!.kind].batch === 'window')
        until = Math.min(until, at + answer[i]!.resetMs)
    }
    // Even a batch the leader spent whole sets a time: a call that finds no units before it grows the next.
    if (batch.left === 0 || until < batch.until) batch.until = until
    batch.left += taken - cost
    let room = Number.POSITIVE_INFINITY
    for (const d of answer) if (d.remaining < room) room = d.remaining
    batch.newest = { at, countedAt, taken, figures: answer, room }
    batch.idle = false
    const leader = answerAt(batch, at, false)
    // Units fetched for a key this process has since let go of (a block, other rules) go straight back; once
    // closing, after the fetch's joiners have spent theirs (`arrived`).
    if (this.#batch.get(batch.of.id) !== batch) {
      if (batch.left > 0 && !this.#closed) this.#return(batch)
    } else this.#due.schedule(batch, batch.until)
    return leader
  }

  /**
   * The fetch has settled: its joiners spend the units it brought. Returns those it brought too few for:
   * the store asks again for each. A batch let go of (a block, other rules) gives its joiners nothing, but
   * one let go of by `close()` does: they were waiting for units counted for them, and what they leave goes
   * back.
   */
  arrived(fetch: Fetch<P>): Joiner<P>[] {
    const { batch } = fetch
    this.#settle(fetch)
    const now = this.#clock()
    const current = this.#batch.get(batch.of.id) === batch
    const short: Joiner<P>[] = []
    for (const joiner of fetch.joiners) {
      const local = current || this.#closed ? this.#spend(batch, joiner.cost, now) : undefined
      if (local !== undefined) joiner.resolve(local)
      else short.push(joiner)
    }
    if (!current && batch.left > 0) this.#return(batch)
    return short
  }

  /**
   * The fetch failed (the script did not run, or ran after its deadline, counting nothing): the units its
   * claim took are still unclaimed, and its joiners fail with it (each one's limiter then applies its
   * `onStoreError`).
   */
  failed(fetch: Fetch<P>, claim: Claim, error: unknown): void {
    fetch.batch.spent += claim.spent
    this.#settle(fetch)
    for (const joiner of fetch.joiners) joiner.reject(error)
  }

  #settle(fetch: Fetch<P>): void {
    const { batch } = fetch
    batch.inFlight--
    if (batch.latest === fetch) batch.latest = undefined
    if (batch.inFlight === 0) this.#due.schedule(batch, Math.max(batch.until, this.#clock()))
  }

  /** Forgets the key, giving its units back (a known block, other rules, the store closing). */
  drop(id: string): void {
    const batch = this.#batch.get(id)
    if (batch === undefined) return
    this.#batch.delete(id)
    if (batch.left > 0) this.#return(batch)
  }

  /** Forgets the key without giving anything back: a reset removed what its units were counted in. */
  forget(id: string): void {
    this.#batch.delete(id)
  }

  /** Gives every key's units back, starts no batch from now on and stops the sweep. */
  close(): void {
    this.#closed = true
    for (const id of [...this.#batch.keys()]) this.drop(id)
    this.#due.clear()
  }

  /** Ends the key's batch: unspent units go back, and the next batch is the size of what was spent. */
  #expire(batch: Batch<P>): void {
    if (batch.left > 0) {
      batch.size = Math.max(1, Math.min(batch.size, batch.newest.taken - batch.left))
      this.#return(batch)
    }
    batch.idle = true
  }

  /**
   * Returns the key's units. A rule whose batches go back newest only (the sliding ones) takes them back only where the newest batch was counted
   * (at `countedAt`), so at most that batch goes back and older units stay counted; the other rules take
   * every one back.
   */
  #return(batch: Batch<P>): void {
    const newest = batch.of.rules.some((r) => REDIS_KINDS[r.kind].batch === 'newest')
    const units = newest ? Math.min(batch.left, batch.newest.taken) : batch.left
    batch.left = 0
    this.#wire.giveBack(batch, units)
  }

  /**
   * Looks at a key that fell due: a batch past its time is ended (its units returned), and a key with no new
   * batch in the `ms` after that is forgotten, so the map holds only keys in use.
   */
  readonly #look = (batch: Batch<P>, now: number): void => {
    if (this.#batch.get(batch.of.id) !== batch) return
    if (batch.inFlight > 0) this.#due.schedule(batch, now + this.ms)
    else if (now < batch.until) this.#due.schedule(batch, batch.until)
    else if (!batch.idle) {
      this.#expire(batch)
      this.#due.schedule(batch, now + this.ms)
    } else this.#batch.delete(batch.of.id)
  }
}

/** Whether the key's units were fetched under these rules (the same plan, or one with the same specs). */
function fetchedUnder<P extends Batchable>(batch: Batch<P>, plan: P): boolean {
  return batch.of.plan === plan || batch.of.plan.id === plan.id
}

function admitted(answer: StoreAnswer): boolean {
  for (const d of answer) if (!d.allowed) return false
  return true
}

/**
 * The key's figures at local time `now`: each rule's remaining with the units this process still holds,
 * its reset counted down from the newest batch. From local units, the answer says `reason: 'prefetch'`.
 */
function answerAt<P extends Batchable>(batch: Batch<P>, now: number, local: boolean): StoreAnswer {
  const { figures, at, countedAt } = batch.newest
  const out = new Array<RuleDecision>(figures.length) as RuleDecision[] & {
    reason?: 'prefetch'
    countedAt?: number
  }
  for (let i = 0; i < figures.length; i++) {
    const d = figures[i]!
    const resetMs = now <= at ? d.resetMs : Math.max(0, Math.ceil(at + d.resetMs - now))
    out[i] = { ...d, remaining: d.remaining + batch.left, resetMs }
  }
  if (local) out.reason = 'prefetch'
  // When the units were counted: a refund naming this call looks for them there. A call spent from units
  // of an older batch not yet spent names the newest batch: a sliding rule's unit refunded from it leaves
  // the window up to `ms` early, within the bound prefetch already states for a sliding window.
  out.countedAt = countedAt
  return out
}
