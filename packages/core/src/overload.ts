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
  const monitor = o.signals === undefined ? eventLoopSignals(windowMs) : undefined
  const signals =
    o.signals === undefined
      ? monitor!.read
      : functionOption<() => OverloadSignals>('overload.signals', o.signals)

  const bucketMs = windowMs / buckets
  /** Per slot of the ring: the bucket index it holds (-1: never used), its completions, their total latency. */
  const indexes = new Float64Array(buckets).fill(-1)
  const passes = new Float64Array(buckets)
  const latencies = new Float64Array(buckets)
  let inFlight = 0
  let triggered = false
  /** The bucket whose first `enter` or `state` read the signals; they are not read again in it. */
  let readIn = -1
  const shed: OverloadTicket = Object.freeze({ admitted: false, retryAfterMs: bucketMs })

  /** Reads the signals, once per bucket. */
  function trigger(index: number): boolean {
    if (index !== readIn) {
      readIn = index
      const read = signals()
      triggered = read.eventLoopDelayMs > maxDelay || read.utilization > maxUtilization
    }
    return triggered
  }

  /** `[maxPass, minRt]` over the live buckets (the current one and the `buckets − 1` before it). */
  function evidence(index: number): [number, number] {
    let most = 0
    let least = Number.POSITIVE_INFINITY
    for (let slot = 0; slot < buckets; slot++) {
      const count = passes[slot]!
      if (count === 0 || indexes[slot]! <= index - buckets) continue
      if (count > most) most = count
      const mean = latencies[slot]! / count
      if (mean < least) least = mean
    }
    return [(most * 1000) / bucketMs, least]
  }

  function completed(enteredAt: number): void {
    inFlight--
    const now = clock()
    const index = Math.floor(now / bucketMs)
    const slot = ((index % buckets) + buckets) % buckets
    if (indexes[slot] !== index) {
      indexes[slot] = index
      passes[slot] = 0
      latencies[slot] = 0
    }
    passes[slot]!++
    latencies[slot]! += Math.max(0, now - enteredAt)
  }

  function admit(now: number): OverloadTicket {
    inFlight++
    let over = false
    return {
      admitted: true,
      done() {
        if (over) return
        over = true
        completed(now)
      },
    }
  }

  const guard: Overload<R> = {
    critical,
    status,
    bucketMs,
    enter(request) {
      const now = clock()
      const index = Math.floor(now / bucketMs)
      if (!trigger(index)) return admit(now)
      const [maxPass, minRt] = evidence(index)
      // No completion in the window: no evidence of what the server sustains, so nothing is shed.
      if (maxPass === 0) return admit(now)
      const estimate = Math.max(1, (maxPass * minRt) / 1000)
      const room = request?.critical === true ? estimate * headroom : estimate
      return inFlight < room ? admit(now) : shed
    },
    state() {
      const index = Math.floor(clock() / bucketMs)
      const isTriggered = trigger(index)
      const [maxPass, minRt] = evidence(index)
      if (maxPass === 0) {
        return { inFlight, maxPass: 0, minRt: 0, estimate: Number.POSITIVE_INFINITY, triggered: isTriggered }
      }
      return {
        inFlight,
        maxPass,
        minRt,
        estimate: Math.max(1, (maxPass * minRt) / 1000),
        triggered: isTriggered,
      }
    },
    close() {
      monitor?.stop()
    },
  }
  guards.add(guard)
  return guard
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
