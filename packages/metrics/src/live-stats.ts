/**
 * @module `liveStats`: per limiter, allowed / queued / denied / shadow counts per second over the last
 * minutes, and the most denied keys, in memory that no traffic can grow.
 *
 * Counts live in a ring of one-second slots: slot `second % seconds`, stamped with
 * the second it holds. A slot found holding an older second is reset on the spot, so however far time
 * jumps, recording is O(1) and nothing ever loops over elapsed time. The most denied keys come from a
 * Space-Saving sketch (Metwally et al.) with a fixed number of counters: a flood of distinct keys only
 * recycles counters. Sketches come in a two-slot ring of `seconds`-long periods, so `topDenied` is recent
 * (the current and the previous period), not since the process started.
 *
 * Over 300 lines: the ring of seconds and the sketch of the most denied keys are the two structures one
 * recorder writes and one snapshot reads; each is small.
 */

import type { DecisionMessage, HttpMessage } from '@sluice/core'
import { InvalidOptionError } from '@sluice/core'
import { integerOption, readOptions } from '@sluice/core/options'
import { boundedKey, STATS_BOUNDS } from './bounds.ts'
import { CHANNELS, resultOf, wasShed } from './messages.ts'
import { subscribe } from './shared.ts'

export interface LiveStatsOptions {
  /** Seconds of history per limiter, and the length of a `topDenied` period. Integer 1 to 3600. Default 300. */
  seconds?: number
  /**
   * Most denied keys reported per limiter. Integer 0 (none tracked) to 1000, and `maxLimiters × topKeys` at
   * most 4000. Default 20. Keys longer than 128 characters are recorded cut, ending in `…`.
   */
  topKeys?: number
  /**
   * Limiters tracked at once. Integer 1 to 1000, and `seconds × maxLimiters` at most 36,000 (what one
   * process may publish). Default 100, or fewer where `seconds` or `topKeys` needs it (40 at 900 s). A
   * limiter with nothing recorded for `seconds` seconds is forgotten; past the bound, new limiters are not
   * tracked until one is.
   */
  maxLimiters?: number
  /** Milliseconds since the epoch. Default `Date.now`. */
  clock?: () => number
}

/** One second of one limiter. `t` is in whole seconds since the epoch. */
export interface SecondCounts {
  t: number
  /** Consumes admitted at once. */
  allowed: number
  /** Consumes admitted after a wait (leakyBucket). */
  queued: number
  /** Consumes denied, whatever denied them (rules, cache, block, `onStoreError: 'deny'`), and requests an `overload` guard shed. */
  denied: number
  /** Requests a shadowed limit let through although its rules denied them (also counted in `denied`). */
  shadow: number
}

export interface DeniedKey {
  key: string
  /** Denials counted (an upper bound once more distinct keys were denied than the sketch holds). */
  count: number
}

export interface LimiterStats {
  /** Every second of the last `seconds`, oldest first, empty ones included. */
  series: SecondCounts[]
  /** At most `topKeys`, most denied first (ties by key). */
  topDenied: DeniedKey[]
}

/** Plain JSON. */
export interface LiveStatsSnapshot {
  /** The clock's time of the snapshot, in ms. */
  at: number
  seconds: number
  /** By limiter prefix; an object without a prototype, so any prefix (`__proto__` too) is an own property. */
  limiters: Record<string, LimiterStats>
}

export interface LiveStats {
  /** The statistics now. Limiters with nothing recorded in the last `seconds` seconds are left out. */
  snapshot(): LiveStatsSnapshot
  /** Unsubscribes; the statistics stop changing. Calling it again does nothing. */
  close(): void
}

const OPTION_NAMES = ['seconds', 'topKeys', 'maxLimiters', 'clock'] as const

interface LiveStatsConfig {
  readonly seconds: number
  readonly topKeys: number
  readonly maxLimiters: number
  readonly clock: () => number
}

