/**
 * @module concurrency: at most `limit` admitted units held at once per key. An admitted call holds its
 * `cost` units under a lease until it is released (`limiter.release`) or until `leaseMs` after it was
 * admitted, whichever comes first, so a process that dies holding units cannot hold them for ever.
 * Leases end in the order they began (one `leaseMs` per rule), so expired ones are dropped from the front.
 * Work per call grows with the leases held, at most `limit` (bounded by `MAX_CONCURRENCY`).
 *
 * A lease id is this process's random part, the lease's number in this process, and its units: no call
 * draws random bytes, and ids stay unique across processes and machines (the Redis store keeps them side
 * by side in one sorted set).
 */
import { randomBytes } from 'node:crypto'
import { InvalidOptionError } from '../errors.ts'
import { given, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { ConcurrencyRule, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, ruleDecision } from './algorithm.ts'
import { MAX_FIGURE } from './bounds.ts'
import { defineRule } from './define.ts'
import { UNLIMITED } from './unlimited.ts'

export interface ConcurrencyOptions {
  /** Units held at once: an integer from 1 to 10,000, or -1 for not limited. */
  limit: number
  /**
   * Longest a lease holds its units, in ms: an integer from 1 to 2^50. A lease admitted at `t` is held
   * while `now < t + leaseMs`, unless released sooner. Default 60,000.
   */
  leaseMs?: number
  /** Shown in headers and decisions. Default: `"<limit>-concurrent"`. */
  name?: string
}

/** Every call reads the leases held, at most `limit` of them, so `limit` is bounded. */
export const MAX_CONCURRENCY = 10_000

/** A rule holding at most `limit` units at once per key. */
export function concurrency(options: ConcurrencyOptions): ConcurrencyRule | UnlimitedRule {
  const o = ruleOptions('concurrency', options, ['limit', 'leaseMs', 'name'])
  const limit = limitOption('concurrency.limit', o.limit)
  const leaseMs = integerOption('concurrency.leaseMs', given(o.leaseMs, 60_000), 1, MAX_FIGURE)
  const name = o.name === undefined ? undefined : labelOption('concurrency.name', o.name)
  if (limit === -1) return UNLIMITED
  if (limit > MAX_CONCURRENCY) {
    throw new InvalidOptionError(
      'concurrency.limit',
      limit,
      `an integer from 1 to ${MAX_CONCURRENCY}, or -1 (each call reads the leases held)`,
    )
  }
  // The state identity holds `leaseMs` (the shape: how long each lease is scored to last), not `limit`.
  return defineRule<ConcurrencyRule>(
    { kind: 'concurrency', limit, leaseMs },
    [leaseMs],
    name,
    `${limit}-concurrent`,
    { policyWindowSeconds: Math.ceil(leaseMs / 1000) },
  )
}

/** One lease: when it ends and the units it holds. */
interface Lease {
  expires: number
  cost: number
}

/**
 * The leases held, by id, in the order they began (so in the order they end: a Map keeps insertion
 * order), and the units they hold in all.
 */
export interface ConcurrencyState {
  leases: Map<string, Lease>
  total: number
  /** The end of the newest lease ever admitted: when the state can be forgotten (kept by admit, so no call walks the leases for it). */
  newest: number
}

/** Drops the leases that have ended at `now`: from the front, each lease once. */
function expire(state: ConcurrencyState, now: number): void {
  for (const [id, lease] of state.leases) {
    if (lease.expires > now) return
    state.leases.delete(id)
    state.total -= lease.cost
  }
}

/** The end of the newest lease, or -Infinity when none is held. */
function newestEnd(state: ConcurrencyState): number {
  let end = Number.NEGATIVE_INFINITY
  // The newest is the last; a Map has no last, and leases are few (at most `limit`).
  for (const lease of state.leases.values()) end = lease.expires
  return end
}

export const concurrencyAlgorithm: Algorithm<ConcurrencyRule, ConcurrencyState> = {
  create: () => ({ leases: new Map(), total: 0, newest: Number.NEGATIVE_INFINITY }),

  decide(state, rule, now, cost) {
    expire(state, now)
    const held = state.total
    if (held + cost <= rule.limit) {
      // The newest lease is this call's, or with cost 0 (another rule denied) the newest held.
      let resetMs = rule.leaseMs
      if (cost === 0) {
        const newest = newestEnd(state)
        resetMs = newest === Number.NEGATIVE_INFINITY ? 0 : newest - now
      }
      return ruleDecision(rule, true, rule.limit - held - cost, resetMs, 0, 0)
    }
    // Denied: the call fits once enough of the oldest leases have ended (a release can come sooner).
    let freed = 0
    let retryAt = now
    for (const lease of state.leases.values()) {
      freed += lease.cost
      retryAt = lease.expires
      if (held - freed + cost <= rule.limit) break
    }
    return ruleDecision(rule, false, atLeastZero(rule.limit - held), newestEnd(state) - now, retryAt - now, 0)
  },

  admit(state, rule, now, cost, lease) {
    const expires = now + rule.leaseMs
    state.leases.set(lease!, { expires, cost })
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

/** Ends `lease` before its time. Idempotent: an unknown or ended lease changes nothing. */
export function release(state: ConcurrencyState, now: number, lease: string): void {
  const held = state.leases.get(lease)
  if (held === undefined || held.expires <= now) return
  state.leases.delete(lease)
  state.total -= held.cost
}

/**
 * This process's part of every lease id: 16 characters of 96 random bits, drawn when the first lease is
 * made. With the lease's number after it, ids never collide across processes and machines.
 */
let processPart: string | undefined
/** Leases are made 256 to a block: the block's text (`processPart` and the block number, in hex) is made once. */
let blockText = ''
let blockNumber = 0
let inBlock = 256
/** The last two hex digits of a lease number, alone and followed by `:1` (the usual units): made once. */
const lowDigits: string[] = []
const lowDigitsOne: string[] = []

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
  return cost === 1 ? blockText + lowDigitsOne[low]! : `${blockText}${lowDigits[low]!}:${cost}`
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
