/**
 * Two Express apps in one process (one on Express 5 with ioredis, one on Express 4 with node-redis), each
 * with its own client and RedisStore, share one limit exactly through a real redis-server: the same keys,
 * the same counts, the same table of limits per bizType + channel.
 */
import { fixedWindow, slidingLog } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { flavours, listen } from '../packages/express/test/support.ts'
import { closeClients, ioredis, nodeRedis } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer
const stops: (() => Promise<void>)[] = []

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  for (const stop of stops) await stop()
  await closeClients()
  await stopAll()
})

/** Calls per minute to each outside channel; a missing entry or -1 means not limited. */
const table: Record<string, number> = { 'PAYMENT:ALIPAY': 5, 'PAYMENT:UNIONPAY': 5, 'PAYMENT:WECHAT': -1 }

/** One gateway instance: its own Express, Redis client and RedisStore; the limit's options are the same. */
async function gateway(index: 0 | 1): Promise<string> {
  const { express } = flavours[index]
  const client = index === 0 ? await ioredis(server) : await nodeRedis(server)
  const app = express()
  app.post(
    '/pay',
    rateLimit({
      store: new RedisStore({ client }),
      key: { header: ['x-biz-type', 'x-channel'] },
      rules: (key) => {
        const limit = table[key]
        return limit === undefined ? null : [slidingLog({ limit, windowMs: 60_000 })]
      },
    }),
    (_req, res) => {
      res.json({ gateway: index })
    },
  )
  const { url, close } = await listen(app)
  stops.push(close)
  return url
}

describe('two Express apps on one Redis', () => {
  it('share one limit per bizType + channel exactly, request by request and all at once', async () => {
    const urls = [await gateway(0), await gateway(1)]
    /** Call i goes to app i % 2. */
    const pay = async (i: number, channel: string, bizType = 'PAYMENT') => {
      const res = await fetch(`${urls[i % 2]}/pay`, {
        method: 'POST',
        headers: { 'x-biz-type': bizType, 'x-channel': channel },
      })
      const body = await res.text()
      return { status: res.status, ratelimit: res.headers.get('ratelimit'), body }
    }
    const many = (n: number, channel: string, bizType?: string) =>
      Promise.all(Array.from({ length: n }, (_, i) => pay(i, channel, bizType)))

    const seen: string[] = []
    for (let i = 0; i < 7; i++) {
      const res = await pay(i, 'ALIPAY')
      seen.push(`${res.status} ${res.ratelimit}`)
    }
    expect(seen).toEqual([
      '200 "5-per-60s";r=4;t=60',
      '200 "5-per-60s";r=3;t=60',
      '200 "5-per-60s";r=2;t=60',
      '200 "5-per-60s";r=1;t=60',
      '200 "5-per-60s";r=0;t=60',
      '429 "5-per-60s";r=0;t=60',
      '429 "5-per-60s";r=0;t=60',
    ])

    // Forty calls at once, half to each app: exactly five pass in all.
    const burst = await many(40, 'UNIONPAY')
    expect(burst.filter((r) => r.status === 200)).toHaveLength(5)
    expect(burst.filter((r) => r.status === 429)).toHaveLength(35)

    // -1 and a pair missing from the table are not limited, in either app.
    for (const [channel, bizType] of [
      ['WECHAT', 'PAYMENT'],
      ['ALIPAY', 'REFUND'],
    ] as const) {
      const free = await many(40, channel, bizType)
      expect(free.map((r) => r.status)).toEqual(Array(40).fill(200))
      expect(free.every((r) => r.ratelimit === null)).toBe(true)
      expect(new Set(free.map((r) => r.body))).toEqual(new Set(['{"gateway":0}', '{"gateway":1}']))
    }
  })
})

