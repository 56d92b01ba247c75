/**
 * @module `openTelemetryMetrics`: core's channels recorded through `@opentelemetry/api`, the vendor-neutral
 * meter, so whatever SDK and exporter the application set up receives them.
 *
 * Attributes are bounded by construction: limiter prefixes, rule names, results, reasons, actions, route
 * templates and error codes. The key a rule counted against is never an attribute (one series per client
 * would be unbounded).
 */
import type { Attributes, Histogram, Meter, ObservableCallback, ObservableCounter } from '@opentelemetry/api'
import type { DecisionMessage, HttpMessage, StoreErrorMessage } from '@sluice/core'
import { CHANNELS, errorCodeOf, resultOf, settledUnits, storeWasAsked, wasShed } from './messages.ts'
import {
  AttributeCache,
  loadPeer,
  MAX_CACHED_ATTRIBUTES,
  type MetricsSubscription,
  packageVersion,
  QUEUE_WAIT_BUCKETS,
  STORE_DURATION_BUCKETS,
  sharedSink,
  sinks,
  subscribe,
  Tally,
} from './shared.ts'

/**
 * An OpenTelemetry `Meter` (`@opentelemetry/api`), described by the methods sluice uses, so these type
 * declarations never import the optional peer (no TS2307 for an app without it under `skipLibCheck: false`).
 */
export interface OpenTelemetryMeter {
  createHistogram(name: string, options?: never): unknown
  createObservableCounter(name: string, options?: never): unknown
}

export interface OpenTelemetryMetricsOptions {
  /**
   * The meter to create the instruments on. Default: `metrics.getMeter('@sluice/metrics', version)` from
   * the global meter provider, which must be registered (the SDK started) before this is called: the
   * OpenTelemetry metrics API hands out no-op meters until then.
   */
  meter?: OpenTelemetryMeter
}

/** One sink per meter (see `sharedSink`). */
const perMeter = sinks<Meter>()

/**
 * Records sluice's decisions on an OpenTelemetry meter:
 *
 * - `sluice.decisions` (counter): consumes (peeks are not counted), by `sluice.limiter`, `sluice.rule`,
 *   `sluice.result` (`allowed | queued | denied`) and `sluice.reason`; a request an `overload` guard shed
 *   counts here too, `denied` with reason `overload` (and rule `''`: no rule was asked).
 * - `sluice.http.requests` (counter): what each limit did to each request, by `sluice.limiter`,
 *   `sluice.action` and `http.route` (left out when the adapter does not know the route).
 * - `sluice.queue.wait` (histogram, s): how long queued consumes are held, by `sluice.limiter`.
 * - `sluice.store.duration` (histogram, s): time an asynchronous store (Redis) took for consumes and peeks
 *   it answered or failed, by `sluice.limiter`. A synchronous store (the memory store) takes no time to
 *   record.
 * - `sluice.store.errors` (counter): store failures and timeouts, by `error.type` (the error's code).
 * - `sluice.settle.units` (counter): units settles gave back or charged (a request's true cost against what
 *   it reserved, `action: 'settle'` on `sluice:http`), by `sluice.limiter`, `sluice.rule` and
 *   `sluice.settle.change` (`given_back | charged`). The settles themselves count in `sluice.http.requests`.
 *
 * Counters are observable: counts are kept here and read when the meter's reader collects, so recording a
 * decision costs an increment. Calling it twice with one meter shares one subscription; each result's
 * `close()` gives up its share.
 */
export function openTelemetryMetrics(options: OpenTelemetryMetricsOptions = {}): MetricsSubscription {
  const meter =
    (options.meter as Meter | undefined) ??
    loadPeer<typeof import('@opentelemetry/api')>(
      '@opentelemetry/api',
      'openTelemetryMetrics without a meter',
    ).metrics.getMeter('@sluice/metrics', packageVersion())
  return sharedSink(perMeter, meter, () => instruments(meter))
}

