/**
 * @module overload: sheds load by the server's own state, in the process, the way a congestion window
 * sizes itself by delivery rate and round-trip time. Per-client limits cannot see the sum of every client;
 * this guard admits a request while the requests in flight stay under what the server has shown it
 * sustains (Little's law: the most completions a second times the best latency), and only while the server
 * is overloaded: its event loop's delay or utilization is over a threshold (a server short of CPU), or its
 * requests pile up in flight while their latency climbs well above the best it has shown, whatever the
 * event loop says (a server waiting on a slow dependency). That best latency is also remembered for tens of
 * seconds, rising only slowly: a queue's own latency becomes the last second's best within a second, so the
 * rise would never show, and a room sized by it would keep the queue; the room is never sized by more than
 * `maxLatencyRatio` times the remembered best. Time and the signals are inputs (`clock`, `signals`), so
 * every behaviour is decided by them alone.
 */
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { InvalidOptionError } from './errors.ts'
import { functionOption, given, integerOption, positiveOption, readOptions } from './options.ts'

/** What an overload signal reads: the event loop's delay and how busy it is. */
export interface OverloadSignals {
  /** The event loop's delay, p99 over about the last second, in ms. */
  readonly eventLoopDelayMs: number
  /** The share of time the event loop was busy, from 0 to 1. */
  readonly utilization: number
}

export interface OverloadOptions<R = unknown> {
  /** Triggered while the event loop's delay (p99 over about the last second) is above this many ms. Default: not read. */
  maxEventLoopDelayMs?: number
  /** Triggered while the event loop's utilization is above this share (0 < x <= 1). Default: not read. */
  maxUtilization?: number
  /**
   * A pile-up: triggered while more requests are in flight than the server sustains at its best latency
   * (`maxPass × bestRt`) and their recent mean latency (`meanRt`) is above this many times `bestRt` (a
   * finite number > 1), whatever the event loop says (a server waiting on a slow dependency). Held while
   * the guard keeps shedding. The room is never sized by more than this many times `bestRt`. Default 2.
   */
  maxLatencyRatio?: number
  /**
   * How slowly `bestRt` (the best latency, remembered) forgets, in ms (a finite number > 0): it falls at once
   * to a lower mean latency, and rises toward a higher one by `1 − e^(−elapsed / bestRtDecayMs)` of the gap,
   * except while a pile-up holds. Default 30000.
   */
  bestRtDecayMs?: number
  /** A request `critical` marks is admitted while in flight < estimate × this (>= 1). Default 1.5. */
  criticalHeadroom?: number
  /**
   * Marks a request as critical (payments, health checks): the adapters ask it of a request the guard would
   * shed, and give it the headroom once its client's own limits admit it. Mark by what authentication
   * established, never by a path alone (anyone may ask for a path). Default: none is.
   */
  critical?: (request: R) => boolean
  /** HTTP status the adapters answer a shed request with, from 400 to 599. Default 503. */
  status?: number
  /** The span completions are measured over, in ms: an integer >= 1. Default 1000. */
  windowMs?: number
  /** Buckets of that span, an integer from 1 to 1000 dividing `windowMs`. Default 10. */
  buckets?: number
  /** The clock, in ms (fractions welcome). Default `performance.now`. */
  clock?: () => number
  /**
   * Reads the event loop's signals. Default, when `maxEventLoopDelayMs` or `maxUtilization` is given: an
   * event-loop delay monitor (`perf_hooks.monitorEventLoopDelay`) and `performance.eventLoopUtilization`,
   * started here and stopped by `close()`.
   */
  signals?: () => OverloadSignals
}

/** What `enter` answers: admitted (call `done()` when the request completes), or shed. */
export type OverloadTicket =
  | { readonly admitted: true; done(): void }
  | { readonly admitted: false; readonly retryAfterMs: number }

