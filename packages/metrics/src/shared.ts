/**
 * @module What the sinks share: subscribing to core's channels, loading an optional peer only when it is
 * used, a bounded cache of attribute objects, and the histogram buckets.
 */
import diagnostics from 'node:diagnostics_channel'
import { createRequire } from 'node:module'

/** Subscribes each handler to its channel; the returned function unsubscribes them all. */
export function subscribe(handlers: Readonly<Record<string, (message: never) => void>>): () => void {
  const subscribed: [string, (message: unknown) => void][] = []
  for (const [name, handler] of Object.entries(handlers)) {
    // A subscriber that throws would surface as an uncaught exception in the publisher's process:
    // a message that is not an object (nobody in sluice publishes one) is ignored instead.
    const listener = (message: unknown): void => {
      if (message !== null && typeof message === 'object') (handler as (message: unknown) => void)(message)
    }
    diagnostics.subscribe(name, listener)
    subscribed.push([name, listener])
  }
  let open = true
  return () => {
    if (!open) return
    open = false
    for (const [name, listener] of subscribed) diagnostics.unsubscribe(name, listener)
  }
}

const requireFromHere = createRequire(import.meta.url)

/**
 * Loads an optional peer dependency when a sink that needs it is built, so importing this package never
 * requires a library the application does not use. `@opentelemetry/api` keeps its global state under a
 * global symbol, so the copy loaded here and the one the application imports share one meter provider.
 */
export function loadPeer<T>(name: string, feature: string): T {
  try {
    return requireFromHere(name) as T
  } catch (error) {
    if ((error as { code?: unknown }).code === 'MODULE_NOT_FOUND') {
      throw new Error(`${feature} needs the package ${name}: install it next to @sluice/metrics.`, {
        cause: error,
      })
    }
    throw error
  }
}

/** This package's version, for the instrumentation scope of the default meter. */
export function packageVersion(): string {
  // The same relative path from src/ and from dist/.
  return (requireFromHere('../package.json') as { version: string }).version
}

type Part = string | undefined

/**
 * Attribute (label) objects per combination of up to four values, built once and reused, so recording a
 * message allocates nothing. Nested maps look the combination up without building a joined string.
 * Bounded: the values come from limiter prefixes, rule names and route templates, a small set in any sane
 * application; should it pass `max` combinations anyway, the cache starts over (it only saves allocations).
 */
export class AttributeCache<T> {
  readonly #root = new Map<Part, Map<Part, Map<Part, Map<Part, T>>>>()
  readonly #max: number
  readonly #make: (a: Part, b: Part, c: Part, d: Part) => T
  readonly #keep: (value: T) => boolean
  #size = 0
  /** The last combination asked for, and its value: steady traffic asks for the same one again and again. */
  #last: [Part, Part, Part, Part, T] | undefined

  constructor(
    max: number,
    make: (a: Part, b: Part, c: Part, d: Part) => T,
    keep: (value: T) => boolean = () => true,
  ) {
    this.#max = max
    this.#make = make
    this.#keep = keep
  }

  get(a: Part, b: Part, c: Part, d: Part): T {
    const last = this.#last
    if (last !== undefined && last[0] === a && last[1] === b && last[2] === c && last[3] === d) return last[4]
    const value = this.#lookup(a, b, c, d)
    this.#last = [a, b, c, d, value]
    return value
  }

  #lookup(a: Part, b: Part, c: Part, d: Part): T {
    const found = this.#root.get(a)?.get(b)?.get(c)?.get(d)
    if (found !== undefined) return found
    if (this.#size >= this.#max) {
      this.#root.clear()
      this.#size = 0
    }
    const value = this.#make(a, b, c, d)
    // A value the maker says not to keep (a tally's overflow) is indexed nowhere: no map grows for it.
    if (!this.#keep(value)) return value
    let level1 = this.#root.get(a)
    if (level1 === undefined) {
      level1 = new Map()
      this.#root.set(a, level1)
    }
    let level2 = level1.get(b)
    if (level2 === undefined) {
      level2 = new Map()
      level1.set(b, level2)
    }
    let level3 = level2.get(c)
    if (level3 === undefined) {
      level3 = new Map()
      level2.set(c, level3)
    }
    level3.set(d, value)
    this.#size++
    return value
  }

