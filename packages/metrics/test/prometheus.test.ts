import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { ErrorCode, InvalidOptionError } from '@sluice/core'
import { prometheusMetrics } from '@sluice/metrics'
import { Counter, type MetricObjectWithValues, type MetricValue, Registry, register } from 'prom-client'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { QUEUE_WAIT_BUCKETS, STORE_DURATION_BUCKETS } from '../src/shared.ts'
import { publishDecision, publishHttp, publishSettle, publishTrace, TRACE_KEYS } from './trace.ts'

const closers: { close(): void }[] = []
afterEach(() => {
  for (const c of closers.splice(0)) c.close()
})

async function metricsOf(
  registry: Registry,
): Promise<Map<string, MetricObjectWithValues<MetricValue<string>>>> {
  const out = new Map<string, MetricObjectWithValues<MetricValue<string>>>()
  for (const metric of await registry.getMetricsAsJSON()) out.set(metric.name, metric)
  return out
}

/** `[labels, value]` of every sample named `sample` (default: the metric's own), sorted by labels. */
function samples(
  metric: MetricObjectWithValues<MetricValue<string>> | undefined,
  sample?: string,
): [Record<string, unknown>, number][] {
  return (metric?.values ?? [])
    .filter((v) => sample === undefined || (v as { metricName?: string }).metricName === sample)
    .map((v): [Record<string, unknown>, number] => [{ ...v.labels }, Math.round(v.value * 1e9) / 1e9])
    .sort((a, b) => JSON.stringify(a[0]).localeCompare(JSON.stringify(b[0])))
}

const byLabels = (a: [Record<string, unknown>, number], b: [Record<string, unknown>, number]) =>
  JSON.stringify(a[0]).localeCompare(JSON.stringify(b[0]))

