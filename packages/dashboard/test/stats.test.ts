/**
 * `GET api/stats`: every instance's published series combined second by second, the most denied keys
 * summed, 15 minutes of history served from what the publishers hold in Redis (so a new dashboard, or a
 * restarted one, shows it all at once), the local `liveStats`, `?since=`, Redis being away, and
 * `startDashboard` on a Redis URL.
 */
import { createLimiter, fixedWindow, MemoryStore } from '@sluice/core'
import {
  DashboardError,
  DashboardErrorCode,
  dashboard,
  type StatsView,
  startDashboard,
} from '@sluice/dashboard'
import { type LiveStatsSnapshot, liveStats, publishStats, type StatsPublisher } from '@sluice/metrics'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { combineSnapshots, type InstanceSnapshot } from '../src/stats.ts'
import { closeServers, send, serve } from './http.ts'

const T0 = 1_800_000_000 // a second since the epoch

/** A snapshot of `seconds` seconds ending at `until`, with `counts(t)` per second for limiter `name`. */
function snapshot(
  instance: string,
  until: number,
  seconds: number,
  limiters: Record<
    string,
    {
      counts: (t: number) => Partial<Record<'allowed' | 'queued' | 'denied' | 'shadow', number>>
      top?: [string, number][]
    }
  >,
  meta: Record<string, unknown> = {},
): InstanceSnapshot {
  const out: LiveStatsSnapshot['limiters'] = {}
  for (const [name, { counts, top = [] }] of Object.entries(limiters)) {
    const series = []
    for (let t = until - seconds + 1; t <= until; t++) {
      series.push({ t, allowed: 0, queued: 0, denied: 0, shadow: 0, ...counts(t) })
    }
    out[name] = { series, topDenied: top.map(([key, count]) => ({ key, count })) }
  }
  return { at: until * 1000 + 400, seconds, limiters: out, instance, meta }
}

describe('combineSnapshots with a bad or skewed publisher (issue 25)', () => {
  const options = { maxSeconds: 900, topKeys: 5 }
  const healthy = () => snapshot('healthy', T0, 60, { api: { counts: () => ({ allowed: 2 }) } })

  it('one malformed snapshot (limiters: { x: null }, series: [null]) answers, and the healthy ones still count', () => {
    const bad = [
      { ...healthy(), instance: 'null-limiter', limiters: { x: null } },
      {
        ...healthy(),
        instance: 'null-point',
        limiters: { api: { series: [null, { t: 'x' }], topDenied: [null, 5] } },
      },
    ] as unknown as InstanceSnapshot[]
    const view = combineSnapshots([healthy(), ...bad], T0 * 1000 + 500, options)
    const api = view.limiters.find((l) => l.limiter === 'api')!
    expect(api.series.reduce((n, p) => n + p.allowed, 0)).toBe(120)
    expect(view.instances.map((i) => i.instance)).toEqual(['healthy', 'null-limiter', 'null-point'])
  })

  it('a publisher 2 or 20 minutes fast, or far in the future, hides no healthy instance nor its chart', () => {
    for (const skew of [120, 1200, 10 ** 9]) {
      const fast = snapshot('fast', T0 + skew, 60, { api: { counts: () => ({ denied: 1 }) } })
      const view = combineSnapshots([healthy(), fast], T0 * 1000 + 500, options)
      expect(view.until, String(skew)).toBe(T0)
      const api = view.limiters.find((l) => l.limiter === 'api')!
      expect(api.series.reduce((n, p) => n + p.allowed, 0)).toBe(120)
      expect(api.series.reduce((n, p) => n + p.denied, 0)).toBe(60)
      expect(view.instances.map((i) => [i.instance, i.lastSeen])).toEqual([
        ['fast', T0 * 1000 + 400],
        ['healthy', T0 * 1000 + 400],
      ])
    }
  })
})

