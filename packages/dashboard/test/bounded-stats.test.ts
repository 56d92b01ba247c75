/**
 * The dashboard against hostile published stats (issue 45 item 1), on a real redis-server and over real
 * HTTP: one healthy process publishes with `publishStats`, and values no publisher may write are put in
 * Redis beside it (a value naming 60,000 limiters, values past the bound of bytes, a huge meta, a huge
 * series). `GET api/stats` still answers, shows the healthy instance, names each skipped one with why, and
 * warns once per skipped instance; an oversized value is never fetched (Redis's own count of the bytes it
 * sent says so).
 */
import { type LiveStatsSnapshot, publishStats, STATS_BOUNDS, type StatsPublisher } from '@sluice/metrics'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { dashboard } from '../src/index.ts'
import { closeServers, send, serve } from './http.ts'

let redis: RedisServer
let client: Redis
let publisher: StatsPublisher
let run = 0
let prefix = ''

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis({ host: redis.host, port: redis.port })
})

afterEach(async () => {
  await publisher?.close()
  await closeServers()
  vi.restoreAllMocks()
})

afterAll(async () => {
  client.disconnect()
  await stopAll()
})

/** A small, valid snapshot of one limiter at the dashboard's time. */
function healthy(): LiveStatsSnapshot {
  const at = Date.now()
  const t = Math.floor(at / 1000)
  const limiters = Object.create(null)
  limiters.api = {
    series: [{ t, allowed: 7, queued: 0, denied: 2, shadow: 0 }],
    topDenied: [{ key: '203.0.113.9', count: 2 }],
  }
  return { at, seconds: 1, limiters }
}

/** Publishes the healthy process under a fresh prefix and serves a dashboard reading that prefix. */
async function setUp(): Promise<string> {
  prefix = `bounded${run++}`
  publisher = publishStats({ stats: { snapshot: healthy }, client, instance: 'good:1', prefix })
  await publisher.publishNow()
  return serve(dashboard({ access: () => 'read', client, statsPrefix: prefix }))
}

/** Puts `value` in Redis as instance `name`'s published stats, around any publisher's checks. */
async function plant(name: string, value: string | number): Promise<void> {
  const key = `${prefix}:instance:${name}`
  // A number is a size: a value of that many bytes made by Redis itself, nothing sent over the wire.
  if (typeof value === 'number') await client.setrange(key, value - 1, 'x')
  else await client.set(key, value)
  await client.zadd(`${prefix}:instances`, Date.now(), name)
}

function snapshotJson(instance: string, fields: Record<string, unknown>): string {
  return JSON.stringify({ at: Date.now(), seconds: 1, instance, meta: {}, limiters: {}, ...fields })
}

/** The bytes Redis has sent to its clients so far. */
async function sentBytes(): Promise<number> {
  const info = await client.info('stats')
  return Number(/total_net_output_bytes:(\d+)/.exec(info)![1])
}

/** The SLUICE_STATS_SKIPPED warnings emitted so far, as text. */
function warnings(warn: { mock: { calls: unknown[][] } }): string[] {
  return warn.mock.calls
    .filter((call) => (call[1] as { code?: string } | undefined)?.code === 'SLUICE_STATS_SKIPPED')
    .map((call) => String(call[0]))
}

