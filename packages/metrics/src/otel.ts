/**
 * @module `openTelemetryMetrics`: core's channels recorded through `@opentelemetry/api`, the vendor-neutral
 * meter, so whatever SDK and exporter the application set up receives them.
 *
 * Attributes are bounded by construction: limiter prefixes, rule names, results, reasons, actions, route
 * templates and error codes. The key a rule counted against is never an attribute (one series per client
 * would be unbounded).
 */
import type { Attributes, Counter, Histogram, Meter } from '@opentelemetry/api'
import type { DecisionMessage, HttpMessage, StoreErrorMessage } from '@sluice/core'
import { CHANNELS, errorCodeOf, resultOf, storeWasAsked } from './messages.ts'
import {
  AttributeCache,
  loadPeer,
  MAX_CACHED_ATTRIBUTES,
  packageVersion,
  QUEUE_WAIT_BUCKETS,
  STORE_DURATION_BUCKETS,
  subscribe,
} from './shared.ts'

export interface OpenTelemetryMetricsOptions {
  /**
   * The meter to create the instruments on. Default: `metrics.getMeter('@sluice/metrics', version)` from
   * the global meter provider, which must be registered (the SDK started) before this is called: the
   * OpenTelemetry metrics API hands out no-op meters until then.
   */
  meter?: Meter
}

/** What a metrics sink returns: `close()` unsubscribes from core's channels. Calling it again does nothing. */
export interface MetricsSubscription {
  close(): void
}

/** One subscription per meter, shared by every call with that meter, so nothing is counted twice. */
const perMeter = new WeakMap<Meter, { refs: number; unsubscribe: () => void }>()

/**
 * Records sluice's decisions on an OpenTelemetry meter:
 *
 * - `sluice.decisions` (counter): consumes (peeks are not counted), by `sluice.limiter`, `sluice.rule`,
 *   `sluice.result` (`allowed | queued | denied`) and `sluice.reason`.
 * - `sluice.http.requests` (counter): what each limit did to each request, by `sluice.limiter`,
 *   `sluice.action` and `http.route` (left out when the adapter does not know the route).
 * - `sluice.queue.wait` (histogram, s): how long queued consumes are held, by `sluice.limiter`.
 * - `sluice.store.duration` (histogram, s): store time of consumes and peeks that asked the store (the rules
 *   decided, or the store took time before failing), by `sluice.limiter`.
 * - `sluice.store.errors` (counter): store failures and timeouts, by `error.type` (the error's code).
 *
 * Calling it twice with one meter shares one subscription; each result's `close()` releases its share.
 */
export function openTelemetryMetrics(options: OpenTelemetryMetricsOptions = {}): MetricsSubscription {
  const meter =
    options.meter ??
    loadPeer<typeof import('@opentelemetry/api')>(
      '@opentelemetry/api',
      'openTelemetryMetrics without a meter',
    ).metrics.getMeter('@sluice/metrics', packageVersion())
  let shared = perMeter.get(meter)
  if (shared === undefined) {
    shared = { refs: 0, unsubscribe: record(meter) }
    perMeter.set(meter, shared)
  }
  shared.refs++
  const share = shared
  let open = true
  return {
    close() {
      if (!open) return
      open = false
      if (--share.refs === 0) {
        share.unsubscribe()
        perMeter.delete(meter)
      }
    },
  }
}

function record(meter: Meter): () => void {
  const decisions: Counter = meter.createCounter('sluice.decisions', {
    description: 'Rate-limit decisions of consumes, by result and by who decided.',
    unit: '{decision}',
  })
  const httpRequests: Counter = meter.createCounter('sluice.http.requests', {
    description: 'What each limit did to each HTTP request.',
    unit: '{request}',
  })
  const queueWait: Histogram = meter.createHistogram('sluice.queue.wait', {
    description: 'How long queued (leakyBucket) calls are held before they proceed.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...QUEUE_WAIT_BUCKETS] },
  })
  const storeDuration: Histogram = meter.createHistogram('sluice.store.duration', {
    description: 'Time the store took for calls that reached it.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
  })
  const storeErrors: Counter = meter.createCounter('sluice.store.errors', {
    description: 'Store calls that failed or timed out.',
    unit: '{error}',
  })

  const decisionAttributes = new AttributeCache<Attributes>(
    MAX_CACHED_ATTRIBUTES,
    (limiter, rule, result, reason) => ({
      'sluice.limiter': limiter,
      'sluice.rule': rule,
      'sluice.result': result,
      'sluice.reason': reason,
    }),
  )
  const httpAttributes = new AttributeCache<Attributes>(MAX_CACHED_ATTRIBUTES, (limiter, action, route) =>
    route == null
      ? { 'sluice.limiter': limiter, 'sluice.action': action }
      : { 'sluice.limiter': limiter, 'sluice.action': action, 'http.route': route },
  )
  const limiterAttributes = new AttributeCache<Attributes>(MAX_CACHED_ATTRIBUTES, (limiter) => ({
    'sluice.limiter': limiter,
  }))
  const errorAttributes = new AttributeCache<Attributes>(MAX_CACHED_ATTRIBUTES, (code) => ({
    'error.type': code,
  }))

  return subscribe({
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
      decisions.add(1, decisionAttributes.get(message.limiter, decision.rule, result, decision.reason))
      if (result === 'queued') {
        queueWait.record(
          decision.waitMs / 1000,
          limiterAttributes.get(message.limiter, undefined, undefined, undefined),
        )
      }
    },
    [CHANNELS.http]: (message: HttpMessage) => {
      httpRequests.add(1, httpAttributes.get(message.limiter, message.action, message.route, undefined))
    },
    [CHANNELS.storeError]: (message: StoreErrorMessage) => {
      storeErrors.add(1, errorAttributes.get(errorCodeOf(message.error), undefined, undefined, undefined))
    },
  })
}