/** What a guard knows now. */
export interface OverloadState {
  /** Requests admitted and not done yet. */
  readonly inFlight: number
  /** The most completions of one live bucket, scaled to a second; 0 with no evidence. */
  readonly maxPass: number
  /** The least mean latency of a live bucket, in ms; 0 with no evidence. */
  readonly minRt: number
  /**
   * The best latency, remembered: the least mean latency of the live buckets seen at a completion, rising
   * slowly since (`bestRtDecayMs`) except while a pile-up holds, in ms; 0 before the first completion.
   */
  readonly bestRt: number
  /**
   * The mean latency of the completions in this bucket and the one before (this one alone with `buckets: 1`),
   * in ms; 0 with none. What the pile-up signal compares with `bestRt`.
   */
  readonly meanRt: number
  /**
   * `max(1, maxPass × min(minRt, maxLatencyRatio × bestRt) / 1000)`, unrounded; `Infinity` with no evidence
   * (nothing is shed).
   */
  readonly estimate: number
  /**
   * Whether the guard sheds past the estimate in this bucket: decided at its first `enter` or `state`, by the
   * event loop's signals over their thresholds or a pile-up (see `maxLatencyRatio`).
   */
  readonly triggered: boolean
}

export interface Overload<R = unknown> {
  /** Asks to admit one request; `critical` ones get `criticalHeadroom` times the room. */
  enter(options?: { readonly critical?: boolean }): OverloadTicket
  state(): OverloadState
  /** Stops the default signals' monitor. The guard still decides (on the last signals read). */
  close(): void
  /** The `critical` option, for the adapters. */
  readonly critical: ((request: R) => boolean) | undefined
  /** The `status` option, resolved: what the adapters answer a shed request with. */
  readonly status: number
  /** One bucket's length in ms: a shed request's `retryAfterMs`. */
  readonly bucketMs: number
}

const MAX_BUCKETS = 1000

/** Every guard `overload()` built, so the adapters can tell one from a look-alike object. */
const guards = new WeakSet<object>()

/** Whether `value` is a guard built by `overload()`. */
export function isOverload(value: unknown): value is Overload<never> {
  return typeof value === 'object' && value !== null && guards.has(value)
}

/**
 * A guard that sheds load when the server itself is overloaded. Invalid options throw
 * `InvalidOptionError` naming them (`overload.<name>`).
 *
 * @example
 * // `req.account` is set by your authentication, before the limit: a client cannot mark itself critical.
 * const guard = overload({ maxEventLoopDelayMs: 100, critical: (req) => req.account?.plan === 'payments' })
 * app.use(rateLimit({ rules, overload: guard }))
 */
export function overload<R = unknown>(options: OverloadOptions<R>): Overload<R> {
  const guard = new OverloadGuard(guardSettings(options))
  guards.add(guard)
  return guard
}

/** `overload()`'s options, checked and resolved. */
interface GuardSettings<R> {
  readonly maxDelay: number
  readonly maxUtilization: number
  readonly latencyRatio: number
  readonly decayMs: number
  readonly headroom: number
  readonly critical: ((request: R) => boolean) | undefined
  readonly status: number
  readonly windowMs: number
  readonly buckets: number
  readonly clock: () => number
  /** The default signals' monitor, when a threshold needs it and `signals` was not given: `close()` stops it. */
  readonly monitor: { read: () => OverloadSignals; stop: () => void } | undefined
  /** Reads the event loop's signals; undefined when no threshold is set (nothing to read them for). */
  readonly signals: (() => OverloadSignals) | undefined
}