/** Public options to config: unknown names and invalid values throw `InvalidOptionError`. */
export function liveStatsConfig(options: LiveStatsOptions = {}): LiveStatsConfig {
  const given = readOptions<LiveStatsOptions>('liveStats', options, OPTION_NAMES)
  const clock = given.clock ?? Date.now
  if (typeof clock !== 'function') throw new InvalidOptionError('liveStats.clock', clock, 'a function')
  const seconds = integerOption('liveStats.seconds', given.seconds ?? 300, 1, 3600)
  const topKeys = integerOption('liveStats.topKeys', given.topKeys ?? 20, 0, 1000)
  // What one snapshot may hold (see bounds.ts): a default fits it; a value given past it is refused.
  const fits = Math.min(
    STATS_BOUNDS.limiters,
    Math.floor(STATS_BOUNDS.points / seconds),
    topKeys === 0 ? STATS_BOUNDS.limiters : Math.floor(STATS_BOUNDS.deniedKeys / topKeys),
  )
  const maxLimiters = integerOption(
    'liveStats.maxLimiters',
    given.maxLimiters ?? Math.min(100, fits),
    1,
    STATS_BOUNDS.limiters,
  )
  if (seconds * maxLimiters > STATS_BOUNDS.points) {
    throw new InvalidOptionError(
      'liveStats.maxLimiters',
      maxLimiters,
      `at most ${fits} with seconds ${seconds}: seconds × maxLimiters is at most ${STATS_BOUNDS.points}, the points one process may publish`,
    )
  }
  if (maxLimiters * topKeys > STATS_BOUNDS.deniedKeys) {
    throw new InvalidOptionError(
      'liveStats.topKeys',
      topKeys,
      `at most ${Math.floor(STATS_BOUNDS.deniedKeys / maxLimiters)} with maxLimiters ${maxLimiters}: maxLimiters × topKeys is at most ${STATS_BOUNDS.deniedKeys}, the denied keys one process may publish`,
    )
  }
  return { seconds, topKeys, maxLimiters, clock }
}

/** Counters a denied-key sketch holds per wanted key: enough that the top `topKeys` are found reliably. */
export const SKETCH_FACTOR = 4

/**
 * Subscribes to `sluice:decision` (consumes: allowed, queued, denied, and the denied keys) and `sluice:http`
 * (shadow) and keeps live per-second statistics per limiter. Memory is bounded by `maxLimiters` ×
 * (`seconds` slots + 2 × 4 × `topKeys` keys of at most 128 characters), whatever the traffic, and a
 * snapshot by what one process may publish (`STATS_BOUNDS`).
 */
export function liveStats(options: LiveStatsOptions = {}): LiveStats {
  const config = liveStatsConfig(options)
  const recorder = new Recorder(config)
  const unsubscribe = subscribe({
    [CHANNELS.decision]: (message: DecisionMessage) => recorder.decision(message),
    [CHANNELS.http]: (message: HttpMessage) => recorder.http(message),
  })
  return {
    snapshot: () => recorder.snapshot(),
    close: unsubscribe,
  }
}

const ALLOWED = 0
const QUEUED = 1
const DENIED = 2
const SHADOW = 3
const FIELDS = 4

class Recorder {
  readonly #config: LiveStatsConfig
  readonly #limiters = new Map<string, LimiterSeries>()
  /** The second of the last sweep for idle limiters when the map was full (at most one per second). */
  #sweptAt = Number.NaN

  constructor(config: LiveStatsConfig) {
    this.#config = config
  }

