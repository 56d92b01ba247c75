import { metrics } from '@opentelemetry/api'
import {
  type DataPoint,
  type Histogram,
  MeterProvider,
  type MetricData,
  MetricReader,
} from '@opentelemetry/sdk-metrics'
import { openTelemetryMetrics } from '@sluice/metrics'
import { afterEach, describe, expect, it } from 'vitest'
import { QUEUE_WAIT_BUCKETS, STORE_DURATION_BUCKETS } from '../src/shared.ts'
import { publishDecision, publishHttp, publishSettle, publishTrace, TRACE_KEYS } from './trace.ts'

/** A reader the test collects from on demand (cumulative temporality, the SDK's default). */
class CollectingReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

function setup() {
  const reader = new CollectingReader()
  const provider = new MeterProvider({ readers: [reader] })
  return { reader, provider, meter: provider.getMeter('test') }
}

async function collect(reader: MetricReader): Promise<Map<string, MetricData>> {
  const { resourceMetrics, errors } = await reader.collect()
  expect(errors).toEqual([])
  const out = new Map<string, MetricData>()
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) out.set(metric.descriptor.name, metric)
  }
  return out
}

/** Data points as `[attributes, value]`, sorted by their attributes, for exact comparison. */
function points(metric: MetricData | undefined): [Record<string, unknown>, unknown][] {
  if (metric === undefined) return []
  return (metric.dataPoints as DataPoint<unknown>[])
    .map((p): [Record<string, unknown>, unknown] => [p.attributes, p.value])
    .sort((a, b) => JSON.stringify(a[0]).localeCompare(JSON.stringify(b[0])))
}

function histogram(metric: MetricData | undefined): [Record<string, unknown>, number, number][] {
  return points(metric).map(([attributes, value]) => {
    const h = value as Histogram
    return [attributes, h.count, Math.round(h.sum! * 1e9) / 1e9]
  })
}

const closers: { close(): void }[] = []
afterEach(() => {
  for (const c of closers.splice(0)) c.close()
})

