/**
 * Two Fastify apps (two "processes": each its own Redis client and RedisStore) share their limits through
 * one real redis-server: the plugin's global limit and a route's own limit, whose derived prefix is the
 * same in both apps. Counts are exact under concurrent requests, with ioredis and with node-redis.
 */
import { slidingLog } from '@sluice/core'
import { sluice } from '@sluice/fastify'
import { RedisStore } from '@sluice/redis'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind, clientOf, closeClients } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer
const apps: FastifyInstance[] = []

beforeAll(async () => {
  server = await startRedis()
})

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** One app as one process would build it: its own client and store, the same routes and options. */
async function appOn(kind: ClientKind): Promise<FastifyInstance> {
  const app = Fastify()
  apps.push(app)
  const store = new RedisStore({ client: await clientOf(kind, server) })
  await app.register(sluice, { rules: [slidingLog({ limit: 5, windowMs: 60_000 })], store })
  app.get('/a', async () => 'a')
  app.get('/b', async () => 'b')
  app.post(
    '/pay',
    { config: { rateLimit: { rules: [slidingLog({ limit: 3, windowMs: 60_000 })] } } },
    async () => 'paid',
  )
  await app.ready()
  return app
}

describe.each(CLIENT_KINDS)('two Fastify apps on one Redis (%s)', (kind) => {
  it('share the global limit: exactly 5 of 12 concurrent requests across both apps pass', async () => {
    await server.cli('FLUSHALL')
    const [one, two] = [await appOn(kind), await appOn(kind)]
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? one : two).inject(i % 3 === 0 ? '/b' : '/a')),
    )
    const statuses = responses.map((r) => r.statusCode)
    expect(statuses.filter((s) => s === 200)).toHaveLength(5)
    expect(statuses.filter((s) => s === 429)).toHaveLength(7)
    for (const denied of responses.filter((r) => r.statusCode === 429)) {
      expect(denied.headers['retry-after']).toBe('60')
      expect(denied.headers['ratelimit']).toBe('"5-per-60s";r=0;t=60')
      expect(denied.json()).toMatchObject({ status: 429, title: 'Too Many Requests' })
    }
  })

  it("share a route's own limit under the same derived prefix, apart from the global one", async () => {
    await server.cli('FLUSHALL')
    const [one, two] = [await appOn(kind), await appOn(kind)]
    const pay = await Promise.all(
      Array.from({ length: 7 }, (_, i) => (i % 2 === 0 ? one : two).inject({ method: 'POST', url: '/pay' })),
    )
    expect(pay.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 429, 429, 429, 429])
    // The global limit is untouched by /pay.
    expect((await one.inject('/a')).headers['ratelimit']).toBe('"5-per-60s";r=4;t=60')
    const keys = (await server.cli('KEYS', '*')).trim().split('\n').sort()
    expect(keys).toEqual([
      'sluice:sluice:POST /pay:{127.0.0.1}:slidingLog:60000',
      'sluice:sluice:{127.0.0.1}:slidingLog:60000',
    ])
  })
})

describe('two registrations on one Redis client', () => {
  it('two plugin registrations on the default prefix, each with its own RedisStore on one client, are refused instead of sharing a count', async () => {
    const client = await clientOf('ioredis', server)
    const app = Fastify()
    apps.push(app)
    const rules = [slidingLog({ limit: 5, windowMs: 60_000 })]
    for (let i = 0; i < 2; i++) {
      app.register(async (scope) => {
        await scope.register(sluice, { rules, store: new RedisStore({ client }) })
      })
    }
    await expect(app.ready()).rejects.toMatchObject({ code: 'ERR_SLUICE_PREFIX_COLLISION' })
    // With a prefix each, they count apart.
    const other = Fastify()
    apps.push(other)
    for (const prefix of ['a', 'b']) {
      other.register(async (scope) => {
        await scope.register(sluice, { rules, store: new RedisStore({ client }), prefix })
        scope.get(`/${prefix}`, async () => prefix)
      })
    }
    await other.ready()
    for (let i = 0; i < 5; i++) expect((await other.inject('/a')).statusCode).toBe(200)
    expect((await other.inject('/a')).statusCode).toBe(429)
    expect((await other.inject('/b')).statusCode).toBe(200)
  })
})

describe.each(CLIENT_KINDS)(
  'key, rules and cost functions that return a promise, through Fastify on Redis (%s)',
  (kind) => {
    /** A plan per API key, looked up as a cache or a database would answer: later, in a promise. */
    const plans = new Map([
      ['k1', 5],
      ['k2', 2],
    ])
    const later = <T>(value: T) => new Promise<T>((resolve) => setImmediate(() => resolve(value)))

    async function asyncApp(hook: 'onRequest' | 'preHandler'): Promise<FastifyInstance> {
      const app = Fastify()
      apps.push(app)
      const store = new RedisStore({ client: await clientOf(kind, server) })
      await app.register(sluice, {
        hook,
        store,
        key: (request) => later((request.headers['x-api-key'] as string | undefined) ?? null),
        rules: async (key) => {
          if (key === 'boom') throw new Error('the plan store is down')
          return [slidingLog({ limit: await later(plans.get(key) ?? 1), windowMs: 60_000 })]
        },
        cost: () => later(2),
      })
      app.get('/a', async () => 'a')
      app.post(
        '/pay',
        {
          config: {
            rateLimit: {
              key: async () => 'pay',
              rules: () => later([slidingLog({ limit: 3, windowMs: 60_000, name: 'pay' })]),
              cost: async () => 1,
            },
          },
        },
        async () => 'paid',
      )
      await app.ready()
      return app
    }

    it.each(['onRequest', 'preHandler'] as const)(
      'at %s: wait for each and count exactly across two apps (cost 2 of a plan of 5: the third is denied)',
      async (hook) => {
        await server.cli('FLUSHALL')
        const [one, two] = [await asyncApp(hook), await asyncApp(hook)]
        const get = (app: FastifyInstance, key?: string) =>
          app.inject({ url: '/a', headers: key === undefined ? {} : { 'x-api-key': key } })
        const k1 = [await get(one, 'k1'), await get(two, 'k1'), await get(one, 'k1')]
        expect(k1.map((r) => r.statusCode)).toEqual([200, 200, 429])
        expect(k1.map((r) => r.headers['ratelimit'])).toEqual([
          '"5-per-60s";r=3;t=60',
          '"5-per-60s";r=1;t=60',
          '"5-per-60s";r=1;t=60',
        ])
        // Another plan, another count: 2 units, one request.
        expect([(await get(two, 'k2')).statusCode, (await get(one, 'k2')).statusCode]).toEqual([200, 429])
        // No key: 400, and nothing counted. A rejected rules function goes to Fastify's error handler.
        expect((await get(one)).statusCode).toBe(400)
        expect((await get(two, 'boom')).statusCode).toBe(500)
        // A route's own async options count on their own, 1 unit each.
        const pay = await Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            (i % 2 === 0 ? one : two).inject({ method: 'POST', url: '/pay' }),
          ),
        )
        expect(pay.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 429, 429])
        const keys = (await server.cli('KEYS', '*')).trim().split('\n').sort()
        expect(keys).toEqual([
          'sluice:sluice:POST /pay:{pay}:slidingLog:60000@pay',
          'sluice:sluice:{k1}:slidingLog:60000',
          'sluice:sluice:{k2}:slidingLog:60000',
        ])
      },
    )
  },
)