  get size(): number {
    return this.#size
  }
}

/** Combinations of attribute values cached per sink. */
export const MAX_CACHED_ATTRIBUTES = 10_000

/** One combination's count: what `Tally.add` increments and a metric reads when it is collected. */
export interface Tallied<T> {
  readonly attributes: T
  count: number
  /** The count a delta-based reader (prom-client's `collect`) has already passed on. */
  reported: number
}

/**
 * Counts per combination of attribute values, kept in plain numbers and read only when the metrics are
 * collected (an OpenTelemetry observable counter's callback, prom-client's `collect`), so counting a message
 * costs an increment, not the metric library's attribute processing (hashing, sorting, validating) per call.
 * Bounded: past `MAX_CACHED_ATTRIBUTES` combinations, new ones are not counted, and a process warning says so
 * once (the values come from prefixes, rule names and route templates: a small set in any sane application).
 */
export class Tally<T> {
  readonly entries: Tallied<T>[] = []
  readonly #cache: AttributeCache<Tallied<T>>
  #warned = false

  constructor(make: (a: Part, b: Part, c: Part, d: Part) => T) {
    const overflow: Tallied<T> = { attributes: undefined as T, count: 0, reported: 0 }
    this.#cache = new AttributeCache(
      Number.POSITIVE_INFINITY,
      (a, b, c, d) => {
        if (this.entries.length >= MAX_CACHED_ATTRIBUTES) {
          if (!this.#warned) {
            this.#warned = true
            process.emitWarning(
              `sluice: more than ${MAX_CACHED_ATTRIBUTES} combinations of metric attributes; new ones are not counted`,
              { code: 'SLUICE_METRICS_CARDINALITY' },
            )
          }
          return overflow
        }
        const entry: Tallied<T> = { attributes: make(a, b, c, d), count: 0, reported: 0 }
        this.entries.push(entry)
        return entry
      },
      (entry) => entry !== overflow,
    )
  }

  add(a: Part, b: Part, c: Part, d: Part): void {
    this.#cache.get(a, b, c, d).count++
  }

  /** Adds `n` to a combination's count (units, where `add` counts messages). */
  addMany(n: number, a: Part, b: Part, c: Part, d: Part): void {
    this.#cache.get(a, b, c, d).count += n
  }

  /** The attributes of a combination, for a metric that records at once instead. */
  attributesOf(a: Part, b: Part, c: Part, d: Part): T {
    return this.#cache.get(a, b, c, d).attributes
  }
}

/**
 * Bucket bounds (seconds) for the time a queued (leakyBucket) request is held: from a millisecond to the
 * half minute past which a `maxQueueMs` is rarely set.
 */
export const QUEUE_WAIT_BUCKETS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
]

/**
 * Bucket bounds (seconds) for a store call: from 100 µs (Redis on the same host) to one second, well past
 * any sane store timeout (the Redis store's default is 100 ms); a synchronous store lands in the first.
 */
export const STORE_DURATION_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
]

/** What a metrics sink returns: `close()` unsubscribes from core's channels. Calling it again does nothing. */
export interface MetricsSubscription {
  close(): void
}

interface Shared {
  readonly subscribe: () => () => void
  refs: number
  unsubscribe?: () => void
}

/**
 * One sink per target (a meter, a registry), shared by every call with it, so nothing is counted twice:
 * its instruments and counts are made once by `make` and kept (what was counted stays reported after
 * `close()`, and a later call counts on), and one channel subscription serves every open call.
 */
export function sharedSink<K extends object>(
  sinks: WeakMap<K, Shared>,
  target: K,
  make: () => () => () => void,
): MetricsSubscription {
  let shared = sinks.get(target)
  if (shared === undefined) {
    shared = { subscribe: make(), refs: 0 }
    sinks.set(target, shared)
  }
  if (shared.refs++ === 0) shared.unsubscribe = shared.subscribe()
  const share = shared
  let open = true
  return {
    close() {
      if (!open) return
      open = false
      if (--share.refs === 0) share.unsubscribe?.()
    },
  }
}

/** The per-target sinks of one kind, for `sharedSink`. */
export function sinks<K extends object>(): WeakMap<K, Shared> {
  return new WeakMap()
}