/** Creates the instruments on `meter` and answers how to subscribe them to core's channels. */
function instruments(meter: Meter): () => () => void {
  const decisionCounts = new Tally<Attributes>((limiter, rule, result, reason) => ({
    'sluice.limiter': limiter,
    'sluice.rule': rule,
    'sluice.result': result,
    'sluice.reason': reason,
  }))
  const httpCounts = new Tally<Attributes>((limiter, action, route) =>
    route == null
      ? { 'sluice.limiter': limiter, 'sluice.action': action }
      : { 'sluice.limiter': limiter, 'sluice.action': action, 'http.route': route },
  )
  const errorCounts = new Tally<Attributes>((code) => ({ 'error.type': code }))
  const settleUnits = new Tally<Attributes>((limiter, rule, change) => ({
    'sluice.limiter': limiter,
    'sluice.rule': rule,
    'sluice.settle.change': change,
  }))
  // Counters are observed at collection from the counts kept here: a message costs one increment.
  const counters: [ObservableCounter, ObservableCallback][] = [
    [
      meter.createObservableCounter('sluice.decisions', {
        description: 'Rate-limit decisions of consumes, by result and by who decided.',
        unit: '{decision}',
      }),
      observe(decisionCounts),
    ],
    [
      meter.createObservableCounter('sluice.http.requests', {
        description: 'What each limit did to each HTTP request.',
        unit: '{request}',
      }),
      observe(httpCounts),
    ],
    [
      meter.createObservableCounter('sluice.store.errors', {
        description: 'Store calls that failed or timed out.',
        unit: '{error}',
      }),
      observe(errorCounts),
    ],
    [
      meter.createObservableCounter('sluice.settle.units', {
        description: 'Units settles gave back or charged: true costs against what requests reserved.',
        unit: '{unit}',
      }),
      observe(settleUnits),
    ],
  ]
  for (const [counter, callback] of counters) counter.addCallback(callback)
  const queueWait: Histogram = meter.createHistogram('sluice.queue.wait', {
    description: 'How long queued (leakyBucket) calls are held before they proceed.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...QUEUE_WAIT_BUCKETS] },
  })
  const storeDuration: Histogram = meter.createHistogram('sluice.store.duration', {
    description: 'Time an asynchronous store (Redis) took for the calls it answered or failed.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
  })
  const limiterAttributes = new AttributeCache<Attributes>(MAX_CACHED_ATTRIBUTES, (limiter) => ({
    'sluice.limiter': limiter,
  }))

  return () =>
    subscribe({
      [CHANNELS.decision]: (message: DecisionMessage) => {
        const decision = message.decision
        if (storeWasAsked(message)) {
          storeDuration.record(
            message.storeMs / 1000,
            limiterAttributes.get(message.limiter, undefined, undefined, undefined),
          )
        }
        if (message.mode !== 'consume') return
        const result = resultOf(decision)
        decisionCounts.add(message.limiter, decision.rule, result, decision.reason)
        if (result === 'queued') {
          queueWait.record(
            decision.waitMs / 1000,
            limiterAttributes.get(message.limiter, undefined, undefined, undefined),
          )
        }
      },
      [CHANNELS.http]: (message: HttpMessage) => {
        httpCounts.add(message.limiter, message.action, message.route, undefined)
        if (wasShed(message)) decisionCounts.add(message.limiter, '', 'denied', 'overload')
        if (message.action === 'settle') {
          settledUnits(message, (rule, change, units) => {
            settleUnits.addMany(units, message.limiter, rule, change, undefined)
          })
        }
      },
      [CHANNELS.storeError]: (message: StoreErrorMessage) => {
        errorCounts.add(errorCodeOf(message.error), undefined, undefined, undefined)
      },
    })
}

/** A callback reporting every combination's count so far (cumulative, as an observable counter is read). */
function observe(tally: Tally<Attributes>): ObservableCallback {
  return (result) => {
    for (const entry of tally.entries) result.observe(entry.count, entry.attributes)
  }
}
