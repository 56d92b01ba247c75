import { ErrorCode, InvalidOptionError } from '@sluice/core'
import {
  type LiveStatsSnapshot,
  liveStats,
  type PublishStatsOptions,
  publishStats,
  readPublishedStats,
  type StatsPublisher,
  type StatsRedisClient,
} from '@sluice/metrics'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { publishDecision } from './trace.ts'

type Kind = 'ioredis' | 'node-redis'
type Client = StatsRedisClient & { close(): Promise<void> }

const open = new Set<Client>()

/** A client of `kind`, connected, with the offline queue off (commands fail at once while Redis is away). */
async function connect(kind: Kind, server: RedisServer): Promise<Client> {
  let client: Client
  if (kind === 'ioredis') {
    const redis = new Redis({
      host: server.host,
      port: server.port,
      lazyConnect: true,
      enableOfflineQueue: false,
    })
    redis.on('error', () => {})
    await redis.connect()
    client = Object.assign(redis, { close: async () => redis.disconnect() })
  } else {
    const redis = createClient({
      socket: { host: server.host, port: server.port },
      disableOfflineQueue: true,
    })
    redis.on('error', () => {})
    await redis.connect()
    client = Object.assign(redis, {
      close: async () => {
        if (redis.isOpen) redis.destroy()
      },
    }) as unknown as Client
  }
  open.add(client)
  return client
}

