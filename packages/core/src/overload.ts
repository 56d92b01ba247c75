/**
 * @module overload: sheds load by the server's own state, in the process, the way a congestion window
 * sizes itself by delivery rate and round-trip time. Per-client limits cannot see the sum of every client; this guard admits a request
 * while the requests in flight stay under what the server has shown it sustains (Little's law: the most
 * completions a second times the best mean latency), and only while an overload signal (event-loop delay,
 * event-loop utilization) is over its threshold. Time and the signals are inputs (`clock`, `signals`), so
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
  /**
   * Triggered while the event loop's delay (p99 over about the last second) is above this many ms. At least
   * one of `maxEventLoopDelayMs` and `maxUtilization` is required (a guard with no trigger would never shed).
   */
  maxEventLoopDelayMs?: number
  /** Triggered while the event loop's utilization is above this share (0 < x <= 1). Default: not read. */
  maxUtilization?: number
  /** A request `critical` marks is admitted while in flight < estimate × this (>= 1). Default 1.5. */
  criticalHeadroom?: number
  /** Marks a request as critical (health checks, payments); the adapters ask it. Default: none is. */
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
   * Reads the overload signals. Default: an event-loop delay monitor (`perf_hooks.monitorEventLoopDelay`)
   * and `performance.eventLoopUtilization`, started here and stopped by `close()`.
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
  /** `max(1, maxPass × minRt / 1000)`, unrounded; `Infinity` with no evidence (nothing is shed). */
  readonly estimate: number
  /** Whether a signal was over its threshold when this bucket's first `enter` or `state` read it. */
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
 * const guard = overload({ maxEventLoopDelayMs: 100, critical: (req) => req.url === '/health' })
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
  readonly headroom: number
  readonly critical: ((request: R) => boolean) | undefined
  readonly status: number
  readonly windowMs: number
  readonly buckets: number
  readonly clock: () => number
  /** The default signals' monitor, when `signals` was not given: the guard stops it on `close()`. */
  readonly monitor: { read: () => OverloadSignals; stop: () => void } | undefined
  readonly signals: () => OverloadSignals
}

/** Checks `overload()`'s options; a bad one throws `InvalidOptionError` naming it (`overload.<name>`). */
function guardSettings<R>(options: OverloadOptions<R>): GuardSettings<R> {
  const o = readOptions<OverloadOptions<R>>(
    'overload',
    options,
    [
      'maxEventLoopDelayMs',
      'maxUtilization',
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
  if (o.maxEventLoopDelayMs === undefined && o.maxUtilization === undefined) {
    throw new InvalidOptionError(
      'overload.maxEventLoopDelayMs',
      undefined,
      'a threshold in ms (or maxUtilization): a guard with no trigger never sheds',
    )
  }
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
  const monitor = ownSignals === undefined ? eventLoopSignals(windowMs) : undefined
  const signals = ownSignals ?? monitor!.read
  return { maxDelay, maxUtilization, headroom, critical, status, windowMs, buckets, clock, monitor, signals }
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

  /** `[maxPass, minRt]` over the live buckets (the bucket `index` and the `buckets − 1` before it). */
  evidence(index: number): [number, number] {
    const buckets = this.#buckets
    let most = 0
    let least = Number.POSITIVE_INFINITY
    for (let slot = 0; slot < buckets; slot++) {
      const count = this.#passes[slot]!
      if (count === 0 || this.#indexes[slot]! <= index - buckets) continue
      if (count > most) most = count
      const mean = this.#latencies[slot]! / count
      if (mean < least) least = mean
    }
    return [(most * 1000) / this.#bucketMs, least]
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
  /** The bucket whose first `enter` or `state` read the signals; they are not read again in it. */
  #readIn = -1

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
    if (!this.#trigger(index)) return this.#admit(now)
    const [maxPass, minRt] = this.#completions.evidence(index)
    // No completion in the window: no evidence of what the server sustains, so nothing is shed.
    if (maxPass === 0) return this.#admit(now)
    const estimate = Math.max(1, (maxPass * minRt) / 1000)
    const room = request?.critical === true ? estimate * this.#settings.headroom : estimate
    return this.#inFlight < room ? this.#admit(now) : this.#shed
  }

  readonly state = (): OverloadState => {
    const index = this.#completions.bucketOf(this.#now())
    const triggered = this.#trigger(index)
    const [maxPass, minRt] = this.#completions.evidence(index)
    const inFlight = this.#inFlight
    if (maxPass === 0)
      return { inFlight, maxPass: 0, minRt: 0, estimate: Number.POSITIVE_INFINITY, triggered }
    return { inFlight, maxPass, minRt, estimate: Math.max(1, (maxPass * minRt) / 1000), triggered }
  }

  readonly close = (): void => {
    this.#settings.monitor?.stop()
  }

  #now(): number {
    const { clock } = this.#settings
    return clock()
  }

  /** Reads the signals, once per bucket. */
  #trigger(index: number): boolean {
    if (index !== this.#readIn) {
      this.#readIn = index
      const { signals, maxDelay, maxUtilization } = this.#settings
      const read = signals()
      this.#triggered = read.eventLoopDelayMs > maxDelay || read.utilization > maxUtilization
    }
    return this.#triggered
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
        this.#completions.add(now, Math.max(0, now - enteredAt))
      },
    }
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