describe('api/stats against hostile published stats (issue 45 item 1)', () => {
  it('a value naming 60,000 limiters (709 KB) is skipped with a warning naming it; the healthy instance is shown', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    const limiters: Record<string, object> = {}
    for (let i = 0; i < 60_000; i++) limiters[`l${i}`] = {}
    const value = snapshotJson('wide', { limiters })
    expect(value.length).toBeGreaterThan(700_000)
    await plant('wide', value)

    const reply = await send(`${url}/api/stats`)
    expect(reply.status).toBe(200)
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    expect(reply.json.limiters.map((l: { limiter: string }) => l.limiter)).toEqual(['api'])
    expect(reply.json.skipped).toEqual([
      { instance: 'wide', reason: 'it names 60000 limiters, past the bound of 1000' },
    ])
    expect(warnings(warn)).toEqual([
      'sluice dashboard: skipped the published stats of "wide": it names 60000 limiters, past the bound of 1000; the other instances are shown.',
    ])
    // Warned once while it stays skipped (the next read is after the dashboard's half-second cache).
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect((await send(`${url}/api/stats`)).json.skipped).toHaveLength(1)
    expect(warnings(warn)).toHaveLength(1)
  })

  it('twenty values past the bound of bytes are skipped unread: Redis sends less than one of them', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    const size = STATS_BOUNDS.valueBytes + 1_000_000
    for (let i = 0; i < 20; i++) await plant(`big${String(i).padStart(2, '0')}`, size)

    const before = await sentBytes()
    const reply = await send(`${url}/api/stats`)
    const sent = (await sentBytes()) - before
    expect(reply.status).toBe(200)
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    expect(reply.json.skipped).toHaveLength(20)
    expect(reply.json.skipped[0]).toEqual({
      instance: expect.stringMatching(/^big\d\d$/),
      reason: `its value is ${size} bytes, past the bound of ${STATS_BOUNDS.valueBytes}`,
    })
    expect(warnings(warn)).toHaveLength(20)
    // The healthy value, the index and the lengths: nothing of the 100 MB planted.
    expect(sent).toBeLessThan(100_000)
    expect(reply.text.length).toBeLessThan(10_000)
  })

  it('values under the bound each but past what one read fetches: the most recent are read, the rest skipped', async () => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    // Junk of 3.9 MB each (not JSON): nine of them pass the read's 32 MiB after eight.
    for (let i = 0; i < 9; i++) {
      await plant(`heavy${i}`, 3_900_000)
      await client.zadd(`${prefix}:instances`, 1000 + i, `heavy${i}`) // heavy0 the least recent
    }
    const before = await sentBytes()
    const reply = await send(`${url}/api/stats`)
    const sent = (await sentBytes()) - before
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    const reasons = reply.json.skipped.map((s: { reason: string }) => s.reason)
    expect(reasons.filter((r: string) => r === 'its value is not JSON')).toHaveLength(8)
    expect(reply.json.skipped).toContainEqual({
      instance: 'heavy0',
      reason: `this read already fetched what it may (${STATS_BOUNDS.readBytes} bytes in all)`,
    })
    expect(sent).toBeLessThanOrEqual(STATS_BOUNDS.readBytes + 100_000)
  })

  it('a key of another type where a value should be is skipped, not the whole read', async () => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    await client.hset(`${prefix}:instance:hash`, 'at', '1')
    await client.zadd(`${prefix}:instances`, Date.now(), 'hash')
    const reply = await send(`${url}/api/stats`)
    expect(reply.json.redisError).toBeUndefined()
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    expect(reply.json.skipped).toEqual([
      { instance: 'hash', reason: expect.stringMatching(/^Redis cannot read it as text \(WRONGTYPE/) },
    ])
  })

  it('a huge meta is skipped with its size named; every poll stays small', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    await plant('chatty', snapshotJson('chatty', { meta: { notes: 'n'.repeat(1_000_000) } }))
    const reply = await send(`${url}/api/stats`)
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    expect(reply.json.skipped).toEqual([
      { instance: 'chatty', reason: 'its meta is 1000012 bytes, past the bound of 4096' },
    ])
    expect(warnings(warn)).toEqual([expect.stringContaining('"chatty"')])
    expect(reply.text.length).toBeLessThan(10_000)
  })

  it('a huge series is skipped: a million points unread, and more points than its seconds unused', async () => {
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const url = await setUp()
    const t = Math.floor(Date.now() / 1000)
    const point = (i: number) => ({ t: t - i, allowed: 1, queued: 0, denied: 0, shadow: 0 })
    const million = JSON.stringify(Array.from({ length: 1_000_000 }, (_, i) => point(i)))
    await plant(
      'million',
      `{"at":${Date.now()},"seconds":300,"instance":"million","meta":{},"limiters":{"api":{"topDenied":[],"series":${million}}}}`,
    )
    const series = Array.from({ length: 20_000 }, (_, i) => point(i))
    await plant('long', snapshotJson('long', { seconds: 300, limiters: { api: { series, topDenied: [] } } }))

    const reply = await send(`${url}/api/stats`)
    expect(reply.json.instances.map((i: { instance: string }) => i.instance)).toEqual(['good:1'])
    expect(reply.json.skipped).toEqual(
      expect.arrayContaining([
        {
          instance: 'million',
          reason: expect.stringMatching(/^its value is \d+ bytes, past the bound of 4194304$/),
        },
        { instance: 'long', reason: 'its limiter "api" has more points than its seconds' },
      ]),
    )
    // The healthy instance's one second, as it published it.
    expect(reply.json.limiters).toEqual([
      expect.objectContaining({
        limiter: 'api',
        instances: ['good:1'],
        topDenied: [{ key: '203.0.113.9', count: 2 }],
      }),
    ])
  })
})
