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
import { CHANNELS, errorCodeOf, resultOf, storeWasAsked } from './messages.ts'
import type { MetricsSubscription } from './otel.ts'
import {
  AttributeCache,
  loadPeer,
  MAX_CACHED_ATTRIBUTES,
  QUEUE_WAIT_BUCKETS,
  STORE_DURATION_BUCKETS,
  subscribe,
} from './shared.ts'

export interface PrometheusMetricsOptions {
  /** The registry to register the metrics on. Default: prom-client's global `register`. */
  registry?: Registry
}

type Labels = Record<string, string>

/** One subscription per registry, shared by every call with that registry, so nothing is counted twice. */
const perRegistry = new WeakMap<Registry, { refs: number; unsubscribe: () => void }>()

/**
 * Records sluice's decisions on a prom-client registry:
 *
 * - `sluice_decisions_total{limiter,rule,result,reason}`: consumes (peeks are not counted); `result` is
 *   `allowed`, `queued` or `denied`.
 * - `sluice_http_requests_total{limiter,action,route}`: what each limit did to each request; `route` is
 *   empty (Prometheus's "absent") when the adapter does not know the route.
 * - `sluice_queue_wait_seconds{limiter}` (histogram): how long queued consumes are held.
 * - `sluice_store_duration_seconds{limiter}` (histogram): store time of consumes and peeks that asked the
 *   store (the rules decided, or the store took time before failing).
 * - `sluice_store_errors_total{code}`: store failures and timeouts, by error code.
 *
 * Calling it twice with one registry does not throw and does not count twice: the calls share one
 * subscription, and each result's `close()` releases its share. Metrics of these names already on the
 * registry (say, from another copy of this package) are reused when they have the same type and labels;
 * otherwise this throws `InvalidOptionError` for `prometheusMetrics.registry`.
 */
export function prometheusMetrics(options: PrometheusMetricsOptions = {}): MetricsSubscription {
  const client = loadPeer<typeof import('prom-client')>('prom-client', 'prometheusMetrics')
  const registry = options.registry ?? client.register
  let shared = perRegistry.get(registry)
  if (shared === undefined) {
    shared = { refs: 0, unsubscribe: record(client, registry) }
    perRegistry.set(registry, shared)
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
        perRegistry.delete(registry)
      }
    },
  }
}

function record(client: typeof import('prom-client'), registry: Registry): () => void {
  const counter = (name: string, help: string, labelNames: string[]): Counter =>
    reuse(registry, name, 'counter', labelNames) ??
    new client.Counter({ name, help, labelNames, registers: [registry] })
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
  )
  const httpRequests = counter('sluice_http_requests_total', 'What each limit did to each HTTP request.', [
    'limiter',
    'action',
    'route',
  ])
  const queueWait = histogram(
    'sluice_queue_wait_seconds',
    'How long queued (leakyBucket) calls are held before they proceed.',
    QUEUE_WAIT_BUCKETS,
  )
  const storeDuration = histogram(
    'sluice_store_duration_seconds',
    'Time the store took for calls that reached it.',
    STORE_DURATION_BUCKETS,
  )
  const storeErrors = counter('sluice_store_errors_total', 'Store calls that failed or timed out.', ['code'])

  const decisionLabels = new AttributeCache<Labels>(
    MAX_CACHED_ATTRIBUTES,
    (limiter, rule, result, reason) => ({
      limiter: limiter!,
      rule: rule!,
      result: result!,
      reason: reason!,
    }),
  )
  const httpLabels = new AttributeCache<Labels>(MAX_CACHED_ATTRIBUTES, (limiter, action, route) => ({
    limiter: limiter!,
    action: action!,
    route: route ?? '',
  }))
  const limiterLabels = new AttributeCache<Labels>(MAX_CACHED_ATTRIBUTES, (limiter) => ({
    limiter: limiter!,
  }))
  const codeLabels = new AttributeCache<Labels>(MAX_CACHED_ATTRIBUTES, (code) => ({ code: code! }))

  return subscribe({
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
      decisions.inc(decisionLabels.get(message.limiter, decision.rule, result, decision.reason))
      if (result === 'queued') {
        queueWait.observe(
          limiterLabels.get(message.limiter, undefined, undefined, undefined),
          decision.waitMs / 1000,
        )
      }
    },
    [CHANNELS.http]: (message: HttpMessage) => {
      httpRequests.inc(httpLabels.get(message.limiter, message.action, message.route, undefined))
    },
    [CHANNELS.storeError]: (message: StoreErrorMessage) => {
      storeErrors.inc(codeLabels.get(errorCodeOf(message.error), undefined, undefined, undefined))
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