describe('two limits in one Express app on one Redis client', () => {
  it('two limits on the default prefix, each with its own RedisStore on one client, are refused at construction instead of sharing a count', async () => {
    const client = await ioredis(server)
    rateLimit({ rules: [slidingLog({ limit: 100, windowMs: 60_000 })], store: new RedisStore({ client }) })
    let thrown: unknown
    try {
      rateLimit({ rules: [slidingLog({ limit: 5, windowMs: 60_000 })], store: new RedisStore({ client }) })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toMatchObject({ code: 'ERR_SLUICE_PREFIX_COLLISION' })
    expect((thrown as Error).message).toContain("its own prefix, e.g. prefix: 'login'")
    // Another store prefix is another place.
    rateLimit({
      rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
      store: new RedisStore({ client, prefix: 'other' }),
    })
  })

  it('a global limit and a route limit with their own prefixes count apart on one Redis', async () => {
    await server.cli('FLUSHALL')
    const client = await nodeRedis(server)
    const { express } = flavours[0]
    const app = express()
    const global = rateLimit({
      rules: [slidingLog({ limit: 100, windowMs: 60_000 })],
      store: new RedisStore({ client }),
      prefix: 'global',
    })
    const pay = rateLimit({
      rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
      store: new RedisStore({ client }),
      prefix: 'pay',
    })
    app.use(global)
    app.post('/pay', pay, (_req, res) => {
      res.json({ ok: true })
    })
    const { url, close } = await listen(app)
    stops.push(close)
    const statuses: number[] = []
    for (let i = 0; i < 7; i++) statuses.push((await fetch(`${url}/pay`, { method: 'POST' })).status)
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429])
    expect((await global.limiter.peek('127.0.0.1')).remaining).toBe(100 - 7 - 1)
    expect((await pay.limiter.peek('127.0.0.1')).allowed).toBe(false)
    // Two limiters given the same prefix on purpose share it.
    const a = rateLimit({
      rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
      store: new RedisStore({ client }),
      prefix: 'shared',
    })
    const b = rateLimit({
      rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
      store: new RedisStore({ client }),
      prefix: 'shared',
    })
    await a.limiter.consume('k')
    expect((await b.limiter.peek('k')).remaining).toBe(3)
  })
})

describe('key, rules and cost functions that return a promise, on Redis', () => {
  it('wait for each and count exactly on a real redis-server', async () => {
    const client = await ioredis(server)
    const { express } = flavours[1]
    const app = express()
    app.post(
      '/pay',
      rateLimit({
        store: new RedisStore({ client }),
        prefix: 'async',
        key: async (req) => (req.headers['x-api-key'] as string | undefined) ?? null,
        rules: async () => [slidingLog({ limit: 4, windowMs: 60_000 })],
        cost: async () => 2,
      }),
      (_req, res) => {
        res.json({ ok: true })
      },
    )
    const { url, close } = await listen(app)
    stops.push(close)
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      statuses.push((await fetch(`${url}/pay`, { method: 'POST', headers: { 'x-api-key': 'k1' } })).status)
    }
    expect(statuses).toEqual([200, 200, 429])
  })
})

describe('a settle when the store is down', () => {
  it('keeps the answered request, and warns once that the reservation stays', async () => {
    const down = await startRedis()
    const client = await ioredis(down)
    const warned = new Promise<string>((resolve) => {
      vi.spyOn(process, 'emitWarning').mockImplementation((warning) => resolve(String(warning)))
    })
    let release!: () => void
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    let admitted!: () => void
    const handling = new Promise<void>((resolve) => {
      admitted = resolve
    })
    const app = flavours[0].express()
    app.post(
      '/v1/chat',
      rateLimit({
        rules: [
          fixedWindow({ limit: 5, windowMs: 60_000, name: 'requests' }),
          fixedWindow({ limit: 100, windowMs: 60_000, name: 'tokens' }),
        ],
        store: new RedisStore({ client, prefix: 'settle-down', timeoutMs: 200 }),
        prefix: 'settle-down',
        cost: () => ({ tokens: 40 }),
        settle: () => ({ tokens: 10 }),
      }),
      async (_req, res) => {
        admitted()
        await gate
        res.json({ ok: true })
      },
    )
    const listening = await listen(app)
    stops.push(() => listening.close())
    try {
      const answer = fetch(`${listening.url}/v1/chat`, { method: 'POST' })
      // Admitted (its units reserved in Redis: the handler runs); the store goes down before the response
      // ends, and the client has seen its connection go, so the settle finds the store down.
      await handling
      await down.kill()
      await vi.waitFor(() => expect(client.status).not.toBe('ready'), { timeout: 5000 })
      release()
      expect((await answer).status).toBe(200)
      expect(await warned).toMatch(
        /^sluice \(settle-down\): settling a reservation failed, so it stays: StoreError: .+\. Further such failures of this limit are not reported\.$/,
      )
    } finally {
      vi.restoreAllMocks()
    }
  })
})
