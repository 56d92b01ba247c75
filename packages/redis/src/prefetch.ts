/**
 * @module Prefetch: units a RedisStore takes from Redis ahead of the calls that spend them, so most calls on
 * a busy key are decided in this process, with no round trip.
 *
 * A call that finds no units for its key leads a fetch: one script call that counts a batch of units on
 * every rule, atomically, as that many admitted calls would (src/compose.ts, act `fetch`). Calls that come
 * while it is in flight join it as long as the batch it asked for covers them; the rest lead fetches of
 * their own. The units a reply brings are spent locally, by the leader, its joiners, then any call on the
 * key, for at most `ms` from when the fetch was sent; units left then are given back to Redis. Once a batch is
 * half spent, the next one is fetched ahead, so the calls of a busy key seldom find none.
 *
 * A batch's size follows the key's demand: it starts at 1, doubles (up to `units`) each time the units ran
 * out before their time was up, and falls to what was spent when they did not. Redis cuts it further:
 * never more than `1 / FETCH_SHARE` of what any rule has left, so near the limit every call is a round trip
 * and decisions are exact there.
 */
import type { BlockPolicy, Rule, RuleDecision, StoreAnswer } from '@sluice/core'
import { FETCH_SHARE } from './compose.ts'

/** What the store hands a fetch: its rules under one identity (`id`: their specs joined). */
export interface Batchable {
  readonly id: string
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
export interface Held<P extends Batchable> {
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

export class Prefetch<P extends Batchable> {
  readonly units: number
  readonly ms: number
  readonly #clock: () => number
  readonly #fetchAhead: (held: Held<P>, batch: Fetch) => void
  readonly #giveBack: (held: Held<P>, units: number) => void
  readonly #recount: (held: Held<P>, units: number) => void
  readonly #held = new Map<string, Held<P>>()
  /** Keys in the order they fall due (nearly: a batch cut short by its fixed window falls due earlier). */
  #queue: Held<P>[] = []
  #head = 0
  #timer: NodeJS.Timeout | undefined

  constructor(
    units: number,
    ms: number,
    clock: () => number,
    fetchAhead: (held: Held<P>, batch: Fetch) => void,
    giveBack: (held: Held<P>, units: number) => void,
    recount: (held: Held<P>, units: number) => void,
  ) {
    this.units = units
    this.ms = ms
    this.#clock = clock
    this.#fetchAhead = fetchAhead
    this.#giveBack = giveBack
    this.#recount = recount
  }

  get(id: string): Held<P> | undefined {
    return this.#held.get(id)
  }

  /** Whether this process holds units for the key. */
  holds(id: string): boolean {
    const held = this.#held.get(id)
    return held !== undefined && held.left > 0
  }

  /** Spends `cost` of the key's units at local time `now`: the answer, or undefined when there are too few. */
  spend(held: Held<P>, cost: number, now: number): StoreAnswer | undefined {
    if (held.left < cost || now >= held.until) return undefined
    held.left -= cost
    held.spent += cost
    const answer = answerAt(held, now, true)
    // Half the newest batch spent, nothing on its way, and room for Redis to give 2 units or more: the next
    // batch is fetched now, twice as big.
    if (held.inFlight === 0 && held.left * 2 < held.taken && held.room >= 2 * FETCH_SHARE) {
      if (held.size < this.units) held.size = Math.min(this.units, held.size * 2)
      const batch: Fetch = { want: held.size, promised: 0, joiners: [] }
      held.inFlight++
      held.latest = batch
      this.#fetchAhead(held, batch)
    }
    return answer
  }

  /** The units spent since the latest round trip, which the round trip being sent now takes with it. */
  claim(held: Held<P>): number {
    const spent = held.spent
    held.spent = 0
    return spent
  }

  /** Units a round trip claimed but never delivered (it failed): the next one takes them. */
  unclaim(held: Held<P>, spent: number): void {
    held.spent += spent
  }