describe('combineSnapshots within the bound of one answer (issue 45 item 1)', () => {
  it('shows as many limiters as fit the span, the same ones on a poll for a few seconds, and says how many it left out', () => {
    const wide = (instance: string) => {
      const limiters: Parameters<typeof snapshot>[3] = {}
      for (let i = 0; i < 200; i++)
        limiters[`${instance}-${String(i).padStart(3, '0')}`] = {
          counts: () => ({ allowed: 1 }),
          top: [['k', 1]],
        }
      return snapshot(instance, T0, 900, limiters)
    }
    const snapshots = [wide('a'), wide('b'), wide('c')]
    const all = combineSnapshots(snapshots, T0 * 1000 + 500, { maxSeconds: 900, topKeys: 1000 })
    // 120,000 points at 900 seconds: 133 limiters, the first by name.
    expect(all.limiters).toHaveLength(133)
    expect(all.limiters[0]!.limiter).toBe('a-000')
    expect(all.limiters.at(-1)!.limiter).toBe('a-132')
    expect(all.omittedLimiters).toBe(600 - 133)
    expect(all.limiters.reduce((n, l) => n + l.series.length, 0)).toBe(133 * 900)
    // 4000 denied keys over every limiter: 30 each at most, here the one each holds.
    expect(all.limiters.every((l) => l.topDenied.length === 1)).toBe(true)
    expect(all.instances[0]).toMatchObject({ instance: 'a', limiterCount: 200 })
    expect(all.instances[0]!.limiters).toHaveLength(50)
    const recent = combineSnapshots(snapshots, T0 * 1000 + 500, {
      maxSeconds: 900,
      topKeys: 1000,
      since: T0 - 5,
    })
    expect(recent.limiters.map((l) => l.limiter)).toEqual(all.limiters.map((l) => l.limiter))
    expect(recent.omittedLimiters).toBe(600 - 133)
  })
})

describe('combineSnapshots', () => {
  it('sums instances second by second over the longest history held, at most maxSeconds', () => {
    const a = snapshot('a', T0, 900, { api: { counts: (t) => ({ allowed: 2, denied: t === T0 ? 5 : 0 }) } })
    // b publishes a second later and keeps only 300 s.
    const b = snapshot('b', T0 + 1, 300, {
      api: { counts: () => ({ allowed: 1, queued: 1, shadow: 1 }) },
      pay: { counts: () => ({ denied: 3 }) },
    })
    const view = combineSnapshots([b, a], T0 * 1000, { maxSeconds: 900, topKeys: 20 })
    expect(view.until).toBe(T0 + 1)
    expect(view.seconds).toBe(900)
    expect(view.instances.map((i) => [i.instance, i.seconds, i.limiters])).toEqual([
      ['a', 900, ['api']],
      ['b', 300, ['api', 'pay']],
    ])
    const api = view.limiters.find((l) => l.limiter === 'api')!
    expect(api.series).toHaveLength(900)
    expect(api.series[0]!.t).toBe(T0 + 1 - 899)
    // The oldest seconds only a holds; the last 300 both; the very last only b.
    expect(api.series[0]).toEqual({ t: T0 - 898, allowed: 2, queued: 0, denied: 0, shadow: 0 })
    expect(api.series[898]).toEqual({ t: T0, allowed: 3, queued: 1, denied: 5, shadow: 1 })
    expect(api.series[899]).toEqual({ t: T0 + 1, allowed: 1, queued: 1, denied: 0, shadow: 1 })
    expect(api.instances).toEqual(['a', 'b'])
    expect(view.limiters.map((l) => l.limiter)).toEqual(['api', 'pay'])

    const short = combineSnapshots([a, b], T0 * 1000, { maxSeconds: 60, topKeys: 20 })
    expect(short.seconds).toBe(60)
    expect(short.limiters[0]!.series).toHaveLength(60)
  })

  it('sums the most denied keys over instances, most first, at most topKeys', () => {
    const a = snapshot('a', T0, 10, {
      api: {
        counts: () => ({}),
        top: [
          ['k1', 5],
          ['k2', 4],
          ['k3', 1],
        ],
      },
    })
    const b = snapshot('b', T0, 10, {
      api: {
        counts: () => ({}),
        top: [
          ['k2', 4],
          ['k4', 2],
        ],
      },
    })
    const view = combineSnapshots([a, b], T0 * 1000, { maxSeconds: 900, topKeys: 3 })
    expect(view.limiters[0]!.topDenied).toEqual([
      { key: 'k2', count: 8 },
      { key: 'k1', count: 5 },
      { key: 'k4', count: 2 },
    ])
  })

  it('answers only the seconds after `since`', () => {
    const a = snapshot('a', T0, 900, { api: { counts: (t) => ({ allowed: t - T0 + 10 }) } })
    const view = combineSnapshots([a], T0 * 1000, { maxSeconds: 900, topKeys: 20, since: T0 - 3 })
    expect(view.limiters[0]!.series.map((p) => [p.t, p.allowed])).toEqual([
      [T0 - 2, 8],
      [T0 - 1, 9],
      [T0, 10],
    ])
  })

  it('skips snapshots whose figures cannot be trusted, and counts that are not counts', () => {
    const good = snapshot('good', T0, 10, { api: { counts: () => ({ allowed: 1 }) } })
    const bad = { ...snapshot('bad', T0, 10, {}), at: Number.NaN }
    const odd = snapshot('odd', T0, 10, {
      api: { counts: () => ({ allowed: -5, denied: Number.POSITIVE_INFINITY }) },
    })
    const view = combineSnapshots([good, bad, odd, { ...good, instance: 'big', seconds: 1e9 }], T0 * 1000, {
      maxSeconds: 900,
      topKeys: 20,
    })
    expect(view.instances.map((i) => i.instance)).toEqual(['good', 'odd'])
    expect(view.limiters[0]!.series.at(-1)).toEqual({ t: T0, allowed: 1, queued: 0, denied: 0, shadow: 0 })
  })

  it('answers an empty view when nothing reported', () => {
    expect(combineSnapshots([], 5, { maxSeconds: 900, topKeys: 20 })).toEqual({
      at: 5,
      until: 0,
      seconds: 0,
      instances: [],
      limiters: [],
    })
  })
})