/** Checks `overload()`'s options; a bad one throws `InvalidOptionError` naming it (`overload.<name>`). */
function guardSettings<R>(options: OverloadOptions<R>): GuardSettings<R> {
  const o = readOptions<OverloadOptions<R>>(
    'overload',
    options,
    [
      'maxEventLoopDelayMs',
      'maxUtilization',
      'maxLatencyRatio',
      'bestRtDecayMs',
      'criticalHeadroom',
      'critical',
      'status',
      'windowMs',
      'buckets',
      'clock',
      'signals',
    ],
    true,
  )
  const maxDelay =
    o.maxEventLoopDelayMs === undefined
      ? Number.POSITIVE_INFINITY
      : positiveOption('overload.maxEventLoopDelayMs', o.maxEventLoopDelayMs)
  const maxUtilization =
    o.maxUtilization === undefined ? Number.POSITIVE_INFINITY : shareOption(o.maxUtilization)
  const latencyRatio = given(o.maxLatencyRatio, 2)
  if (typeof latencyRatio !== 'number' || !Number.isFinite(latencyRatio) || latencyRatio <= 1) {
    throw new InvalidOptionError('overload.maxLatencyRatio', latencyRatio, 'a finite number > 1')
  }
  const decayMs = positiveOption('overload.bestRtDecayMs', given(o.bestRtDecayMs, 30_000))
  const headroom = given(o.criticalHeadroom, 1.5)
  if (typeof headroom !== 'number' || !Number.isFinite(headroom) || headroom < 1) {
    throw new InvalidOptionError('overload.criticalHeadroom', headroom, 'a finite number >= 1')
  }
  const critical =
    o.critical === undefined
      ? undefined
      : functionOption<(request: R) => boolean>('overload.critical', o.critical)
  const status = integerOption('overload.status', given(o.status, 503), 400, 599)
  const windowMs = integerOption('overload.windowMs', given(o.windowMs, 1000), 1)
  const buckets = integerOption('overload.buckets', given(o.buckets, 10), 1, MAX_BUCKETS)
  if (windowMs % buckets !== 0) {
    throw new InvalidOptionError('overload.buckets', buckets, `a divisor of windowMs (${windowMs})`)
  }
  const clock =
    o.clock === undefined ? () => performance.now() : functionOption<() => number>('overload.clock', o.clock)
  const ownSignals =
    o.signals === undefined ? undefined : functionOption<() => OverloadSignals>('overload.signals', o.signals)
  const reads = o.maxEventLoopDelayMs !== undefined || o.maxUtilization !== undefined
  const monitor = reads && ownSignals === undefined ? eventLoopSignals(windowMs) : undefined
  return {
    maxDelay,
    maxUtilization,
    latencyRatio,
    decayMs,
    headroom,
    critical,
    status,
    windowMs,
    buckets,
    clock,
    monitor,
    signals: reads ? (ownSignals ?? monitor!.read) : undefined,
  }
}

/**
 * Completions over the last `buckets` buckets of `bucketMs`, in a ring: per slot, the bucket index it
 * holds (-1: never used), its completions and their total latency.
 */
class Completions {
  readonly #buckets: number
  readonly #bucketMs: number
  readonly #indexes: Float64Array
  readonly #passes: Float64Array
  readonly #latencies: Float64Array

  constructor(buckets: number, bucketMs: number) {
    this.#buckets = buckets
    this.#bucketMs = bucketMs
    this.#indexes = new Float64Array(buckets).fill(-1)
    this.#passes = new Float64Array(buckets)
    this.#latencies = new Float64Array(buckets)
  }