describe('prometheusMetrics', () => {
  it('past its 10,000 series, new routes cost no memory: bounded means bounded memory', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    for (let i = 0; i < 10_000; i++) publishHttp('api', 'k', 'allow', `/r/${i}`)
    gc()
    const before = process.memoryUsage().heapUsed
    // Each route a new string never seen again, as a scanner's URLs would be without a route template.
    for (let i = 0; i < 300_000; i++) publishHttp('api', 'k', 'allow', `/scan/${i}/${'x'.repeat(20)}`)
    gc()
    const grown = process.memoryUsage().heapUsed - before
    // The old index kept a map entry per new route: about 87 MB here.
    expect(grown).toBeLessThan(20 * 1024 * 1024)
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('new ones are not counted'), {
      code: 'SLUICE_METRICS_CARDINALITY',
    })
    expect((await metricsOf(registry)).get('sluice_http_requests_total')?.values).toHaveLength(10_000)
    warn.mockRestore()
  }, 120_000)

  it('counts consumes by limiter, rule, result and reason; peeks are not counted', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishTrace()
    const decisions = (await metricsOf(registry)).get('sluice_decisions_total')
    expect(decisions?.type).toBe('counter')
    const d = (limiter: string, rule: string, result: string, reason: string) => ({
      limiter,
      rule,
      result,
      reason,
    })
    expect(samples(decisions)).toEqual(
      (
        [
          [d('api', '10-per-1s', 'allowed', 'rules'), 2],
          [d('api', 'leaky', 'queued', 'rules'), 1],
          [d('api', '10-per-1s', 'denied', 'rules'), 1],
          [d('api', '10-per-1s', 'denied', 'cache'), 1],
          [d('pay', '5-per-1s', 'allowed', 'store-error'), 1],
          [d('pay', '5-per-1s', 'allowed', 'insurance'), 1],
          [d('pay', 'unlimited', 'allowed', 'unlimited'), 1],
          [d('pay', '5-per-1s', 'allowed', 'prefetch'), 1],
          [d('pay', '5-per-1s', 'denied', 'blocked'), 1],
        ] as [Record<string, unknown>, number][]
      ).sort(byLabels),
    )
  })

  it('counts HTTP actions by limiter, action and route (empty when unknown), and store errors by code', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishTrace()
    const all = await metricsOf(registry)
    expect(samples(all.get('sluice_http_requests_total'))).toEqual([
      [{ limiter: 'api', action: 'allow', route: '/users/:id' }, 1],
      [{ limiter: 'api', action: 'deny', route: '/users/:id' }, 1],
      [{ limiter: 'api', action: 'queue', route: '/users/:id' }, 1],
      [{ limiter: 'api', action: 'reject', route: '' }, 1],
      [{ limiter: 'api', action: 'shadow', route: '' }, 1],
    ])
    expect(samples(all.get('sluice_store_errors_total'))).toEqual([
      [{ code: 'ERR_SLUICE_STORE_TIMEOUT' }, 2],
      [{ code: 'unknown' }, 1],
    ])
  })

  it('counts a request an overload guard shed (or a shadowed limit would have) as a denied decision with reason overload', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishHttp('api', '', 'deny', '/pay', { allowed: false, rule: '', reason: 'overload' })
    publishHttp('api', '', 'shadow', '/pay', { allowed: false, rule: '', reason: 'overload' })
    const all = await metricsOf(registry)
    expect(samples(all.get('sluice_decisions_total'))).toEqual([
      [{ limiter: 'api', rule: '', result: 'denied', reason: 'overload' }, 2],
    ])
    expect(samples(all.get('sluice_http_requests_total'))).toEqual([
      [{ limiter: 'api', action: 'deny', route: '/pay' }, 1],
      [{ limiter: 'api', action: 'shadow', route: '/pay' }, 1],
    ])
  })

  it('counts the units settles gave back or charged per rule, and the settles as HTTP actions', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishSettle('ai', '/v1/chat', { requests: 1, tokens: 4000 }, { requests: 1, tokens: 1200 })
    publishSettle('ai', '/v1/chat', { requests: 1, tokens: 4000 }, { requests: 1, tokens: 4500 })
    publishSettle('ai', undefined, { requests: 1, tokens: 100 }, { requests: 0, tokens: 100 })
    publishSettle('ai', undefined, { requests: 1, tokens: 100 }, {})
    const all = await metricsOf(registry)
    expect(samples(all.get('sluice_settle_units_total'))).toEqual([
      [{ limiter: 'ai', rule: 'requests', change: 'given_back' }, 1],
      [{ limiter: 'ai', rule: 'tokens', change: 'charged' }, 500],
      [{ limiter: 'ai', rule: 'tokens', change: 'given_back' }, 2800],
    ])
    expect(samples(all.get('sluice_http_requests_total'))).toEqual([
      [{ limiter: 'ai', action: 'settle', route: '' }, 2],
      [{ limiter: 'ai', action: 'settle', route: '/v1/chat' }, 2],
    ])
    // A second scrape adds nothing that was not counted since.
    publishSettle('ai', '/v1/chat', { tokens: 10 }, { tokens: 4 })
    expect(samples((await metricsOf(registry)).get('sluice_settle_units_total'))).toEqual([
      [{ limiter: 'ai', rule: 'requests', change: 'given_back' }, 1],
      [{ limiter: 'ai', rule: 'tokens', change: 'charged' }, 500],
      [{ limiter: 'ai', rule: 'tokens', change: 'given_back' }, 2806],
    ])
  })

  it('records queue waits and store durations in seconds, in the documented buckets', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishTrace()
    const all = await metricsOf(registry)
    const wait = all.get('sluice_queue_wait_seconds')
    expect(wait?.type).toBe('histogram')
    expect(samples(wait, 'sluice_queue_wait_seconds_count')).toEqual([[{ limiter: 'api' }, 1]])
    expect(samples(wait, 'sluice_queue_wait_seconds_sum')).toEqual([[{ limiter: 'api' }, 0.25]])
    expect(new Set(samples(wait, 'sluice_queue_wait_seconds_bucket').map(([labels]) => labels.le))).toEqual(
      new Set([...QUEUE_WAIT_BUCKETS, '+Inf']),
    )
    // 0.25 s: in every bucket from le=0.25 up.
    const waitBuckets = new Map(
      samples(wait, 'sluice_queue_wait_seconds_bucket').map(([labels, value]) => [labels.le, value]),
    )
    expect([waitBuckets.get(0.1), waitBuckets.get(0.25), waitBuckets.get('+Inf')]).toEqual([0, 1, 1])

    const store = all.get('sluice_store_duration_seconds')
    expect(samples(store, 'sluice_store_duration_seconds_count')).toEqual([
      [{ limiter: 'api' }, 5],
      [{ limiter: 'pay' }, 2],
    ])
    expect(samples(store, 'sluice_store_duration_seconds_sum')).toEqual([
      [{ limiter: 'api' }, 0.005],
      [{ limiter: 'pay' }, 0.2],
    ])
    expect(
      new Set(samples(store, 'sluice_store_duration_seconds_bucket').map(([labels]) => labels.le)),
    ).toEqual(new Set([...STORE_DURATION_BUCKETS, '+Inf']))
  })

  it('never puts a key in a label', async () => {
    const registry = new Registry()
    closers.push(prometheusMetrics({ registry }))
    publishTrace()
    const text = await registry.metrics()
    expect(text).toContain('sluice_decisions_total{limiter="api"')
    for (const key of TRACE_KEYS) expect(text).not.toContain(key)
  })

  it('stops counting on close()', async () => {
    const registry = new Registry()
    const subscription = prometheusMetrics({ registry })
    publishDecision('api', 'k')
    subscription.close()
    publishDecision('api', 'k')
    expect(samples((await metricsOf(registry)).get('sluice_decisions_total')).map(([, v]) => v)).toEqual([1])
  })

  it('registers twice on one registry without throwing or counting twice', async () => {
    const registry = new Registry()
    const first = prometheusMetrics({ registry })
    const second = prometheusMetrics({ registry })
    publishDecision('api', 'k')
    first.close()
    publishDecision('api', 'k')
    second.close()
    publishDecision('api', 'k')
    expect(samples((await metricsOf(registry)).get('sluice_decisions_total')).map(([, v]) => v)).toEqual([2])
    // Subscribing again reuses the metrics already on the registry.
    closers.push(prometheusMetrics({ registry }))
    publishDecision('api', 'k')
    expect(samples((await metricsOf(registry)).get('sluice_decisions_total')).map(([, v]) => v)).toEqual([3])
  })

  it('rejects a registry holding another metric under one of its names', () => {
    const registry = new Registry()
    new Counter({
      name: 'sluice_decisions_total',
      help: 'not ours',
      labelNames: ['other'],
      registers: [registry],
    })
    let error: unknown
    try {
      prometheusMetrics({ registry })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'prometheusMetrics.registry' })
  })

  it("registers on prom-client's global registry by default", async () => {
    const names = [
      'sluice_decisions_total',
      'sluice_http_requests_total',
      'sluice_queue_wait_seconds',
      'sluice_store_duration_seconds',
      'sluice_store_errors_total',
      'sluice_settle_units_total',
    ]
    const subscription = prometheusMetrics()
    try {
      publishDecision('api', 'k', { allowed: false })
      expect(samples((await metricsOf(register)).get('sluice_decisions_total'))).toEqual([
        [{ limiter: 'api', rule: '10-per-1s', result: 'denied', reason: 'rules' }, 1],
      ])
    } finally {
      subscription.close()
      for (const name of names) register.removeSingleMetric(name)
    }
  })
})
