/**
 * @module `prometheusMetrics`: core's channels recorded through `prom-client`, for applications that are
 * scraped. The same figures as `openTelemetryMetrics`, named the Prometheus way.
 *
 * Labels are bounded by construction: limiter prefixes, rule names, results, reasons, actions, route
 * templates and error codes. The key is never a label.
 */

import type { DecisionMessage, HttpMessage, StoreErrorMessage } from '@sluice/core'
import { InvalidOptionError } from '@sluice/core'
import type { Counter, Histogram, Metric, Registry } from 'prom-client'
import { CHANNELS, errorCodeOf, resultOf, settledUnits, storeWasAsked, wasShed } from './messages.ts'
import {
  AttributeCache,
  loadPeer,
  MAX_CACHED_ATTRIBUTES,
  type MetricsSubscription,
  QUEUE_WAIT_BUCKETS,
  STORE_DURATION_BUCKETS,
  sharedSink,
  sinks,
  subscribe,
  Tally,
} from './shared.ts'

/**
 * A prom-client `Registry`, described by the methods sluice uses, so these type declarations never import
 * the optional peer `prom-client` (no TS2307 for an app without it under `skipLibCheck: false`).
 */
export interface PrometheusRegistry {
  getSingleMetric(name: string): unknown
  registerMetric(metric: never): void
}

export interface PrometheusMetricsOptions {
  /** The registry to register the metrics on. Default: prom-client's global `register`. */
  registry?: PrometheusRegistry
}

type Labels = Record<string, string>

/** One sink per registry (see `sharedSink`). */
const perRegistry = sinks<Registry>()

/**
 * Records sluice's decisions on a prom-client registry:
 *
 * - `sluice_decisions_total{limiter,rule,result,reason}`: consumes (peeks are not counted); `result` is
 *   `allowed`, `queued` or `denied`. A request an `overload` guard shed counts here too: `denied`,
 *   `reason="overload"`, `rule=""` (no rule was asked).
 * - `sluice_http_requests_total{limiter,action,route}`: what each limit did to each request; `route` is
 *   empty (Prometheus's "absent") when the adapter does not know the route.
 * - `sluice_queue_wait_seconds{limiter}` (histogram): how long queued consumes are held.
 * - `sluice_store_duration_seconds{limiter}` (histogram): time an asynchronous store (Redis) took for
 *   consumes and peeks it answered or failed; a synchronous store (the memory store) takes none to record.
 * - `sluice_store_errors_total{code}`: store failures and timeouts, by error code.
 * - `sluice_settle_units_total{limiter,rule,change}`: units settles gave back (`change="given_back"`) or
 *   charged (`"charged"`): requests' true costs against what they reserved (`action: 'settle'`).
 *
 * Calling it twice with one registry does not throw and does not count twice: the calls share one
 * subscription, and each result's `close()` gives up its share. Metrics of these names already on the
 * registry (say, from another copy of this package) are reused when they have the same type and labels;
 * otherwise this throws `InvalidOptionError` for `prometheusMetrics.registry`.
 */
export function prometheusMetrics(options: PrometheusMetricsOptions = {}): MetricsSubscription {
  const client = loadPeer<typeof import('prom-client')>('prom-client', 'prometheusMetrics')
  const registry = (options.registry as Registry | undefined) ?? client.register
  return sharedSink(perRegistry, registry, () => instruments(client, registry))
}