  /** Has the call wait for the key's latest fetch when that covers it; undefined when it does not. */
  join(
    held: Held<P>,
    cost: number,
    again: () => StoreAnswer | Promise<StoreAnswer>,
  ): Promise<StoreAnswer> | undefined {
    const fetch = held.latest
    if (fetch === undefined || fetch.want - fetch.promised < cost) return undefined
    fetch.promised += cost
    return new Promise<StoreAnswer>((resolve, reject) => {
      fetch.joiners.push({ cost, resolve, reject, again })
    })
  }

  /**
   * Starts a fetch for the call: the key's state (made when new) and the fetch, or undefined when the
   * call must go to Redis on its own (too many keys held, or units fetched under other rules still on the
   * way). Units the key holds under other rules, or past their time, are given back first.
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
  ): [Held<P>, Fetch] | undefined {
    let held = this.#held.get(id)
    if (held !== undefined && !fetchedUnder(held, plan)) {
      if (held.inFlight > 0) return undefined
      this.drop(id)
      held = undefined
    }
    if (held === undefined) {
      if (this.#held.size >= MAX_KEYS) return undefined
      held = {
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
      this.#held.set(id, held)
    } else if (now < held.until) {
      // The units ran out in time: demand outgrew the batch.
      if (held.size < this.units) held.size = Math.min(this.units, held.size * 2)
    } else this.#expire(held)
    held.block = block
    const fetch: Fetch = { want: Math.max(cost, held.size), promised: cost, joiners: [] }
    held.inFlight++
    held.latest = fetch
    return [held, fetch]
  }

  /**
   * A fetch's reply, read by the store: `answer` is what Redis decided for the batch of `taken` units
   * (the leader's `cost` among them), sent at local time `at` and counted at Redis ms `countedAt`. Keeps the
   * units the leader does not spend and returns the leader's answer, its figures counting those units as
   * not yet spent.
   */
  fetched(
    held: Held<P>,
    answer: StoreAnswer,
    taken: number,
    cost: number,
    at: number,
    countedAt: number,
    seen: string,
    resets: string,
  ): StoreAnswer {
    if (seen !== '' && resets !== seen) {
      // Another process reset the key: the units held were counted in the state it removed, so they are
      // dropped (not given back), and those spent since the fetch was sent are counted in the new state.
      held.left = 0
      const since = this.claim(held)
      if (since > 0) this.#recount(held, since)
    }
    held.resets = resets
    if (answer.reason !== undefined || !admitted(answer)) return answer
    const now = this.#clock()
    if (held.left > 0 && now >= held.until) this.#expire(held)
    let until = at + this.ms
    // A fixed window's units never outlive the window they were counted in.
    for (let i = 0; i < answer.length; i++) {
      if (held.rules[i]!.kind === 'fixedWindow') until = Math.min(until, at + answer[i]!.resetMs)
    }
    // Even a batch the leader spent whole sets a time: a call that finds no units before it grows the next.
    if (held.left === 0 || until < held.until) held.until = until
    held.left += taken - cost
    held.at = at
    held.countedAt = countedAt
    held.taken = taken
    held.figures = answer
    let room = Number.POSITIVE_INFINITY
    for (const d of answer) if (d.remaining < room) room = d.remaining
    held.room = room
    held.idle = false
    const leader = answerAt(held, at, false)
    // Units fetched for a key this process has since let go of (a block, other rules) go straight back.
    if (this.#held.get(held.id) !== held) {
      if (held.left > 0) this.#return(held)
    } else this.#schedule(held, held.until)
    return leader
  }

  /** The fetch has settled: its joiners spend the units it brought, or ask again when too few are left. */
  arrived(held: Held<P>, fetch: Fetch): void {
    this.#settle(held, fetch)
    const now = this.#clock()
    const current = this.#held.get(held.id) === held
    for (const joiner of fetch.joiners) {
      const local = current ? this.spend(held, joiner.cost, now) : undefined
      if (local !== undefined) joiner.resolve(local)
      else joiner.resolve(retry(joiner))
    }
  }