  /** The index of the bucket that holds `now` (buckets count from 0 ms on the clock). */
  bucketOf(now: number): number {
    return Math.floor(now / this.#bucketMs)
  }

  /** Counts a request done at `now` that took `latencyMs`, in the bucket of `now`. */
  add(now: number, latencyMs: number): void {
    const buckets = this.#buckets
    const index = this.bucketOf(now)
    const slot = ((index % buckets) + buckets) % buckets
    if (this.#indexes[slot] !== index) {
      this.#indexes[slot] = index
      this.#passes[slot] = 0
      this.#latencies[slot] = 0
    }
    this.#passes[slot]!++
    this.#latencies[slot]! += latencyMs
  }

  /**
   * `[maxPass, minRt, mean latency]` over the live buckets (the bucket `index` and the `buckets − 1` before
   * it): the most completions of one, scaled to a second, the least mean latency of one (Infinity with
   * none), and the mean latency of all their completions (0 with none).
   */
  evidence(index: number): [number, number, number] {
    const buckets = this.#buckets
    let most = 0
    let least = Number.POSITIVE_INFINITY
    let count = 0
    let latency = 0
    for (let slot = 0; slot < buckets; slot++) {
      const passes = this.#passes[slot]!
      if (passes === 0 || this.#indexes[slot]! <= index - buckets) continue
      if (passes > most) most = passes
      const mean = this.#latencies[slot]! / passes
      if (mean < least) least = mean
      count += passes
      latency += this.#latencies[slot]!
    }
    return [(most * 1000) / this.#bucketMs, least, count === 0 ? 0 : latency / count]
  }

  /**
   * The mean latency of the completions in the bucket `index` and the one before it (the one before is not
   * kept with a single bucket); 0 with none.
   */
  recentMean(index: number): number {
    let count = 0
    let latency = 0
    for (let i = this.#buckets === 1 ? index : index - 1; i <= index; i++) {
      const slot = ((i % this.#buckets) + this.#buckets) % this.#buckets
      if (this.#indexes[slot] !== i) continue
      count += this.#passes[slot]!
      latency += this.#latencies[slot]!
    }
    return count === 0 ? 0 : latency / count
  }
}

/**
 * The guard `overload()` builds: admits while in flight stays under the estimate, or while not triggered.
 * Its acts are functions of their own, as a closure's would be: `const { enter } = guard` works, and the
 * user's `clock` and `signals` are called as plain functions.
 */
class OverloadGuard<R> implements Overload<R> {
  readonly critical: ((request: R) => boolean) | undefined
  readonly status: number
  readonly bucketMs: number
  readonly #settings: GuardSettings<R>
  readonly #completions: Completions
  readonly #shed: OverloadTicket
  #inFlight = 0
  #triggered = false
  /** Whether the last decision saw a pile-up; it holds while requests are shed (`#shedSince`). */
  #piledUp = false
  #shedSince = false
  /** The bucket whose first `enter` or `state` decided the trigger; it is not decided again in it. */
  #decidedIn = -1
  /** The best latency (`bestRt`) as of the last completion, which came at `#bestRtAt`; Infinity before one. */
  #bestRt = Number.POSITIVE_INFINITY
  #bestRtAt = 0

  constructor(settings: GuardSettings<R>) {
    this.#settings = settings
    this.critical = settings.critical
    this.status = settings.status
    this.bucketMs = settings.windowMs / settings.buckets
    this.#completions = new Completions(settings.buckets, this.bucketMs)
    this.#shed = Object.freeze({ admitted: false, retryAfterMs: this.bucketMs })
  }

  readonly enter = (request?: { readonly critical?: boolean }): OverloadTicket => {
    const now = this.#now()
    const index = this.#completions.bucketOf(now)
    if (index !== this.#decidedIn) this.#decide(index)
    if (!this.#triggered) return this.#admit(now)
    // With no completion in the window the estimate is Infinity: no evidence, so nothing is shed.
    const estimate = this.#estimate(index)
    const room = request?.critical === true ? estimate * this.#settings.headroom : estimate
    if (this.#inFlight < room) return this.#admit(now)
    this.#shedSince = true
    return this.#shed
  }

  readonly state = (): OverloadState => {
    const index = this.#completions.bucketOf(this.#now())
    if (index !== this.#decidedIn) this.#decide(index)
    const [maxPass, minRt] = this.#completions.evidence(index)
    return {
      inFlight: this.#inFlight,
      maxPass,
      minRt: maxPass === 0 ? 0 : minRt,
      bestRt: Number.isFinite(this.#bestRt) ? this.#bestRt : 0,
      meanRt: this.#completions.recentMean(index),
      estimate: this.#estimate(index),
      triggered: this.#triggered,
    }
  }

  readonly close = (): void => {
    this.#settings.monitor?.stop()
  }

  #now(): number {
    const { clock } = this.#settings
    return clock()
  }

  /**
   * `max(1, maxPass × min(minRt, maxLatencyRatio × bestRt) / 1000)`: the last second's best latency, never
   * counted above what the pile-up signal calls a rise (the window's best is then the queue's own latency);
   * Infinity with no completion in the window.
   */
  #estimate(index: number): number {
    const [maxPass, minRt] = this.#completions.evidence(index)
    if (maxPass === 0) return Number.POSITIVE_INFINITY
    return Math.max(1, (maxPass * Math.min(minRt, this.#settings.latencyRatio * this.#bestRt)) / 1000)
  }

  /**
   * Decides the trigger for the bucket `index`: an event-loop signal over its threshold, or a pile-up: more
   * requests in flight than the server sustains at its best latency while their recent mean latency is over
   * `maxLatencyRatio` × bestRt, whatever the event loop says. A pile-up holds while requests are shed: the
   * shedding that keeps the latency down must not end it.
   */
  #decide(index: number): void {
    this.#decidedIn = index
    const { signals, maxDelay, maxUtilization, latencyRatio } = this.#settings
    const read = signals?.()
    const busy = read !== undefined && (read.eventLoopDelayMs > maxDelay || read.utilization > maxUtilization)
    const completions = this.#completions
    const maxPass = completions.evidence(index)[0]
    this.#piledUp =
      (this.#piledUp && this.#shedSince) ||
      (maxPass > 0 &&
        this.#inFlight > Math.max(1, (maxPass * this.#bestRt) / 1000) &&
        completions.recentMean(index) > latencyRatio * this.#bestRt)
    this.#shedSince = false
    this.#triggered = busy || this.#piledUp
  }

  /** A ticket for a request entered at `enteredAt`; its first `done()` counts it as completed. */
  #admit(enteredAt: number): OverloadTicket {
    this.#inFlight++
    let over = false
    return {
      admitted: true,
      done: () => {
        if (over) return
        over = true
        this.#inFlight--
        const now = this.#now()
        const completions = this.#completions
        completions.add(now, Math.max(0, now - enteredAt))
        this.#remember(now, completions.evidence(completions.bucketOf(now))[2])
      },
    }
  }

  /**
   * Follows the best latency at a completion: down at once to the live buckets' mean latency when that is
   * lower, else up toward it by `1 − e^(−elapsed / bestRtDecayMs)` of the gap, elapsed since the last
   * completion, except while a pile-up holds: the latency of the queue the guard then lets in is not the
   * server's, and following it would let the estimate, and the queue, grow without end.
   */
  #remember(now: number, meanRt: number): void {
    const best = this.#bestRt
    if (meanRt <= best) this.#bestRt = meanRt
    else if (!this.#piledUp) {
      const kept = Math.exp(-Math.max(0, now - this.#bestRtAt) / this.#settings.decayMs)
      this.#bestRt = best + (meanRt - best) * (1 - kept)
    }
    this.#bestRtAt = now
  }
}

function shareOption(value: unknown): number {
  if (typeof value !== 'number' || !(value > 0 && value <= 1)) {
    throw new InvalidOptionError('overload.maxUtilization', value, 'a share of time above 0, at most 1')
  }
  return value
}

/**
 * The default signals: `monitorEventLoopDelay` (10 ms resolution) and `eventLoopUtilization`. The delay is
 * the p99 since the histogram last started over, or of the span before it when that was worse; it starts
 * over once it spans `windowMs`, so a spike is seen for a second or two, never for ever. Utilization is
 * measured between two reads (one bucket apart at most, while requests arrive).
 */
function eventLoopSignals(windowMs: number): { read: () => OverloadSignals; stop: () => void } {
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  let startedAt = performance.now()
  let previousP99 = 0
  let lastUse: EventLoopUtilization = performance.eventLoopUtilization()
  return {
    read() {
      const now = performance.now()
      const p99 = histogram.count === 0 ? 0 : histogram.percentile(99) / 1e6
      const delay = Math.max(p99, previousP99)
      if (now - startedAt >= windowMs) {
        previousP99 = p99
        histogram.reset()
        startedAt = now
      }
      const use = performance.eventLoopUtilization()
      const utilization = performance.eventLoopUtilization(use, lastUse).utilization
      lastUse = use
      return { eventLoopDelayMs: delay, utilization }
    },
    stop() {
      histogram.disable()
    },
  }
}
