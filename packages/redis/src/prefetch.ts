/**
 * @module Prefetch: units a RedisStore takes from Redis ahead of the calls that spend them, so most calls on
 * a busy key are decided in this process, with no round trip.
 *
 * Over 300 lines: a batch's life (lead, join, spend, fetch ahead, return, recount after a reset, expiry)
 * is one piece of bookkeeping whose invariants (the count never exceeded) span all of it.
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
import type { BlockPolicy, Rule, RuleDecision, StoreAnswer } from '@sluice/core'
import { FETCH_SHARE } from './compose.ts'
import type { LocalAnswers, LocalCall } from './local.ts'

/** What the store hands a fetch: its rules under one identity (`id`: their specs joined). */
export interface Batchable {
  readonly id: string
  /** Whether every rule is of a kind whose units can be fetched ahead and returned (compose's `canReturn`). */
  readonly batchable: boolean
}

/** A call waiting for a fetch in flight. */
interface Joiner {
  readonly cost: number
  readonly resolve: (answer: StoreAnswer | Promise<StoreAnswer>) => void
  readonly reject: (error: unknown) => void
  /** The call asked again, from the top, when the fetch brought too few units for it. */
  readonly again: () => StoreAnswer | Promise<StoreAnswer>
}

/** A fetch in flight: the units it asked for, how many of them its leader and joiners will spend. */
export interface Fetch {
  readonly want: number
  promised: number
  readonly joiners: Joiner[]
}

/** One key's prefetched units. */
export interface Batch<P extends Batchable> {
  readonly id: string
  readonly prefix: string
  readonly key: string
  readonly plan: P
  readonly rules: readonly Rule[]
  /** The limiter's block policy, which a fetch ahead sends as the calls do. */
  block: BlockPolicy | undefined
  /** Units counted in Redis and not spent yet, spendable until `until` (local ms). */
  left: number
  /**
   * The key's reset count as the latest reply said ('' before any), and the units spent here since the
   * latest round trip claimed them: sent with the next one, which counts them again in the new state when
   * another process has reset the key meanwhile (so the units a process holds are counted in whatever state
   * the key has, at the latest at its next round trip).
   */
  resets: string
  spent: number
  until: number
  /** The newest batch: when its fetch was sent (local ms), when Redis counted it, and its size. */
  at: number
  countedAt: number
  taken: number
  /** The newest batch's reply: every rule's figures with the whole batch counted; the least remaining. */
  figures: readonly RuleDecision[]
  room: number
  /** Units the next fetch asks for (before Redis cuts it). */
  size: number
  /** Fetches in flight, and the latest of them (the one new calls may join). */
  inFlight: number
  latest: Fetch | undefined
  /** When the sweep next looks at this key, whether it waits in the sweep's queue, whether it is spent. */
  due: number
  queued: boolean
  idle: boolean
}

/** Keys holding units or fetching at once; calls on further keys go to Redis one by one. */
const MAX_KEYS = 10_000

export class Prefetch<P extends Batchable> implements LocalAnswers<P> {
  readonly units: number
  readonly ms: number
  readonly #clock: () => number
  readonly #fetchAhead: (batch: Batch<P>, ask: Fetch) => void
  readonly #returnBatch: (batch: Batch<P>, units: number) => void
  readonly #recount: (batch: Batch<P>, units: number) => void
  /** Asks the store again, from the top, for a call whose joined fetch brought too few units. */
  readonly #retry: (call: LocalCall<P>) => StoreAnswer | Promise<StoreAnswer>
  readonly #batch = new Map<string, Batch<P>>()
  /** Keys in the order they fall due (nearly: a batch cut short by its fixed window falls due earlier). */
  #queue: Batch<P>[] = []
  #head = 0
  #timer: NodeJS.Timeout | undefined
  /**
   * Set by `close()`: no batch is started from then on, but the calls already waiting on a fetch still
   * spend what it brings for them (`arrived`): their units were counted for them.
   */
  #closed = false