  /** The fetch failed: its joiners fail with it (each one's limiter then applies its `onStoreError`). */
  failed(held: Held<P>, fetch: Fetch, error: unknown): void {
    this.#settle(held, fetch)
    for (const joiner of fetch.joiners) joiner.reject(error)
  }

  #settle(held: Held<P>, fetch: Fetch): void {
    held.inFlight--
    if (held.latest === fetch) held.latest = undefined
    if (held.inFlight === 0) this.#schedule(held, Math.max(held.until, this.#clock()))
  }

  /** Forgets the key, giving its units back (a known block, other rules, the store closing). */
  drop(id: string): void {
    const held = this.#held.get(id)
    if (held === undefined) return
    this.#held.delete(id)
    if (held.left > 0) this.#return(held)
  }

  /** Forgets the key without giving anything back: a reset removed what its units were counted in. */
  forget(id: string): void {
    this.#held.delete(id)
  }

  /** Gives every key's units back and stops the sweep. */
  close(): void {
    for (const id of [...this.#held.keys()]) this.drop(id)
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue = []
    this.#head = 0
  }

  /** Ends the key's batch: unspent units go back, and the next batch is the size of what was spent. */
  #expire(held: Held<P>): void {
    if (held.left > 0) {
      held.size = Math.max(1, Math.min(held.size, held.taken - held.left))
      this.#return(held)
    }
    held.idle = true
  }

  /**
   * Gives the key's units back. A sliding rule takes them back only where the newest batch was counted
   * (at `countedAt`), so at most that batch goes back and older units stay counted; the other rules take
   * every one back.
   */
  #return(held: Held<P>): void {
    const sliding = held.rules.some((r) => r.kind === 'slidingLog' || r.kind === 'slidingWindow')
    const units = sliding ? Math.min(held.left, held.taken) : held.left
    held.left = 0
    this.#giveBack(held, units)
  }

  #schedule(held: Held<P>, due: number): void {
    held.due = due
    if (held.queued) return
    held.queued = true
    this.#queue.push(held)
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
   * Looks at the keys that fell due: a key's batch past its time is ended (its units given back), and a
   * key with no new batch in the `ms` after that is forgotten, so the map holds only keys in use.
   */
  readonly #sweep = (): void => {
    this.#timer = undefined
    const now = this.#clock()
    while (this.#head < this.#queue.length) {
      const held = this.#queue[this.#head]!
      if (held.due > now) break
      this.#head++
      held.queued = false
      if (this.#held.get(held.id) !== held) continue
      if (held.inFlight > 0) this.#schedule(held, now + this.ms)
      else if (now < held.until) this.#schedule(held, held.until)
      else if (!held.idle) {
        this.#expire(held)
        this.#schedule(held, now + this.ms)
      } else this.#held.delete(held.id)
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head)
      this.#head = 0
    }
    this.#arm()
  }
}

/** Whether the key's units were fetched under these rules (the same plan, or one with the same specs). */
export function fetchedUnder<P extends Batchable>(held: Held<P>, plan: P): boolean {
  return held.plan === plan || held.plan.id === plan.id
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
function answerAt<P extends Batchable>(held: Held<P>, now: number, local: boolean): StoreAnswer {
  const figures = held.figures
  const out = new Array<RuleDecision>(figures.length) as RuleDecision[] & {
    reason?: 'prefetch'
    countedAt?: number
  }
  for (let i = 0; i < figures.length; i++) {
    const d = figures[i]!
    const resetMs = now <= held.at ? d.resetMs : Math.max(0, Math.ceil(held.at + d.resetMs - now))
    out[i] = { ...d, remaining: d.remaining + held.left, resetMs }
  }
  if (local) out.reason = 'prefetch'
  // When the units were counted: a refund naming this call looks for them there. A call spent from units
  // of an older batch still held names the newest batch: a sliding rule's unit refunded from it leaves
  // the window up to `ms` early, within the bound prefetch already states for a sliding window.
  Object.defineProperty(out, 'countedAt', { value: held.countedAt })
  return out
}