  decision(message: DecisionMessage): void {
    if (message.mode !== 'consume') return
    const second = Math.floor(this.#config.clock() / 1000)
    const series = this.#series(message.limiter, second)
    if (series === undefined) return
    const result = resultOf(message.decision)
    series.count(second, result === 'allowed' ? ALLOWED : result === 'queued' ? QUEUED : DENIED)
    if (result === 'denied') series.deny(second, boundedKey(message.key))
  }

  http(message: HttpMessage): void {
    // A request an overload guard shed asked no rule, so it is counted here: denied, with no key to rank.
    const shed = wasShed(message)
    if (message.action !== 'shadow' && !shed) return
    const second = Math.floor(this.#config.clock() / 1000)
    const series = this.#series(message.limiter, second)
    if (series === undefined) return
    if (shed) series.count(second, DENIED)
    if (message.action === 'shadow') series.count(second, SHADOW)
  }

  #series(limiter: string, second: number): LimiterSeries | undefined {
    let series = this.#limiters.get(limiter)
    if (series !== undefined) return series
    if (typeof limiter !== 'string') return undefined
    if (this.#limiters.size >= this.#config.maxLimiters) {
      if (this.#sweptAt === second) return undefined
      this.#sweptAt = second
      this.#forgetIdle(second)
      if (this.#limiters.size >= this.#config.maxLimiters) return undefined
    }
    series = new LimiterSeries(this.#config.seconds, this.#config.topKeys)
    this.#limiters.set(limiter, series)
    return series
  }

  #forgetIdle(second: number): void {
    for (const [limiter, series] of this.#limiters) {
      if (series.last <= second - this.#config.seconds) this.#limiters.delete(limiter)
    }
  }

  snapshot(): LiveStatsSnapshot {
    const at = this.#config.clock()
    const now = Math.floor(at / 1000)
    this.#forgetIdle(now)
    const limiters: Record<string, LimiterStats> = Object.create(null)
    for (const [limiter, series] of this.#limiters) {
      limiters[limiter] = { series: series.seriesUpTo(now), topDenied: series.topDenied(now) }
    }
    return { at, seconds: this.#config.seconds, limiters }
  }
}

/** One limiter's ring of seconds and its pair of denied-key sketches. */
class LimiterSeries {
  readonly #seconds: number
  readonly #topKeys: number
  /** The second each slot holds; NaN for a slot never used. */
  readonly #stamps: Float64Array
  /** FIELDS counts per slot. */
  readonly #counts: Float64Array
  /** Sketches of the current and the previous period, at `period % 2`; empty when `topKeys` is 0. */
  readonly #sketches: SpaceSaving[]
  /** The period each sketch holds. */
  readonly #periods = [Number.NaN, Number.NaN]
  /** The latest second recorded. */
  last = Number.NEGATIVE_INFINITY

  constructor(seconds: number, topKeys: number) {
    this.#seconds = seconds
    this.#topKeys = topKeys
    this.#stamps = new Float64Array(seconds).fill(Number.NaN)
    this.#counts = new Float64Array(seconds * FIELDS)
    this.#sketches =
      topKeys === 0
        ? []
        : [new SpaceSaving(SKETCH_FACTOR * topKeys), new SpaceSaving(SKETCH_FACTOR * topKeys)]
  }

  count(second: number, field: number): void {
    const slot = modulo(second, this.#seconds)
    const held = this.#stamps[slot]!
    if (held !== second) {
      // A slot holding a later second means this one is older than the whole ring: nothing to keep.
      if (held > second) return
      this.#stamps[slot] = second
      const base = slot * FIELDS
      this.#counts[base + ALLOWED] = 0
      this.#counts[base + QUEUED] = 0
      this.#counts[base + DENIED] = 0
      this.#counts[base + SHADOW] = 0
    }
    this.#counts[slot * FIELDS + field]!++
    if (second > this.last) this.last = second
  }

  deny(second: number, key: string): void {
    if (this.#sketches.length === 0) return
    const period = Math.floor(second / this.#seconds)
    const slot = modulo(period, 2)
    const held = this.#periods[slot]!
    if (held !== period) {
      if (held > period) return
      this.#periods[slot] = period
      this.#sketches[slot]!.clear()
    }
    this.#sketches[slot]!.add(key)
  }

  seriesUpTo(now: number): SecondCounts[] {
    const n = this.#seconds
    const out = new Array<SecondCounts>(n)
    for (let i = 0; i < n; i++) {
      const t = now - n + 1 + i
      const slot = modulo(t, n)
      if (this.#stamps[slot] === t) {
        const base = slot * FIELDS
        out[i] = {
          t,
          allowed: this.#counts[base + ALLOWED]!,
          queued: this.#counts[base + QUEUED]!,
          denied: this.#counts[base + DENIED]!,
          shadow: this.#counts[base + SHADOW]!,
        }
      } else {
        out[i] = { t, allowed: 0, queued: 0, denied: 0, shadow: 0 }
      }
    }
    return out
  }

  /** The current and the previous period's sketches merged: most denied first, ties by key. */
  topDenied(now: number): DeniedKey[] {
    if (this.#sketches.length === 0) return []
    const period = Math.floor(now / this.#seconds)
    const merged = new Map<string, number>()
    for (let slot = 0; slot < 2; slot++) {
      const held = this.#periods[slot]!
      if (held !== period && held !== period - 1) continue
      for (const [key, count] of this.#sketches[slot]!.entries())
        merged.set(key, (merged.get(key) ?? 0) + count)
    }
    const out: DeniedKey[] = []
    for (const [key, count] of merged) out.push({ key, count })
    out.sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    if (out.length > this.#topKeys) out.length = this.#topKeys
    return out
  }
}

function modulo(value: number, n: number): number {
  const m = value % n
  return m < 0 ? m + n : m
}

/** A key's counter in the sketch, a member of the group of counters with its count. */
interface Counter {
  key: string
  group: Group
  prev: Counter | null
  next: Counter | null
}

/** The counters with one count, in a list of groups ordered by count (the "stream summary"). */
interface Group {
  count: number
  first: Counter | null
  lower: Group | null
  higher: Group | null
}

/**
 * Space-Saving top-k sketch with `capacity` counters. Every add is O(1): a known key moves to the next
 * group up; an unknown one takes a free counter or, when none is left, the counter of a least-counted key
 * (whose count it inherits, plus one). A key's count is then exact when the sketch never overflowed and
 * an upper bound otherwise; every key denied more than (total / capacity) times is always held.
 */
export class SpaceSaving {
  readonly capacity: number
  readonly #byKey = new Map<string, Counter>()
  #lowest: Group | null = null
  /** Emptied groups kept for reuse, so steady traffic allocates nothing. */
  #spare: Group | null = null

  constructor(capacity: number) {
    this.capacity = capacity
  }

  /** Keys held: never more than `capacity`. */
  get size(): number {
    return this.#byKey.size
  }

  add(key: string): void {
    const counter = this.#byKey.get(key)
    if (counter !== undefined) {
      this.#increment(counter)
      return
    }
    if (this.#byKey.size < this.capacity) {
      const lowest = this.#lowest
      let group: Group
      if (lowest !== null && lowest.count === 1) {
        group = lowest
      } else {
        group = this.#group(1, null, lowest)
        if (lowest !== null) lowest.lower = group
        this.#lowest = group
      }
      const fresh: Counter = { key, group, prev: null, next: null }
      this.#link(fresh, group)
      this.#byKey.set(key, fresh)
      return
    }
    const victim = this.#lowest!.first!
    this.#byKey.delete(victim.key)
    victim.key = key
    this.#byKey.set(key, victim)
    this.#increment(victim)
  }

  /** Every key held, with its count. */
  *entries(): IterableIterator<[string, number]> {
    for (const [key, counter] of this.#byKey) yield [key, counter.group.count]
  }

  clear(): void {
    this.#byKey.clear()
    this.#lowest = null
  }

  #increment(counter: Counter): void {
    const group = counter.group
    const count = group.count + 1
    const higher = group.higher
    const alone = counter.prev === null && counter.next === null
    if (alone && (higher === null || higher.count !== count)) {
      group.count = count
      return
    }
    let target: Group
    if (higher !== null && higher.count === count) {
      target = higher
    } else {
      target = this.#group(count, group, higher)
      group.higher = target
      if (higher !== null) higher.lower = target
    }
    this.#unlink(counter)
    this.#link(counter, target)
  }

  #group(count: number, lower: Group | null, higher: Group | null): Group {
    const spare = this.#spare
    if (spare === null) return { count, first: null, lower, higher }
    this.#spare = spare.higher
    spare.count = count
    spare.first = null
    spare.lower = lower
    spare.higher = higher
    return spare
  }

  #link(counter: Counter, group: Group): void {
    counter.group = group
    counter.prev = null
    counter.next = group.first
    if (group.first !== null) group.first.prev = counter
    group.first = counter
  }

  /** Takes `counter` out of its group, and the group out of the list when it empties. */
  #unlink(counter: Counter): void {
    const group = counter.group
    if (counter.prev !== null) counter.prev.next = counter.next
    else group.first = counter.next
    if (counter.next !== null) counter.next.prev = counter.prev
    counter.prev = null
    counter.next = null
    if (group.first !== null) return
    if (group.lower !== null) group.lower.higher = group.higher
    else this.#lowest = group.higher
    if (group.higher !== null) group.higher.lower = group.lower
    group.lower = null
    group.higher = this.#spare
    this.#spare = group
  }
}