  constructor(
    units: number,
    ms: number,
    clock: () => number,
    fetchAhead: (batch: Batch<P>, ask: Fetch) => void,
    returnBatch: (batch: Batch<P>, units: number) => void,
    recount: (batch: Batch<P>, units: number) => void,
    retry: (call: LocalCall<P>) => StoreAnswer | Promise<StoreAnswer>,
  ) {
    this.units = units
    this.ms = ms
    this.#clock = clock
    this.#fetchAhead = fetchAhead
    this.#returnBatch = returnBatch
    this.#recount = recount
    this.#retry = retry
  }

  /** The call spent from the key's units, or joined to the fetch on its way when that covers it. */
  answer(call: LocalCall<P>): StoreAnswer | Promise<StoreAnswer> | undefined {
    if (!call.plan.batchable) return undefined
    const batch = this.#batch.get(call.id)
    if (batch === undefined || !fetchedUnder(batch, call.plan)) return undefined
    return this.spend(batch, call.cost, call.now) ?? this.join(batch, call.cost, () => this.#retry(call))
  }

  get(id: string): Batch<P> | undefined {
    return this.#batch.get(id)
  }

  /** Whether this process holds units for the key. */
  holds(id: string): boolean {
    const batch = this.#batch.get(id)
    return batch !== undefined && batch.left > 0
  }

  /** Spends `cost` of the key's units at local time `now`: the answer, or undefined when there are too few. */
  spend(batch: Batch<P>, cost: number, now: number): StoreAnswer | undefined {
    if (batch.left < cost || now >= batch.until) return undefined
    batch.left -= cost
    batch.spent += cost
    const answer = answerAt(batch, now, true)
    // Half the newest batch spent, nothing on its way, and room for Redis to give 2 units or more: the next
    // batch is fetched now, twice as big (not once closing).
    if (
      batch.inFlight === 0 &&
      batch.left * 2 < batch.taken &&
      batch.room >= 2 * FETCH_SHARE &&
      !this.#closed
    ) {
      if (batch.size < this.units) batch.size = Math.min(this.units, batch.size * 2)
      const ask: Fetch = { want: batch.size, promised: 0, joiners: [] }
      batch.inFlight++
      batch.latest = ask
      this.#fetchAhead(batch, ask)
    }
    return answer
  }

  /** The units spent since the latest round trip, which the round trip being sent now takes with it. */
  claim(batch: Batch<P>): number {
    const spent = batch.spent
    batch.spent = 0
    return spent
  }

  /** Units a round trip claimed but never delivered (it failed): the next one takes them. */
  unclaim(batch: Batch<P>, spent: number): void {
    batch.spent += spent
  }

  /** Has the call wait for the key's latest fetch when that covers it; undefined when it does not. */
  join(
    batch: Batch<P>,
    cost: number,
    again: () => StoreAnswer | Promise<StoreAnswer>,
  ): Promise<StoreAnswer> | undefined {
    const fetch = batch.latest
    if (fetch === undefined || fetch.want - fetch.promised < cost) return undefined
    fetch.promised += cost
    return new Promise<StoreAnswer>((resolve, reject) => {
      fetch.joiners.push({ cost, resolve, reject, again })
    })
  }

  /**
   * Starts a fetch for the call: the key's state (made when new) and the fetch, or undefined when the
   * call must go to Redis on its own (too many keys with batches, or units fetched under other rules still on the
   * way). Units the key holds under other rules, or past their time, are returned first.
   */
  lead(
    id: string,
    prefix: string,
    key: string,
    plan: P,
    rules: readonly Rule[],
    cost: number,
    block: BlockPolicy | undefined,
    now: number,
  ): [Batch<P>, Fetch] | undefined {
    if (this.#closed) return undefined
    let batch = this.#batch.get(id)
    if (batch !== undefined && !fetchedUnder(batch, plan)) {
      if (batch.inFlight > 0) return undefined
      this.drop(id)
      batch = undefined
    }
    if (batch === undefined) {
      if (this.#batch.size >= MAX_KEYS) return undefined
      batch = {
        id,
        prefix,
        key,
        plan,
        rules,
        block,
        left: 0,
        resets: '',
        spent: 0,
        until: 0,
        at: 0,
        countedAt: 0,
        taken: 0,
        figures: [],
        room: 0,
        size: 1,
        inFlight: 0,
        latest: undefined,
        due: 0,
        queued: false,
        idle: false,
      }
      this.#batch.set(id, batch)
    } else if (now < batch.until) {
      // The units ran out in time: demand outgrew the batch.
      if (batch.size < this.units) batch.size = Math.min(this.units, batch.size * 2)
    } else this.#expire(batch)
    batch.block = block
    const fetch: Fetch = { want: Math.max(cost, batch.size), promised: cost, joiners: [] }
    batch.inFlight++
    batch.latest = fetch
    return [batch, fetch]
  }

  /**
   * A fetch's reply, read by the store: `answer` is what Redis decided for the batch of `taken` units
   * (the leader's `cost` among them), sent at local time `at` and counted at Redis ms `countedAt`. Keeps the
   * units the leader does not spend and returns the leader's answer, its figures counting those units as
   * not yet spent.
   */
  fetched(
    batch: Batch<P>,
    answer: StoreAnswer,
    taken: number,
    cost: number,
    at: number,
    countedAt: number,
    seen: string,
    resets: string,
  ): StoreAnswer {
    if (seen !== '' && resets !== seen) {
      // Another process reset the key: the batch's units left were counted in the state it removed, so they are
      // dropped (not returned), and those spent since the fetch was sent are counted in the new state.
      batch.left = 0
      const since = this.claim(batch)
      if (since > 0) this.#recount(batch, since)
    }
    batch.resets = resets
    if (answer.reason !== undefined || !admitted(answer)) return answer
    const now = this.#clock()
    if (batch.left > 0 && now >= batch.until) this.#expire(batch)
    let until = at + this.ms
    // A fixed window's units never outlive the window they were counted in.
    for (let i = 0; i < answer.length; i++) {
      if (batch.rules[i]!.kind === 'fixedWindow') until = Math.min(until, at + answer[i]!.resetMs)
    }
    // Even a batch the leader spent whole sets a time: a call that finds no units before it grows the next.
    if (batch.left === 0 || until < batch.until) batch.until = until
    batch.left += taken - cost
    batch.at = at
    batch.countedAt = countedAt
    batch.taken = taken
    batch.figures = answer
    let room = Number.POSITIVE_INFINITY
    for (const d of answer) if (d.remaining < room) room = d.remaining
    batch.room = room
    batch.idle = false
    const leader = answerAt(batch, at, false)
    // Units fetched for a key this process has since let go of (a block, other rules) go straight back; once
    // closing, after the fetch's joiners have spent theirs (`arrived`).
    if (this.#batch.get(batch.id) !== batch) {
      if (batch.left > 0 && !this.#closed) this.#return(batch)
    } else this.#schedule(batch, batch.until)
    return leader
  }

  /**
   * The fetch has settled: its joiners spend the units it brought, or ask again when too few are left. A
   * batch let go of (a block, other rules) gives its joiners nothing, but one let go of by `close()` does:
   * they were waiting for units counted for them, and what they leave goes back.
   */
  arrived(batch: Batch<P>, fetch: Fetch): void {
    this.#settle(batch, fetch)
    const now = this.#clock()
    const current = this.#batch.get(batch.id) === batch
    for (const joiner of fetch.joiners) {
      const local = current || this.#closed ? this.spend(batch, joiner.cost, now) : undefined
      if (local !== undefined) joiner.resolve(local)
      else joiner.resolve(retry(joiner))
    }
    if (!current && batch.left > 0) this.#return(batch)
  }

  /** The fetch failed: its joiners fail with it (each one's limiter then applies its `onStoreError`). */
  failed(batch: Batch<P>, fetch: Fetch, error: unknown): void {
    this.#settle(batch, fetch)
    for (const joiner of fetch.joiners) joiner.reject(error)
  }

  #settle(batch: Batch<P>, fetch: Fetch): void {
    batch.inFlight--
    if (batch.latest === fetch) batch.latest = undefined
    if (batch.inFlight === 0) this.#schedule(batch, Math.max(batch.until, this.#clock()))
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
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue = []
    this.#head = 0
  }

  /** Ends the key's batch: unspent units go back, and the next batch is the size of what was spent. */
  #expire(batch: Batch<P>): void {
    if (batch.left > 0) {
      batch.size = Math.max(1, Math.min(batch.size, batch.taken - batch.left))
      this.#return(batch)
    }
    batch.idle = true
  }

  /**
   * Returns the key's units. A sliding rule takes them back only where the newest batch was counted
   * (at `countedAt`), so at most that batch goes back and older units stay counted; the other rules take
   * every one back.
   */
  #return(batch: Batch<P>): void {
    const sliding = batch.rules.some((r) => r.kind === 'slidingLog' || r.kind === 'slidingWindow')
    const units = sliding ? Math.min(batch.left, batch.taken) : batch.left
    batch.left = 0
    this.#returnBatch(batch, units)
  }

  #schedule(batch: Batch<P>, due: number): void {
    batch.due = due
    if (batch.queued) return
    batch.queued = true
    this.#queue.push(batch)
    if (this.#timer === undefined) this.#arm()
  }

  #arm(): void {
    const next = this.#queue[this.#head]
    if (next === undefined) return
    const wait = Math.max(1, Math.ceil(next.due - this.#clock()))
    this.#timer = setTimeout(this.#sweep, wait)
    this.#timer.unref()
  }

  /**
   * Looks at the keys that fell due: a key's batch past its time is ended (its units returned), and a
   * key with no new batch in the `ms` after that is forgotten, so the map holds only keys in use.
   */
  readonly #sweep = (): void => {
    this.#timer = undefined
    const now = this.#clock()
    while (this.#head < this.#queue.length) {
      const batch = this.#queue[this.#head]!
      if (batch.due > now) break
      this.#head++
      batch.queued = false
      if (this.#batch.get(batch.id) !== batch) continue
      if (batch.inFlight > 0) this.#schedule(batch, now + this.ms)
      else if (now < batch.until) this.#schedule(batch, batch.until)
      else if (!batch.idle) {
        this.#expire(batch)
        this.#schedule(batch, now + this.ms)
      } else this.#batch.delete(batch.id)
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head)
      this.#head = 0
    }
    this.#arm()
  }
}

/** Whether the key's units were fetched under these rules (the same plan, or one with the same specs). */
export function fetchedUnder<P extends Batchable>(batch: Batch<P>, plan: P): boolean {
  return batch.plan === plan || batch.plan.id === plan.id
}

function admitted(answer: StoreAnswer): boolean {
  for (const d of answer) if (!d.allowed) return false
  return true
}

function retry(joiner: Joiner): StoreAnswer | Promise<StoreAnswer> {
  try {
    return joiner.again()
  } catch (error) {
    return Promise.reject(error)
  }
}

/**
 * The key's figures at local time `now`: each rule's remaining with the units this process still holds,
 * its reset counted down from the newest batch. From local units, the answer says `reason: 'prefetch'`.
 */
function answerAt<P extends Batchable>(batch: Batch<P>, now: number, local: boolean): StoreAnswer {
  const figures = batch.figures
  const out = new Array<RuleDecision>(figures.length) as RuleDecision[] & {
    reason?: 'prefetch'
    countedAt?: number
  }
  for (let i = 0; i < figures.length; i++) {
    const d = figures[i]!
    const resetMs = now <= batch.at ? d.resetMs : Math.max(0, Math.ceil(batch.at + d.resetMs - now))
    out[i] = { ...d, remaining: d.remaining + batch.left, resetMs }
  }
  if (local) out.reason = 'prefetch'
  // When the units were counted: a refund naming this call looks for them there. A call spent from units
  // of an older batch not yet spent names the newest batch: a sliding rule's unit refunded from it leaves
  // the window up to `ms` early, within the bound prefetch already states for a sliding window.
  out.countedAt = batch.countedAt
  return out
}
