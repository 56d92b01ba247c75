/**
 * @module concurrency: at most `limit` admitted units leased at once per key. An admitted call takes its
 * `cost` units under a lease until it is released (`limiter.release`) or until `leaseMs` after it was
 * admitted, whichever comes first, so a process that dies with a lease cannot keep its units for ever.
 * Leases end in the order they began (one `leaseMs` per rule), so expired ones are dropped from the front.
 * A denied call's work grows with the live leases, at most `limit` (bounded by `MAX_CONCURRENCY`); admitting,
 * releasing and expiring cost, over time, a bounded amount per lease whatever the number live (a release
 * finds its lease by the number in its id, halving at most 2 × `limit` slots).
 *
 * A lease id is this process's random part, the lease's number in this process, and its units: no call
 * draws random bytes or hashes a string, and ids stay unique across processes and machines (the Redis
 * store keeps them side by side in one sorted set).
 *
 * Over 300 lines: the lease table (append, drop, pack, expire, find a lease by its number) and the lease
 * ids are one data structure, kept beside the one rule that uses it.
 */
import { randomBytes } from 'node:crypto'
import { InvalidOptionError } from '../errors.ts'
import { given, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { ConcurrencyRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, leaseDecision } from './algorithm.ts'
import { countingMaxCost, countingTooCostly, MAX_FIGURE } from './bounds.ts'
import { defineRule } from './define.ts'
import { DURATION, formatDuration, INTEGER, parseDuration } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface ConcurrencyOptions {
  /** Units leased at once: an integer from 1 to 10,000, or -1 for not limited. */
  limit: number
  /**
   * Longest a lease lasts, in ms: an integer from 1 to 2^50. A lease admitted at `t` is live
   * while `now < t + leaseMs`, unless released sooner. Default 60,000.
   */
  leaseMs?: number
  /** Shown in headers and decisions. Default: `"<limit>-concurrent"`. */
  name?: string
}

/** Every call reads the live leases, at most `limit` of them, so `limit` is bounded. */
export const MAX_CONCURRENCY = 10_000

/** A rule holding at most `limit` units at once per key. */
export function concurrency(options: ConcurrencyOptions): ConcurrencyRule | UnlimitedRule {
  const o = ruleOptions('concurrency', options, concurrencyKind.options)
  const limit = limitOption('concurrency.limit', o.limit)
  const leaseMs = integerOption('concurrency.leaseMs', given(o.leaseMs, 60_000), 1, MAX_FIGURE)
  const name = o.name === undefined ? undefined : labelOption('concurrency.name', o.name)
  if (limit === -1) return UNLIMITED
  if (limit > MAX_CONCURRENCY) {
    throw new InvalidOptionError(
      'concurrency.limit',
      limit,
      `an integer from 1 to ${MAX_CONCURRENCY}, or -1 (each call reads the live leases)`,
    )
  }
  // The state identity holds `leaseMs` (the shape: how long each lease is scored to last), not `limit`.
  return defineRule<ConcurrencyRule>(
    { kind: 'concurrency', limit, leaseMs },
    concurrencyKind.identity,
    name,
    `${limit}-concurrent`,
    { policyWindowSeconds: Math.ceil(leaseMs / 1000) },
  )
}

/**
 * The live leases, in the order they began (so in the order they end), in slots `head` to `tail` of two
 * arrays: `ids` and, three to a slot, `figures` (when the lease ends, its units, its number). A lease
 * released before its turn leaves its slot empty (id undefined) until the slots before it are gone or the
 * arrays are packed. The first and last slots between `head` and `tail` always hold a lease.
 * Numbers only, no object per lease: admitting and releasing allocate nothing once the arrays have grown.
 */
export interface ConcurrencyState {
  ids: (string | undefined)[]
  figures: number[]
  head: number
  tail: number
  /** Live leases: the slots from `head` to `tail` with an id. */
  leases: number
  /** Units leased in all. */
  total: number
  /** The end of the newest lease ever admitted: when the state can be forgotten (kept by admit, so no call walks the leases for it). */
  newest: number
  /**
   * Whether the lease numbers rise from `head` to `tail`, so a release may find its lease by halving. True
   * while every lease held was made by this process's `newLease`, in order (the memory store's).
   */
  ordered: boolean
}

/** Figures per slot: when the lease ends, its units, its number. */
const END = 0
const UNITS = 1
const NUMBER = 2
const FIGURES = 3

/** Drops the leases that have ended at `now`: from the front, each lease once. */
function expire(state: ConcurrencyState, now: number): void {
  const { figures } = state
  while (state.head < state.tail && figures[state.head * FIGURES + END]! <= now) drop(state, state.head)
}

/** Ends the lease in `slot` (which holds one), keeping the first and last slots held. */
function drop(state: ConcurrencyState, slot: number): void {
  const { ids, figures } = state
  ids[slot] = undefined
  state.total -= figures[slot * FIGURES + UNITS]!
  if (--state.leases === 0) {
    // Nothing held: the slots start over from the front, in order again.
    state.head = 0
    state.tail = 0
    state.ordered = true
    return
  }
  if (slot === state.head) {
    let head = slot + 1
    while (ids[head] === undefined) head++
    state.head = head
  } else if (slot === state.tail - 1) {
    let tail = slot
    while (ids[tail - 1] === undefined) tail--
    state.tail = tail
  }
}

/**
 * Puts a lease in the slot after the last, first packing the live leases to the front when the arrays
 * are full and at most half of them is live (so a pack moves each lease at most once per growth: amortized
 * constant work, and the arrays hold at most about twice the live leases).
 */
function append(state: ConcurrencyState, id: string, end: number, units: number, number: number): void {
  const { ids, figures } = state
  if (state.tail === ids.length && state.leases * 2 <= ids.length) pack(state)
  const slot = state.tail++
  ids[slot] = id
  const at = slot * FIGURES
  figures[at + END] = end
  figures[at + UNITS] = units
  figures[at + NUMBER] = number
}

/** Moves the held leases to the front slots, in order. */
function pack(state: ConcurrencyState): void {
  const { ids, figures } = state
  let to = 0
  for (let from = state.head; from < state.tail; from++) {
    const id = ids[from]
    if (id === undefined) continue
    if (to !== from) {
      ids[to] = id
      ids[from] = undefined
      figures[to * FIGURES + END] = figures[from * FIGURES + END]!
      figures[to * FIGURES + UNITS] = figures[from * FIGURES + UNITS]!
      figures[to * FIGURES + NUMBER] = figures[from * FIGURES + NUMBER]!
    }
    to++
  }
  state.head = 0
  state.tail = to
}

/** The slot holding `lease`, or -1 when none does. */
function slotOf(state: ConcurrencyState, lease: string): number {
  const { ids, head, tail } = state
  if (head === tail) return -1
  // Leases mostly end in the order they began, or the newest first: both are looked at before any search.
  if (ids[head] === lease) return head
  if (ids[tail - 1] === lease) return tail - 1
  if (!state.ordered) {
    for (let slot = head + 1; slot < tail - 1; slot++) if (ids[slot] === lease) return slot
    return -1
  }
  const number = leaseNumber(lease)
  if (Number.isNaN(number)) return -1
  const { figures } = state
  let low = head + 1
  let high = tail - 2
  while (low <= high) {
    const mid = (low + high) >>> 1
    const at = figures[mid * FIGURES + NUMBER]!
    if (at < number) low = mid + 1
    else if (at > number) high = mid - 1
    else return ids[mid] === lease ? mid : -1
  }
  return -1
}

export const concurrencyAlgorithm: Algorithm<ConcurrencyRule, ConcurrencyState> = {
  mark: 'lease',
  create: () => ({
    ids: [],
    figures: [],
    head: 0,
    tail: 0,
    leases: 0,
    total: 0,
    newest: Number.NEGATIVE_INFINITY,
    ordered: true,
  }),

  decide(state, rule, now, cost) {
    expire(state, now)
    const held = state.total
    if (held + cost <= rule.limit) {
      // The newest lease is this call's, or with cost 0 (another rule denied) the newest held.
      let resetMs = rule.leaseMs
      if (cost === 0) resetMs = newestEnd(state, now) - now
      return leaseDecision(rule, true, rule.limit - held - cost, resetMs, 0)
    }
    // Denied: the call fits once enough of the oldest leases have ended (a release can come sooner).
    const { ids, figures } = state
    let freed = 0
    let retryAt = now
    for (let slot = state.head; slot < state.tail; slot++) {
      if (ids[slot] === undefined) continue
      freed += figures[slot * FIGURES + UNITS]!
      retryAt = figures[slot * FIGURES + END]!
      if (held - freed + cost <= rule.limit) break
    }
    return leaseDecision(
      rule,
      false,
      atLeastZero(rule.limit - held),
      newestEnd(state, now) - now,
      retryAt - now,
    )
  },

  admit(state, rule, now, cost, lease) {
    const id = lease!
    const expires = now + rule.leaseMs
    // The id newLease made last is the one a store admits right after: its number is known without reading it.
    const number = id === lastLease ? lastNumber : leaseNumber(id)
    // An id made elsewhere (no number), or older than the last live one, ends the order until no lease is live.
    if (
      Number.isNaN(number) ||
      (state.leases > 0 && number <= state.figures[(state.tail - 1) * FIGURES + NUMBER]!)
    )
      state.ordered = false
    append(state, id, expires, cost, number)
    state.leases++
    state.total += cost
    if (expires > state.newest) state.newest = expires
  },

  // A released newest lease leaves this later than needed, which is harmless: the state is empty by then.
  expiresAt: (state) => state.newest,

  // A refund does not apply: held units come back by release, not by refund.
  refund() {},
  refundCall() {},

  // A penalty does not hold anything: there is no work to release.
  penalize() {},
}

/** The end of the newest lease held (the last slot), or `now` when none is. */
function newestEnd(state: ConcurrencyState, now: number): number {
  return state.leases === 0 ? now : state.figures[(state.tail - 1) * FIGURES + END]!
}

/**
 * Ends `lease` before its time. Idempotent: an unknown or released lease changes nothing. It reads no
 * clock: a lease that has already ended belongs to nobody, so dropping it now gives back only what the next
 * call would drop anyway.
 */
export function release(state: ConcurrencyState, lease: string): void {
  const slot = slotOf(state, lease)
  if (slot !== -1) drop(state, slot)
}

/**
 * This process's part of every lease id: 16 characters of 96 random bits, drawn when the first lease is
 * made. With the lease's number after it, ids never collide across processes and machines.
 */
let processPart: string | undefined
const PART_LENGTH = 16
/** Leases are made 256 to a block: the block's text (`processPart` and the block number, in hex) is made once. */
let blockText = ''
let blockNumber = 0
let inBlock = 256
/** The last two hex digits of a lease number, alone and followed by `:1` (the usual units): made once. */
const lowDigits: string[] = []
const lowDigitsOne: string[] = []
/** The id `newLease` made last and its number, for `admit` right after. */
let lastLease: string | undefined
let lastNumber = Number.NaN

/**
 * A new lease id for a call of `cost` units: `<process part><number in hex>:<cost>`, unique across
 * processes and machines, ending in `:<cost>` so a store that keeps only ids (Redis: a sorted set of them)
 * knows what each holds. Numbers rise with each lease of this process (from 256: a block's number is at
 * least 1, so its hex digits and the lease's last two are the whole number's); at a million leases a second
 * they stay exact (below 2^53) for 285 years.
 */
export function newLease(cost: number): string {
  if (inBlock === 256) nextBlock()
  const low = inBlock++
  const lease = cost === 1 ? blockText + lowDigitsOne[low]! : `${blockText}${lowDigits[low]!}:${cost}`
  lastLease = lease
  lastNumber = blockNumber * 256 + low
  return lease
}

function nextBlock(): void {
  if (processPart === undefined) {
    processPart = randomBytes(12).toString('base64url')
    for (let low = 0; low < 256; low++) {
      lowDigits.push(low.toString(16).padStart(2, '0'))
      lowDigitsOne.push(`${lowDigits[low]}:1`)
    }
  }
  blockNumber++
  blockText = processPart + blockNumber.toString(16)
  inBlock = 0
}

/** The number in a lease id this process made, or NaN for any other string. */
function leaseNumber(lease: string): number {
  if (processPart === undefined || !lease.startsWith(processPart)) return Number.NaN
  let number = 0
  for (let i = PART_LENGTH; i < lease.length; i++) {
    const c = lease.charCodeAt(i)
    if (c === 58) return i === PART_LENGTH ? Number.NaN : number // ':'
    const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1
    if (digit === -1) return Number.NaN
    number = number * 16 + digit
  }
  return Number.NaN
}

const CONCURRENT = new RegExp(`^(${INTEGER})(?:~(${DURATION}))?$`)

/** concurrency as core knows it: see kind.ts. */
export const concurrencyKind: RuleKindEntry<'concurrency'> = {
  factory: concurrency,
  options: ['limit', 'leaseMs', 'name'],
  identity: ['leaseMs'],
  algorithm: concurrencyAlgorithm as RuleKindEntry<'concurrency'>['algorithm'],
  certainRetry: false,
  decision: leaseDecision,
  text: {
    form: 'concurrency:LIMIT[~LEASE], e.g. concurrency:10~30s',
    read(body) {
      const m = CONCURRENT.exec(body)
      if (m === null) return undefined
      const spec = { limit: Number(m[1]) }
      return m[2] === undefined ? spec : { ...spec, leaseMs: parseDuration(m[2]) }
    },
    write: (rule) => `${rule.limit}${rule.leaseMs === 60_000 ? '' : `~${formatDuration(rule.leaseMs)}`}`,
  },
  maxCost: countingMaxCost,
  tooCostly: countingTooCostly,
  // Refunds do not apply to leases: a call gives its units back by its release.
  refundMark: () => undefined,
}