/** Runs one command on `client` and returns its reply. */
function command(client: Client, ...args: string[]): Promise<unknown> {
  const c = client as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>
  return 'isReady' in client ? c.sendCommand!(args) : c.call!(...args)
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`)
    await sleep(25)
  }
}

let server: RedisServer
const publishers: StatsPublisher[] = []
const closers: { close(): void }[] = []
let prefixes = 0
const freshPrefix = () => `test:${++prefixes}`

beforeAll(async () => {
  server = await startRedis()
})
afterEach(async () => {
  for (const p of publishers.splice(0)) await p.close()
  for (const c of closers.splice(0)) c.close()
})
afterAll(async () => {
  for (const client of open) await client.close()
  await closeClients()
  await stopAll()
})

function publisher(options: PublishStatsOptions): StatsPublisher {
  const p = publishStats(options)
  publishers.push(p)
  return p
}

/** Live stats on a fixed clock with one allowed and one denied consume, so snapshots are known. */
function knownStats(limiter: string, at: number) {
  const stats = liveStats({ seconds: 3, topKeys: 2, clock: () => at })
  closers.push(stats)
  publishDecision(limiter, 'k1')
  publishDecision(limiter, 'k2', { allowed: false })
  return stats
}

describe.each(['ioredis', 'node-redis'] as const)('publishStats on %s', (kind) => {
  it('publishes every instance, readable by readPublishedStats, under keys that expire', async () => {
    const client = await connect(kind, server)
    const prefix = freshPrefix()
    const a = knownStats(`a-${kind}`, 7_000)
    const b = knownStats(`b-${kind}`, 9_500)
    let tableVersion = 3
    publisher({ stats: a, client, instance: 'host-a:1', prefix, meta: { region: 'eu' }, intervalMs: 100 })
    const pb = publisher({ stats: b, client, instance: 'host-b:2', prefix, meta: () => ({ tableVersion }) })
    tableVersion = 4
    await pb.publishNow()
    await until(async () => (await readPublishedStats({ client, prefix })).length === 2, 2000)

    const expected = (snapshot: LiveStatsSnapshot, instance: string, meta: Record<string, unknown>) => ({
      ...snapshot,
      instance,
      meta,
    })
    expect(await readPublishedStats({ client, prefix })).toEqual([
      expected(a.snapshot(), 'host-a:1', { region: 'eu' }),
      expected(b.snapshot(), 'host-b:2', { tableVersion: 4 }),
    ])
    expect(a.snapshot().limiters[`a-${kind}`]!.series.at(-1)).toEqual({
      t: 7,
      allowed: 1,
      queued: 0,
      denied: 1,
      shadow: 0,
    })

    // Default TTL: the larger of 10 s and twice the interval.
    for (const key of [`${prefix}:instance:host-a:1`, `${prefix}:instance:host-b:2`, `${prefix}:instances`]) {
      const pttl = Number(await command(client, 'PTTL', key))
      expect(pttl).toBeGreaterThan(8_000)
      expect(pttl).toBeLessThanOrEqual(10_000)
    }
    expect(await command(client, 'ZRANGE', `${prefix}:instances`, '0', '-1')).toEqual([
      'host-a:1',
      'host-b:2',
    ])

    // close() removes the instance at once.
    await publishers.shift()!.close()
    expect((await readPublishedStats({ client, prefix })).map((s) => s.instance)).toEqual(['host-b:2'])
    expect(await command(client, 'EXISTS', `${prefix}:instance:host-a:1`)).toBe(0)
  })

  it('lets a process that stops publishing vanish after ttlSeconds, never throwing from its timer', async () => {
    const reader = await connect(kind, server)
    const dying = await connect(kind, server)
    const prefix = freshPrefix()
    const errors: unknown[] = []
    publisher({
      stats: knownStats(`dying-${kind}`, 1_000),
      client: dying,
      instance: 'dying',
      prefix,
      intervalMs: 100,
      ttlSeconds: 1,
      onError: (error) => errors.push(error),
    })
    publisher({
      stats: knownStats(`alive-${kind}`, 1_000),
      client: reader,
      instance: 'alive',
      prefix,
      intervalMs: 100,
      ttlSeconds: 1,
    })
    await until(async () => (await readPublishedStats({ client: reader, prefix })).length === 2, 2000)
    const pttl = Number(await command(reader, 'PTTL', `${prefix}:instance:dying`))
    expect(pttl).toBeGreaterThan(0)
    expect(pttl).toBeLessThanOrEqual(1000)

    // The process's connection dies; its timer keeps firing and failing, into onError.
    await dying.close()
    await until(async () => Number(await command(reader, 'EXISTS', `${prefix}:instance:dying`)) === 0, 4000)
    expect((await readPublishedStats({ client: reader, prefix })).map((s) => s.instance)).toEqual(['alive'])
    expect(errors.length).toBeGreaterThan(0)
    for (const error of errors) expect(error).toBeInstanceOf(Error)

    // Once every publisher is gone, the index expires too.
    await publishers.pop()!.close()
    await until(async () => Number(await command(reader, 'EXISTS', `${prefix}:instances`)) === 0, 3000)
  })

  it('keeps going while Redis is down, warns once, and resumes when it is back', async () => {
    const own = await startRedis()
    const client = await connect(kind, own)
    const prefix = freshPrefix()
    const warnings: Error[] = []
    const onWarning = (warning: Error) => {
      if ((warning as { code?: string }).code === 'SLUICE_STATS_PUBLISH') warnings.push(warning)
    }
    process.on('warning', onWarning)
    try {
      const p = publisher({ stats: knownStats('x', 1_000), client, instance: 'i', prefix, intervalMs: 100 })
      await p.publishNow()
      expect(warnings).toEqual([])
      await own.kill()
      await p.publishNow()
      await p.publishNow()
      await p.publishNow()
      await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
      expect(warnings.length).toBe(1)
      expect(warnings[0]!.message).toMatch(/^sluice: publishing stats for i to Redis failed: /)
      await own.start()
      await until(async () => {
        try {
          return (await readPublishedStats({ client, prefix })).length === 1
        } catch {
          return false
        }
      }, 8000)
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('trims the index to maxInstances and skips entries that are not snapshots', async () => {
    const client = await connect(kind, server)
    const prefix = freshPrefix()
    const stats = knownStats('t', 1_000)
    let ms = 1_000_000
    for (const instance of ['one', 'two', 'three']) {
      ms += 1000
      const at = ms
      await publisher({ stats, client, instance, prefix, maxInstances: 2, clock: () => at }).publishNow()
    }
    expect(await command(client, 'ZRANGE', `${prefix}:instances`, '0', '-1')).toEqual(['two', 'three'])
    await command(client, 'SET', `${prefix}:instance:junk`, 'not json')
    await command(client, 'ZADD', `${prefix}:instances`, String(ms + 1), 'junk')
    await command(client, 'ZADD', `${prefix}:instances`, String(ms + 2), 'expired')
    expect((await readPublishedStats({ client, prefix })).map((s) => s.instance)).toEqual(['three', 'two'])
    // The name whose entry expired leaves the index as it is read.
    expect(await command(client, 'ZSCORE', `${prefix}:instances`, 'expired')).toBe(null)
  })

  it('a publisher whose clock runs 2 or 20 minutes fast evicts no other instance', async () => {
    const client = await connect(kind, server)
    const prefix = freshPrefix()
    const now = Date.now()
    for (const [instance, skew] of [
      ['on-time', 0],
      ['fast-2m', 120_000],
      ['fast-20m', 1_200_000],
    ] as const) {
      const at = now + skew
      await publisher({ stats: knownStats('t', at), client, instance, prefix, clock: () => at }).publishNow()
    }
    expect((await readPublishedStats({ client, prefix })).map((s) => s.instance)).toEqual([
      'fast-20m',
      'fast-2m',
      'on-time',
    ])
  })

  it('reads a limiter named __proto__ back as an own property', async () => {
    const client = await connect(kind, server)
    const prefix = freshPrefix()
    await publisher({ stats: knownStats('__proto__', 1_000), client, instance: 'p', prefix }).publishNow()
    const [read] = await readPublishedStats({ client, prefix })
    expect(Object.getPrototypeOf(read!.limiters)).toBe(null)
    expect(Object.keys(read!.limiters)).toEqual(['__proto__'])
    expect(Object.getOwnPropertyDescriptor(read!.limiters, '__proto__')?.value.topDenied).toEqual([
      { key: 'k2', count: 1 },
    ])
  })
})

describe.each(['iovalkey', 'glide'] as const)(
  'publishStats on %s (through @sluice/redis client seam)',
  (kind) => {
    it('publishes a snapshot that readPublishedStats reads back', async () => {
      const client = await clientOf(kind, server)
      const prefix = freshPrefix()
      const a = knownStats(`a-${kind}`, 7_000)
      const pa = publisher({ stats: a, client, instance: 'host-a:1', prefix, meta: { region: 'eu' } })
      await pa.publishNow()
      expect(await readPublishedStats({ client, prefix })).toEqual([
        { ...a.snapshot(), instance: 'host-a:1', meta: { region: 'eu' } },
      ])
      await pa.close()
      expect(await readPublishedStats({ client, prefix })).toEqual([])
    })
  },
)

describe('publishStats options', () => {
  const stats = { snapshot: (): LiveStatsSnapshot => ({ at: 0, seconds: 1, limiters: {} }) }
  const client = { sendCommand: async () => 'OK', isReady: true } as StatsRedisClient

  it.each([
    [{ client: {} }, 'publishStats.client'],
    [{ instance: '' }, 'publishStats.instance'],
    [{ instance: 'x'.repeat(201) }, 'publishStats.instance'],
    [{ intervalMs: 50 }, 'publishStats.intervalMs'],
    [{ intervalMs: 1000, ttlSeconds: 1 }, 'publishStats.ttlSeconds'],
    [{ ttlSeconds: 0 }, 'publishStats.ttlSeconds'],
    [{ prefix: '' }, 'publishStats.prefix'],
    [{ maxInstances: 0 }, 'publishStats.maxInstances'],
    [{ stats: {} }, 'publishStats.stats'],
    [{ meta: 5 }, 'publishStats.meta'],
    // A huge meta (issue 45 item 1) is refused here rather than written every second.
    [{ meta: { notes: 'n'.repeat(5000) } }, 'publishStats.meta'],
    [{ meta: { big: 1n } }, 'publishStats.meta'],
    [{ onError: 'log' }, 'publishStats.onError'],
    [{ every: 5 }, 'publishStats.every'],
  ])('rejects %o naming %s', (bad, option) => {
    let error: unknown
    try {
      publishStats({ stats, client, instance: 'i', ...bad } as PublishStatsOptions)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option })
  })

  it('writes through a node-redis client seam: at once, again on publishNow, then removes itself on close', async () => {
    const sent: string[][] = []
    const seam = { sendCommand: async (args: string[]) => sent.push(args), isReady: true }
    const p = publishStats({ stats, client: seam, instance: 'i', clock: () => 50_000, ttlSeconds: 10 })
    await p.publishNow()
    await p.close()
    await p.close()
    await p.publishNow() // closed: nothing
    const write = [
      [
        'SET',
        'sluice:stats:instance:i',
        JSON.stringify({ at: 0, seconds: 1, limiters: {}, instance: 'i', meta: {} }),
        'EX',
        '10',
      ],
      ['ZADD', 'sluice:stats:instances', '50000', 'i'],
      ['ZREMRANGEBYRANK', 'sluice:stats:instances', '0', '-1001'],
      ['EXPIRE', 'sluice:stats:instances', '10'],
    ]
    expect(sent).toEqual([
      ...write,
      ...write,
      ['DEL', 'sluice:stats:instance:i'],
      ['ZREM', 'sluice:stats:instances', 'i'],
    ])
  })

  it('publishes {} for a meta function whose answer is past 4096 bytes, and tells onError (issue 45 item 1)', async () => {
    const sent: string[][] = []
    const errors: unknown[] = []
    const seam = { sendCommand: async (args: string[]) => sent.push(args), isReady: true }
    const p = publishStats({
      stats,
      client: seam,
      instance: 'i',
      meta: () => ({ notes: 'n'.repeat(5000) }),
      onError: (error) => errors.push(error),
    })
    await p.publishNow()
    await p.close()
    expect(JSON.parse(sent[0]![2]!).meta).toEqual({})
    expect(errors[0]).toBeInstanceOf(InvalidOptionError)
    expect(errors[0]).toMatchObject({ option: 'publishStats.meta' })
  })

  it('never writes a snapshot past 4 MiB as JSON: onError says so, with the option to change', async () => {
    const sent: string[] = []
    const errors: unknown[] = []
    const seam = { sendCommand: async (args: string[]) => sent.push(args[0]!), isReady: true }
    const limiters = Object.create(null)
    limiters.api = { series: [], topDenied: [{ key: 'k'.repeat(5_000_000), count: 1 }] }
    const p = publishStats({
      stats: { snapshot: () => ({ at: 0, seconds: 1, limiters }) },
      client: seam,
      instance: 'i',
      onError: (error) => errors.push(error),
    })
    await p.publishNow()
    await p.close()
    expect(sent).toEqual(['DEL', 'ZREM'])
    expect(errors).toHaveLength(2)
    expect(errors[0]).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'publishStats.stats' })
  })

  it('closes without waiting for a write Redis never answers, and starts no write after close', async () => {
    const sent: string[] = []
    const seam = {
      sendCommand: (args: string[]) => {
        sent.push(args[0]!)
        return args[0] === 'SET' ? new Promise(() => {}) : Promise.resolve(1)
      },
      isReady: true,
    }
    const p = publishStats({ stats, client: seam, instance: 'i' })
    const queued = p.publishNow() // waits behind the hanging first write
    await p.close()
    expect(sent).toEqual(['SET', 'ZADD', 'ZREMRANGEBYRANK', 'EXPIRE', 'DEL', 'ZREM'])
    void queued
  })

  it('sends no second write while one is in flight when the timer fires', async () => {
    let writes = 0
    let release = () => {}
    const seam = {
      sendCommand: (args: string[]) => {
        if (args[0] === 'SET') writes++
        return args[0] === 'SET'
          ? new Promise((resolve) => (release = () => resolve('OK')))
          : Promise.resolve(1)
      },
      isReady: true,
    }
    vi.useFakeTimers()
    try {
      const p = publishStats({ stats, client: seam, instance: 'i', intervalMs: 100 })
      await vi.advanceTimersByTimeAsync(350) // three ticks while the first write hangs
      expect(writes).toBe(1)
      release()
      await vi.advanceTimersByTimeAsync(100)
      expect(writes).toBe(2)
      release()
      await p.close()
    } finally {
      vi.useRealTimers()
    }
  })
})
