/**
 * Issue 24's faults as a user of the adapters meets them, on real servers and a real redis-server: a
 * request slower than its window that `countWhen` refunds must not let a 4th request into a window of 3;
 * a cost function returning 2 under a meter with `maxQueueMs: 0` must not answer 500.
 */
import { createLimiter, fixedWindow, type Limiter, MemoryStore } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { sluice } from '@sluice/fastify'
import { RedisStore } from '@sluice/redis'
import Fastify from 'fastify'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { WEIGHTED_METERS } from '../packages/core/test/support.ts'
import { flavours, listen } from '../packages/express/test/support.ts'
import { CLIENT_KINDS, clientOf, closeClients } from './harness/clients.ts'
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

const T0 = 1_800_000_000_000
let run = 0

/** The limiter's refunds as they are made, so a test can wait for each to land. */
function recordRefunds(limiter: Limiter): Promise<void>[] {
  const refunds: Promise<void>[] = []
  const refund = limiter.refund.bind(limiter)
  limiter.refund = (key, options) => {
    const done = refund(key, options)
    refunds.push(done)
    return done
  }
  return refunds
}

describe.each(CLIENT_KINDS)('Express with Redis (%s)', (kind) => {
  it('a request slower than its window that countWhen refunds does not let a 4th request into a window of 3', async () => {
    const clock = { now: T0 + 100 }
    const store = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      timeoutMs: 10_000,
    })
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 3, windowMs: 1000 })],
      store,
      prefix: `http${run++}`,
      onStoreError: 'throw',
    })
    const refunds = recordRefunds(limiter)
    let entered: () => void = () => {}
    const slowEntered = new Promise<void>((resolve) => {
      entered = resolve
    })
    let finish: () => void = () => {}
    const slowMayFinish = new Promise<void>((resolve) => {
      finish = resolve
    })
    const app = flavours[0].express()
    app.use(rateLimit({ limiter, key: () => 'one', countWhen: (_req, res) => res.statusCode < 500 }))
    app.get('/slow', async (_req, res) => {
      entered()
      await slowMayFinish
      res.status(500).json({ failed: true })
    })
    app.get('/fast', (_req, res) => {
      res.json({ ok: true })
    })
    const { url, close } = await listen(app)
    stops.push(close)
    const get = async (path: string, t: number) => {
      clock.now = T0 + t
      return (await fetch(`${url}${path}`)).status
    }

    const slow = get('/slow', 100)
    await slowEntered
    expect([await get('/fast', 1100), await get('/fast', 1110), await get('/fast', 1120)]).toEqual([
      200, 200, 200,
    ])
    clock.now = T0 + 1150
    finish()
    expect(await slow).toBe(500)
    await vi.waitFor(() => expect(refunds).toHaveLength(1))
    await refunds[0]
    expect(await get('/fast', 1160)).toBe(429)
  })
})

describe.each(Object.keys(WEIGHTED_METERS))('a weighted request under %s with maxQueueMs 0', (meter) => {
  it('Express: a cost function returning 2 admits the first request instead of answering 500', async () => {
    const app = flavours[0].express()
    app.use(
      rateLimit({
        rules: [WEIGHTED_METERS[meter]!],
        store: new MemoryStore({ clock: () => T0 }),
        cost: () => 2,
      }),
    )
    app.get('/', (_req, res) => {
      res.json({ ok: true })
    })
    const { url, close } = await listen(app)
    stops.push(close)
    expect((await fetch(url)).status).toBe(200)
    expect((await fetch(url)).status).toBe(429)
  })

  it('Fastify: a cost function returning 2 admits the first request instead of answering 500', async () => {
    const app = Fastify()
    await app.register(sluice, {
      rules: [WEIGHTED_METERS[meter]!],
      store: new MemoryStore({ clock: () => T0 }),
      cost: () => 2,
    })
    app.get('/', async () => ({ ok: true }))
    stops.push(() => app.close())
    expect((await app.inject('/')).statusCode).toBe(200)
    expect((await app.inject('/')).statusCode).toBe(429)
  })
})