/** Creates the metrics on `registry` and answers how to subscribe them to core's channels. */
function instruments(client: typeof import('prom-client'), registry: Registry): () => () => void {
  const decisionCounts = new Tally<Labels>((limiter, rule, result, reason) => ({
    limiter: limiter!,
    rule: rule!,
    result: result!,
    reason: reason!,
  }))
  const httpCounts = new Tally<Labels>((limiter, action, route) => ({
    limiter: limiter!,
    action: action!,
    route: route ?? '',
  }))
  const errorCounts = new Tally<Labels>((code) => ({ code: code! }))
  const settleUnits = new Tally<Labels>((limiter, rule, change) => ({
    limiter: limiter!,
    rule: rule!,
    change: change!,
  }))
  const sources = new Map<Counter, Tally<Labels>>()
  /**
   * A counter fed from a tally when it is collected: each scrape adds what was counted since the last one,
   * so a message costs an increment here, not prom-client's label validation and hashing per call.
   */
  const counter = (name: string, help: string, labelNames: string[], tally: Tally<Labels>): Counter => {
    const existing = reuse<Counter>(registry, name, 'counter', labelNames)
    if (existing !== undefined) {
      // Another copy of this package registered it first: its collect is not ours, so count at once.
      sources.set(existing, tally)
      return existing
    }
    return new client.Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const entry of tally.entries) {
          const delta = entry.count - entry.reported
          if (delta > 0) {
            this.inc(entry.attributes, delta)
            entry.reported = entry.count
          }
        }
      },
    })
  }
  const histogram = (name: string, help: string, buckets: readonly number[]): Histogram =>
    reuse(registry, name, 'histogram', ['limiter']) ??
    new client.Histogram({
      name,
      help,
      labelNames: ['limiter'],
      buckets: [...buckets],
      registers: [registry],
    })

  const decisions = counter(
    'sluice_decisions_total',
    'Rate-limit decisions of consumes, by result and by who decided.',
    ['limiter', 'rule', 'result', 'reason'],
    decisionCounts,
  )
  const httpRequests = counter(
    'sluice_http_requests_total',
    'What each limit did to each HTTP request.',
    ['limiter', 'action', 'route'],
    httpCounts,
  )
  const storeErrors = counter(
    'sluice_store_errors_total',
    'Store calls that failed or timed out.',
    ['code'],
    errorCounts,
  )
  const settled = counter(
    'sluice_settle_units_total',
    'Units settles gave back or charged: true costs against what requests reserved.',
    ['limiter', 'rule', 'change'],
    settleUnits,
  )
  const queueWait = histogram(
    'sluice_queue_wait_seconds',
    'How long queued (leakyBucket) calls are held before they proceed.',
    QUEUE_WAIT_BUCKETS,
  )
  const storeDuration = histogram(
    'sluice_store_duration_seconds',
    'Time an asynchronous store (Redis) took for the calls it answered or failed.',
    STORE_DURATION_BUCKETS,
  )
  const limiterLabels = new AttributeCache<Labels>(MAX_CACHED_ATTRIBUTES, (limiter) => ({
    limiter: limiter!,
  }))
  /** Counts one message: into the tally, or at once on a counter registered by another copy. */
  const count = (metric: Counter, tally: Tally<Labels>, a: string, b?: string, c?: string, d?: string) => {
    if (sources.has(metric)) metric.inc(tally.attributesOf(a, b, c, d))
    else tally.add(a, b, c, d)
  }

  return () =>
    subscribe({
      [CHANNELS.decision]: (message: DecisionMessage) => {
        const decision = message.decision
        if (storeWasAsked(message)) {
          storeDuration.observe(
            limiterLabels.get(message.limiter, undefined, undefined, undefined),
            message.storeMs / 1000,
          )
        }
        if (message.mode !== 'consume') return
        const result = resultOf(decision)
        count(decisions, decisionCounts, message.limiter, decision.rule, result, decision.reason)
        if (result === 'queued') {
          queueWait.observe(
            limiterLabels.get(message.limiter, undefined, undefined, undefined),
            decision.waitMs / 1000,
          )
        }
      },
      [CHANNELS.http]: (message: HttpMessage) => {
        count(httpRequests, httpCounts, message.limiter, message.action, message.route)
        if (wasShed(message)) count(decisions, decisionCounts, message.limiter, '', 'denied', 'overload')
        if (message.action === 'settle') {
          settledUnits(message, (rule, change, units) => {
            if (sources.has(settled))
              settled.inc(settleUnits.attributesOf(message.limiter, rule, change, undefined), units)
            else settleUnits.addMany(units, message.limiter, rule, change, undefined)
          })
        }
      },
      [CHANNELS.storeError]: (message: StoreErrorMessage) => {
        count(storeErrors, errorCounts, errorCodeOf(message.error))
      },
    })
}

/** The metric already registered under `name`, when it is one this package can record on; else undefined. */
function reuse<T extends Counter | Histogram>(
  registry: Registry,
  name: string,
  type: 'counter' | 'histogram',
  labelNames: readonly string[],
): T | undefined {
  const existing = registry.getSingleMetric(name) as
    | (Metric & { type?: unknown; labelNames?: unknown })
    | undefined
  if (existing === undefined) return undefined
  const labels = existing.labelNames
  if (
    existing.type !== type ||
    !Array.isArray(labels) ||
    labels.length !== labelNames.length ||
    !labelNames.every((label) => labels.includes(label))
  ) {
    throw new InvalidOptionError(
      'prometheusMetrics.registry',
      registry,
      `a registry where ${name}, if present, is a ${type} with labels ${labelNames.join(', ')}`,
    )
  }
  return existing as unknown as T
}