describe('api/stats from Redis', () => {
  let server: RedisServer
  let client: Redis
  const publishers: StatsPublisher[] = []
  const access = () => 'read' as const

  beforeAll(async () => {
    server = await startRedis()
    client = new Redis({ host: server.host, port: server.port, lazyConnect: true })
    await client.connect()
  })
  afterEach(async () => {
    for (const p of publishers.splice(0)) await p.close()
    await closeServers()
  })
  afterAll(async () => {
    client.disconnect()
    await stopAll()
  })

  it('shows 15 minutes of every process, from what the processes publish: a restarted dashboard loses nothing', async () => {
    const now = Math.floor(Date.now() / 1000)
    for (const [instance, rate] of [
      ['worker-1', 3],
      ['worker-2', 4],
    ] as const) {
      const snap = snapshot(instance, now, 900, {
        api: {
          counts: (t) => ({ allowed: rate, denied: t % 60 === 0 ? 1 : 0 }),
          top: [[`key-${instance}`, rate]],
        },
      })
      publishers.push(
        publishStats({
          stats: { snapshot: () => snap },
          client,
          instance,
          meta: { tableVersion: rate },
          intervalMs: 100_000,
        }),
      )
      await publishers.at(-1)!.publishNow()
    }
    const first = await serve(dashboard({ access, client }))
    const view = (await send(`${first}/api/stats`)).json as StatsView
    expect(view.seconds).toBe(900)
    expect(view.instances.map((i) => [i.instance, i.meta])).toEqual([
      ['worker-1', { tableVersion: 3 }],
      ['worker-2', { tableVersion: 4 }],
    ])
    const api = view.limiters[0]!
    expect(api.series).toHaveLength(900)
    expect(api.series.every((p) => p.allowed === 7)).toBe(true)
    expect(api.series.reduce((n, p) => n + p.denied, 0)).toBe(2 * 15)
    expect(api.topDenied).toEqual([
      { key: 'key-worker-2', count: 4 },
      { key: 'key-worker-1', count: 3 },
    ])

    // Another dashboard (or this one restarted) reads the same 15 minutes at once.
    await closeServers()
    const second = await serve(dashboard({ access, client }))
    expect(((await send(`${second}/api/stats`)).json as StatsView).limiters).toEqual(view.limiters)
  })

  it('shows real decisions: liveStats in a publisher, and a local liveStats beside Redis', async () => {
    const stats = liveStats({ seconds: 900 })
    try {
      const limiter = createLimiter({
        rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
        store: new MemoryStore(),
        prefix: 'checkout',
      })
      for (let i = 0; i < 5; i++) await limiter.consume('<b>bold</b>')
      publishers.push(publishStats({ stats, client, instance: 'published', intervalMs: 100_000 }))
      await publishers[0]!.publishNow()
      const url = await serve(dashboard({ access, client, stats, instance: 'here' }))
      const view = (await send(`${url}/api/stats`)).json as StatsView
      expect(view.instances.map((i) => i.instance)).toEqual(['here', 'published'])
      const checkout = view.limiters.find((l) => l.limiter === 'checkout')!
      const total = checkout.series.reduce(
        (n, p) => ({ allowed: n.allowed + p.allowed, denied: n.denied + p.denied }),
        {
          allowed: 0,
          denied: 0,
        },
      )
      // Counted twice: by the local stats and by the published copy of the same stats.
      expect(total).toEqual({ allowed: 4, denied: 6 })
      expect(checkout.topDenied).toEqual([{ key: '<b>bold</b>', count: 6 }])
    } finally {
      stats.close()
    }
  })

  it('still answers with the local stats, and says so, when Redis is away', async () => {
    const away = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    })
    away.on('error', () => {})
    const stats = liveStats()
    try {
      const url = await serve(dashboard({ access, client: away, stats }))
      const view = (await send(`${url}/api/stats`)).json
      expect(view.redisError).toEqual({
        code: DashboardErrorCode.UNAVAILABLE,
        message: expect.stringMatching(/^Redis: /),
      })
      expect(view.instances.map((i: { instance: string }) => i.instance)).toEqual(['local'])
    } finally {
      stats.close()
      away.disconnect()
    }
  })

  it('refuses a malformed since', async () => {
    const url = await serve(dashboard({ access, client }))
    const reply = await send(`${url}/api/stats?since=yesterday`)
    expect(reply.status).toBe(400)
    expect(reply.json.code).toBe(DashboardErrorCode.BAD_REQUEST)
  })

  it('startDashboard serves it alone from a Redis URL, and rejects with a code when Redis cannot be reached', async () => {
    const snap = snapshot('solo', Math.floor(Date.now() / 1000), 60, {
      api: { counts: () => ({ allowed: 1 }) },
    })
    publishers.push(
      publishStats({ stats: { snapshot: () => snap }, client, instance: 'solo', intervalMs: 100_000 }),
    )
    await publishers[0]!.publishNow()
    const running = await startDashboard({ redis: `redis://127.0.0.1:${server.port}`, port: 0, access })
    try {
      expect(running.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
      const view = (await send(`${running.url}api/stats`)).json as StatsView
      expect(view.instances.map((i) => i.instance)).toEqual(['solo'])
      expect((await send(running.url)).headers['content-security-policy']).toContain("script-src 'self'")
    } finally {
      await running.close()
    }
    const failure = await startDashboard({ redis: 'redis://127.0.0.1:1', port: 0, access }).catch(
      (e: unknown) => e,
    )
    expect(failure).toBeInstanceOf(DashboardError)
    expect((failure as DashboardError).code).toBe(DashboardErrorCode.UNAVAILABLE)
    await expect(startDashboard({ port: 0 } as never)).rejects.toThrow(/dashboard.access/)
  })
})
