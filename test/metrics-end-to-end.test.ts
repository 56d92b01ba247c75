/**
 * The metric sinks on what core itself publishes: real Express requests through real limits (one on a
 * real redis-server, whose denied-key cache answers a hot key), a store that fails, a queue and a shadowed
 * limit; a real OpenTelemetry SDK and a real prom-client registry; exact counts per result and reason.
 */
import diagnostics from 'node:diagnostics_channel'
import { type DataPoint, MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics'
import { fixedWindow, leakyBucket, MemoryStore, type Store } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { liveStats, openTelemetryMetrics, prometheusMetrics } from '@sluice/metrics'
import { RedisStore } from '@sluice/redis'
import { Registry } from 'prom-client'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { flavours, listen } from '../packages/express/test/support.ts'
import { closeClients, ioredis } from './harness/clients.ts'
import { startRedis, stopAll } from './harness/redis.ts'

const express = flavours[0].express

class CollectingReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** Attributes as text with their names in order, so two orders of one set compare equal. */
const canonical = (attributes: unknown) => JSON.stringify(Object.entries(attributes as object).sort())

/** `[attributes, value]` of every point, sorted, for exact comparison. */
function points(metric: MetricData | undefined): unknown[][] {
  return sorted(((metric?.dataPoints ?? []) as DataPoint<unknown>[]).map((p) => [p.attributes, p.value]))
}

function sorted(list: unknown[][]): unknown[][] {
  return list.sort((a, b) => canonical(a[0]).localeCompare(canonical(b[0])))
}

describe('metrics from real decisions', () => {
  it('counts allowed, queued, denied, cache, store-error and shadow exactly, in OpenTelemetry and Prometheus', async () => {
    const reader = new CollectingReader()
    const meter = new MeterProvider({ readers: [reader] }).getMeter('test')
    const registry = new Registry()
    const stats = liveStats()
    const sinks = [openTelemetryMetrics({ meter }), prometheusMetrics({ registry }), stats]

    const client = await ioredis(await startRedis())
    const failing: Store = { apply: () => Promise.reject(new Error('down')), reset: () => undefined }
    const app = express()
    const one = (windowMs: number) => [fixedWindow({ limit: 1, windowMs })]
    app.get(
      '/api',
      rateLimit({
        rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
        store: new RedisStore({ client }),
        prefix: 'api',
      }),
      (_req, res) => res.end(),
    )
    app.get(
      '/queue',
      rateLimit({ rules: [leakyBucket({ ratePerSecond: 10, maxQueueMs: 1000 })], prefix: 'queue' }),
      (_req, res) => res.end(),
    )
    app.get('/shadow', rateLimit({ rules: one(60_000), prefix: 'shadow', shadow: true }), (_req, res) =>
      res.end(),
    )
    app.get(
      '/down',
      rateLimit({ rules: one(60_000), store: failing, prefix: 'down', onStoreError: 'deny' }),
      (_req, res) => res.end(),
    )
    app.get(
      '/free',
      rateLimit({ rules: one(60_000), store: new MemoryStore(), prefix: 'free' }),
      (_req, res) => res.end(),
    )
    const server = await listen(app)
    try {
      const statuses: number[] = []
      const get = async (path: string) => statuses.push((await fetch(`${server.url}${path}`)).status)
      // Two admitted, one denied in Redis, one answered from the denied-key cache.
      for (let i = 0; i < 4; i++) await get('/api')
      // The second waits 100 ms for its slot.
      await Promise.all([get('/queue'), get('/queue')])
      // The second would be denied: shadowed, it goes through.
      await get('/shadow')
      await get('/shadow')
      await get('/down')
      expect(statuses).toEqual([200, 200, 429, 429, 200, 200, 200, 200, 429])
    } finally {
      await server.close()
    }

    const { resourceMetrics } = await reader.collect()
    const byName = new Map(
      resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]),
    )
    const decision = (limiter: string, rule: string, result: string, reason: string, n: number) => [
      { 'sluice.limiter': limiter, 'sluice.reason': reason, 'sluice.result': result, 'sluice.rule': rule },
      n,
    ]
    const sorted = (list: unknown[][]) =>
      list.sort((a, b) => JSON.stringify(a[0]).localeCompare(JSON.stringify(b[0])))
    expect(points(byName.get('sluice.decisions'))).toEqual(
      sorted([
        decision('api', '2-per-60s', 'allowed', 'rules', 2),
        decision('api', '2-per-60s', 'denied', 'rules', 1),
        decision('api', '2-per-60s', 'denied', 'cache', 1),
        decision('queue', '10-per-s-queue-1000ms', 'allowed', 'rules', 1),
        decision('queue', '10-per-s-queue-1000ms', 'queued', 'rules', 1),
        decision('shadow', '1-per-60s', 'allowed', 'rules', 1),
        decision('shadow', '1-per-60s', 'denied', 'rules', 1),
        decision('down', '', 'denied', 'store-error', 1),
      ]),
    )
    const http = (limiter: string, action: string, route: string, n: number) => [
      { 'http.route': route, 'sluice.action': action, 'sluice.limiter': limiter },
      n,
    ]
    expect(points(byName.get('sluice.http.requests'))).toEqual(
      sorted([
        http('api', 'allow', 'GET /api', 2),
        http('api', 'deny', 'GET /api', 2),
        http('queue', 'allow', 'GET /queue', 1),
        http('queue', 'queue', 'GET /queue', 1),
        http('shadow', 'allow', 'GET /shadow', 1),
        http('shadow', 'shadow', 'GET /shadow', 1),
        http('down', 'deny', 'GET /down', 1),
      ]),
    )
    expect(points(byName.get('sluice.store.errors'))).toEqual([[{ 'error.type': 'ERR_SLUICE_STORE' }, 1]])

    const prom = await registry.getSingleMetric('sluice_decisions_total')!.get()
    const line = (labels: Record<string, string>) =>
      prom.values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value))?.value
    expect(line({ limiter: 'api', result: 'denied', reason: 'cache' })).toBe(1)
    expect(line({ limiter: 'api', result: 'allowed', reason: 'rules' })).toBe(2)
    expect(line({ limiter: 'queue', result: 'queued' })).toBe(1)
    expect(line({ limiter: 'down', reason: 'store-error' })).toBe(1)
    expect(prom.values.reduce((sum, v) => sum + v.value, 0)).toBe(9)

    // The live statistics saw the same trace.
    const totals = (limiter: string) => {
      const series = stats.snapshot().limiters[limiter]!.series
      const sum = (field: 'allowed' | 'queued' | 'denied' | 'shadow') =>
        series.reduce((s, b) => s + b[field], 0)
      return [sum('allowed'), sum('queued'), sum('denied'), sum('shadow')]
    }
    expect(totals('api')).toEqual([2, 0, 2, 0])
    expect(totals('queue')).toEqual([1, 1, 0, 0])
    expect(totals('shadow')).toEqual([1, 0, 1, 1])
    expect(stats.snapshot().limiters.api!.topDenied).toEqual([{ key: '127.0.0.1', count: 2 }])
    for (const sink of sinks) sink.close()
  })

  it('counts the units settles gave back or charged, from the settle option and a handler settle, on a real Redis store', async () => {
    const reader = new CollectingReader()
    const meter = new MeterProvider({ readers: [reader] }).getMeter('test')
    const registry = new Registry()
    const sinks = [openTelemetryMetrics({ meter }), prometheusMetrics({ registry })]
    const client = await ioredis(await startRedis())
    const budget = () => [
      fixedWindow({ limit: 10, windowMs: 60_000, name: 'requests' }),
      fixedWindow({ limit: 1000, windowMs: 60_000, name: 'tokens' }),
    ]
    // A still clock: the request and its settle fall in one window, whenever the test runs.
    const clock = () => 1_000_020_000
    const settles: unknown[] = []
    const listener = (message: unknown) => {
      if ((message as { action?: string }).action === 'settle') settles.push(message)
    }
    diagnostics.subscribe('sluice:http', listener)
    const app = express()
    app.post(
      '/v1/chat',
      rateLimit({
        rules: budget(),
        store: new RedisStore({ client, prefix: 'settle-option', clock }),
        prefix: 'ai',
        cost: () => ({ tokens: 400 }),
        settle: () => ({ tokens: 150 }),
      }),
      (_req, res) => res.end(),
    )
    app.post(
      '/v1/exact',
      rateLimit({
        rules: budget(),
        store: new RedisStore({ client, prefix: 'settle-handler', clock }),
        prefix: 'exact',
        cost: () => ({ tokens: 400 }),
      }),
      async (req, res) => {
        const after = await req.rateLimit!.settle({ tokens: 900 })
        res.json({ remaining: after.rules.map((r) => r.remaining) })
      },
    )
    const server = await listen(app)
    try {
      expect((await fetch(`${server.url}/v1/chat`, { method: 'POST' })).status).toBe(200)
      const exact = await fetch(`${server.url}/v1/exact`, { method: 'POST' })
      expect(await exact.json()).toEqual({ remaining: [8, 99] })
      await vi.waitFor(() => expect(settles).toHaveLength(2))
    } finally {
      diagnostics.unsubscribe('sluice:http', listener)
      await server.close()
    }

    const { resourceMetrics } = await reader.collect()
    const byName = new Map(
      resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]),
    )
    expect(points(byName.get('sluice.settle.units'))).toEqual(
      sorted([
        [{ 'sluice.limiter': 'ai', 'sluice.rule': 'tokens', 'sluice.settle.change': 'given_back' }, 250],
        [{ 'sluice.limiter': 'exact', 'sluice.rule': 'tokens', 'sluice.settle.change': 'charged' }, 500],
      ]),
    )
    const http = (limiter: string, action: string, route: string) => [
      { 'http.route': route, 'sluice.action': action, 'sluice.limiter': limiter },
      1,
    ]
    expect(points(byName.get('sluice.http.requests'))).toEqual(
      sorted([
        http('ai', 'allow', 'POST /v1/chat'),
        http('ai', 'settle', 'POST /v1/chat'),
        http('exact', 'allow', 'POST /v1/exact'),
        http('exact', 'settle', 'POST /v1/exact'),
      ]),
    )
    const prom = await registry.getSingleMetric('sluice_settle_units_total')!.get()
    expect(sorted(prom.values.map((v) => [{ ...v.labels }, v.value]))).toEqual(
      sorted([
        [{ limiter: 'ai', rule: 'tokens', change: 'given_back' }, 250],
        [{ limiter: 'exact', rule: 'tokens', change: 'charged' }, 500],
      ]),
    )
    for (const sink of sinks) sink.close()
  })
})