describe('openTelemetryMetrics', () => {
  it('counts consumes by limiter, rule, result and reason; peeks are not counted', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishTrace()
    const data = await collect(reader)
    const decision = (limiter: string, rule: string, result: string, reason: string) => ({
      'sluice.limiter': limiter,
      'sluice.rule': rule,
      'sluice.result': result,
      'sluice.reason': reason,
    })
    expect(points(data.get('sluice.decisions'))).toEqual(
      [
        [decision('api', '10-per-1s', 'allowed', 'rules'), 2],
        [decision('api', 'leaky', 'queued', 'rules'), 1],
        [decision('api', '10-per-1s', 'denied', 'rules'), 1],
        [decision('api', '10-per-1s', 'denied', 'cache'), 1],
        [decision('pay', '5-per-1s', 'allowed', 'store-error'), 1],
        [decision('pay', '5-per-1s', 'allowed', 'insurance'), 1],
        [decision('pay', 'unlimited', 'allowed', 'unlimited'), 1],
        [decision('pay', '5-per-1s', 'allowed', 'prefetch'), 1],
        [decision('pay', '5-per-1s', 'denied', 'blocked'), 1],
      ].sort((a, b) => JSON.stringify(a[0]).localeCompare(JSON.stringify(b[0]))),
    )
    expect(data.get('sluice.decisions')!.descriptor.unit).toBe('{decision}')
  })

  it('counts HTTP actions by limiter, action and route, leaving http.route out when unknown', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishTrace()
    const data = await collect(reader)
    expect(points(data.get('sluice.http.requests'))).toEqual([
      [{ 'sluice.limiter': 'api', 'sluice.action': 'allow', 'http.route': '/users/:id' }, 1],
      [{ 'sluice.limiter': 'api', 'sluice.action': 'deny', 'http.route': '/users/:id' }, 1],
      [{ 'sluice.limiter': 'api', 'sluice.action': 'queue', 'http.route': '/users/:id' }, 1],
      [{ 'sluice.limiter': 'api', 'sluice.action': 'reject' }, 1],
      [{ 'sluice.limiter': 'api', 'sluice.action': 'shadow' }, 1],
    ])
  })

  it('counts a request an overload guard shed (or a shadowed limit would have) as a denied decision with reason overload', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishHttp('api', '', 'deny', '/pay', { allowed: false, rule: '', reason: 'overload' })
    publishHttp('api', '', 'shadow', '/pay', { allowed: false, rule: '', reason: 'overload' })
    const data = await collect(reader)
    expect(points(data.get('sluice.decisions'))).toEqual([
      [
        {
          'sluice.limiter': 'api',
          'sluice.rule': '',
          'sluice.result': 'denied',
          'sluice.reason': 'overload',
        },
        2,
      ],
    ])
    expect(points(data.get('sluice.http.requests'))).toEqual([
      [{ 'sluice.limiter': 'api', 'sluice.action': 'deny', 'http.route': '/pay' }, 1],
      [{ 'sluice.limiter': 'api', 'sluice.action': 'shadow', 'http.route': '/pay' }, 1],
    ])
  })

  it('counts the units settles gave back or charged per rule, and the settles as HTTP actions', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishSettle('ai', '/v1/chat', { requests: 1, tokens: 4000 }, { requests: 1, tokens: 1200 })
    publishSettle('ai', '/v1/chat', { requests: 1, tokens: 4000 }, { requests: 1, tokens: 4500 })
    publishSettle('ai', undefined, { requests: 1, tokens: 100 }, { requests: 0, tokens: 100 })
    publishSettle('ai', undefined, { requests: 1, tokens: 100 }, {})
    const data = await collect(reader)
    const units = (rule: string, change: string) => ({
      'sluice.limiter': 'ai',
      'sluice.rule': rule,
      'sluice.settle.change': change,
    })
    expect(points(data.get('sluice.settle.units'))).toEqual([
      [units('requests', 'given_back'), 1],
      [units('tokens', 'charged'), 500],
      [units('tokens', 'given_back'), 2800],
    ])
    expect(data.get('sluice.settle.units')!.descriptor.unit).toBe('{unit}')
    expect(points(data.get('sluice.http.requests'))).toEqual([
      [{ 'sluice.limiter': 'ai', 'sluice.action': 'settle', 'http.route': '/v1/chat' }, 2],
      [{ 'sluice.limiter': 'ai', 'sluice.action': 'settle' }, 2],
    ])
  })

  it('records queue waits and store durations in seconds, and store errors by code', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishTrace()
    const data = await collect(reader)

    const wait = data.get('sluice.queue.wait')!
    expect(wait.descriptor.unit).toBe('s')
    expect(histogram(wait)).toEqual([[{ 'sluice.limiter': 'api' }, 1, 0.25]])
    expect((wait.dataPoints[0]!.value as Histogram).buckets.boundaries).toEqual(QUEUE_WAIT_BUCKETS)

    // api: 0.5 + 1.5 + 2 + 0.25 + 0.75 (the peek) ms; the cache denial never reached the store.
    // pay: the store-error and insurance decisions, 100 ms each; unlimited, prefetch and blocked did not.
    const store = data.get('sluice.store.duration')!
    expect(store.descriptor.unit).toBe('s')
    expect(histogram(store)).toEqual([
      [{ 'sluice.limiter': 'api' }, 5, 0.005],
      [{ 'sluice.limiter': 'pay' }, 2, 0.2],
    ])
    expect((store.dataPoints[0]!.value as Histogram).buckets.boundaries).toEqual(STORE_DURATION_BUCKETS)

    expect(points(data.get('sluice.store.errors'))).toEqual([
      [{ 'error.type': 'ERR_SLUICE_STORE_TIMEOUT' }, 2],
      [{ 'error.type': 'unknown' }, 1],
    ])
  })

  it('never puts a key in an attribute', async () => {
    const { reader, meter } = setup()
    closers.push(openTelemetryMetrics({ meter }))
    publishTrace()
    const data = await collect(reader)
    const attributes = JSON.stringify([...data.values()].map((m) => m.dataPoints.map((p) => p.attributes)))
    expect(attributes).toContain('sluice.limiter')
    for (const key of TRACE_KEYS) expect(attributes).not.toContain(key)
  })

  it('stops counting on close(), and close() twice does nothing', async () => {
    const { reader, meter } = setup()
    const subscription = openTelemetryMetrics({ meter })
    publishDecision('api', 'k1')
    subscription.close()
    subscription.close()
    publishDecision('api', 'k2')
    publishHttp('api', 'k2', 'allow', '/')
    const data = await collect(reader)
    expect(points(data.get('sluice.decisions')).map(([, v]) => v)).toEqual([1])
    expect(points(data.get('sluice.http.requests'))).toEqual([])
  })

  it('shares one subscription per meter: two calls count once, until both are closed', async () => {
    const { reader, meter } = setup()
    const first = openTelemetryMetrics({ meter })
    const second = openTelemetryMetrics({ meter })
    publishDecision('api', 'k')
    first.close()
    first.close() // releases its share once only
    publishDecision('api', 'k')
    second.close()
    publishDecision('api', 'k')
    const data = await collect(reader)
    expect(points(data.get('sluice.decisions')).map(([, v]) => v)).toEqual([2])
  })

  it('uses the global meter provider when no meter is given', async () => {
    const { reader, provider } = setup()
    expect(metrics.setGlobalMeterProvider(provider)).toBe(true)
    try {
      closers.push(openTelemetryMetrics())
      publishDecision('api', 'k', { allowed: false })
      const { resourceMetrics } = await reader.collect()
      const scope = resourceMetrics.scopeMetrics[0]!
      expect(scope.scope.name).toBe('@sluice/metrics')
      expect(scope.scope.version).toBe('0.1.0')
      const decisions = scope.metrics.find((m) => m.descriptor.name === 'sluice.decisions')
      expect(decisions?.dataPoints.map((p) => [p.attributes['sluice.result'], p.value])).toEqual([
        ['denied', 1],
      ])
    } finally {
      metrics.disable()
    }
  })
})
