import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import {
  createLimiter,
  type Decision,
  ErrorCode,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  slidingLog,
} from '@sluice/core'
import { RateLimitRejection, sluice } from '@sluice/fastify'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { app, brokenStore, clocked, handler, RecordingStore } from './support.ts'

const twoPerMinute = () => [fixedWindow({ limit: 2, windowMs: 60_000 })]

const open: FastifyInstance[] = []
async function track(instance: Promise<FastifyInstance>): Promise<FastifyInstance> {
  const ready = await instance
  open.push(ready)
  return ready
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((a) => a.close()))
})

describe('global limit', () => {
  it('admits with exact headers, then denies with 429, Retry-After and a problem body', async () => {
    const { store } = clocked()
    const h = handler()
    const a = await track(app({ rules: twoPerMinute(), store }, (a) => a.get('/a', h.handle)))

    const first = await a.inject('/a')
    expect(first.statusCode).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"2-per-60s";q=2;w=60')
    expect(first.headers['ratelimit']).toBe('"2-per-60s";r=1;t=20')
    expect(first.headers['retry-after']).toBeUndefined()
    expect(first.json()).toEqual({ ok: true, remaining: 1 })

    expect((await a.inject('/a')).headers['ratelimit']).toBe('"2-per-60s";r=0;t=20')
    const denied = await a.inject('/a')
    expect(denied.statusCode).toBe(429)
    expect(denied.headers['retry-after']).toBe('20')
    expect(denied.headers['ratelimit-policy']).toBe('"2-per-60s";q=2;w=60')
    expect(denied.headers['ratelimit']).toBe('"2-per-60s";r=0;t=20')
    expect(denied.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(denied.body).toBe(
      '{"type":"about:blank","title":"Too Many Requests","status":429,' +
        '"detail":"Rate limit 2-per-60s exceeded; retry in 20 s.","retryAfter":20}',
    )
    expect(h.calls).toHaveLength(2)
  })

  it('counts one key across routes, like app.use; a window later it admits again', async () => {
    const { clock, store } = clocked()
    const a = await track(
      app({ rules: twoPerMinute(), store }, (a) => {
        a.get('/a', handler().handle)
        a.post('/b', handler().handle)
      }),
    )
    expect((await a.inject('/a')).statusCode).toBe(200)
    expect((await a.inject({ method: 'POST', url: '/b' })).statusCode).toBe(200)
    expect((await a.inject('/a')).statusCode).toBe(429)
    clock.now += 20_000
    expect((await a.inject('/a')).statusCode).toBe(200)
  })

  it('leaves 404s alone and limits routes registered in child contexts', async () => {
    const { store } = clocked()
    const a = await track(
      app({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }, (a) => {
        a.register(async (child) => child.get('/child', handler().handle), { prefix: '/v1' })
      }),
    )
    expect((await a.inject('/nowhere')).headers['ratelimit']).toBeUndefined()
    expect((await a.inject('/v1/child')).statusCode).toBe(200)
    expect((await a.inject('/v1/child')).statusCode).toBe(429)
  })

  it('sets request.rateLimit to the decision; undefined on routes nothing limits (as in Express)', async () => {
    const seen: (Decision | undefined)[] = []
    const a = await track(
      app({ rules: twoPerMinute(), store: clocked().store }, (a) => {
        a.get('/a', async (request) => seen.push(request.rateLimit))
        a.get('/free', { config: { rateLimit: false } }, async (request) => seen.push(request.rateLimit))
      }),
    )
    await a.inject('/a')
    await a.inject('/free')
    expect(seen[0]).toMatchObject({ allowed: true, limit: 2, remaining: 1, rule: '2-per-60s' })
    expect(seen).toHaveLength(2)
    expect(seen[1]).toBeUndefined()
  })
})

describe('global: false, route config and the decorator', () => {
  it('with global: false limits only routes that ask, by config or by hook', async () => {
    const { store } = clocked()
    const a = await track(
      app({ global: false, rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }, (a) => {
        a.get('/open', handler().handle)
        a.get('/config', { config: { rateLimit: {} } }, handler().handle)
        a.get('/hook', { onRequest: a.rateLimit() }, handler().handle)
      }),
    )
    for (let i = 0; i < 3; i++) {
      const free = await a.inject('/open')
      expect(free.statusCode).toBe(200)
      expect(free.headers['ratelimit']).toBeUndefined()
    }
    expect((await a.inject('/config')).statusCode).toBe(200)
    // `{}` and `rateLimit()` are the plugin's own limit: one counter for the key.
    expect((await a.inject('/hook')).statusCode).toBe(429)
  })

  it('merges a route config over the plugin: own rules get their own limiter and counts', async () => {
    const recording = new RecordingStore(clocked().store)
    const a = await track(
      app({ rules: twoPerMinute(), store: recording }, (a) => {
        a.get('/a', handler().handle)
        a.post(
          '/pay',
          { config: { rateLimit: { rules: [slidingLog({ limit: 1, windowMs: 1000 })] } } },
          handler().handle,
        )
      }),
    )
    const pay = await a.inject({ method: 'POST', url: '/pay' })
    expect(pay.headers['ratelimit-policy']).toBe('"1-per-1s";q=1;w=1')
    expect((await a.inject({ method: 'POST', url: '/pay' })).statusCode).toBe(429)
    // The plugin's counter is untouched by /pay.
    expect((await a.inject('/a')).headers['ratelimit']).toBe('"2-per-60s";r=1;t=20')
    expect(recording.calls.map((c) => c.prefix)).toEqual(['sluice:POST /pay', 'sluice:POST /pay', 'sluice'])
  })

  it('shares the plugin limiter when a route only changes how it counts (cost, key, message)', async () => {
    const { store } = clocked()
    const a = await track(
      app({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store }, (a) => {
        a.get('/a', handler().handle)
        a.get('/heavy', { config: { rateLimit: { cost: 3 } } }, handler().handle)
      }),
    )
    expect((await a.inject('/heavy')).headers['ratelimit']).toBe('"5-per-60s";r=2;t=20')
    expect((await a.inject('/a')).headers['ratelimit']).toBe('"5-per-60s";r=1;t=20')
    expect((await a.inject('/heavy')).statusCode).toBe(429)
  })

  it('config.rateLimit: false turns limiting off for that route', async () => {
    const a = await track(
      app({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store }, (a) => {
        a.get('/health', { config: { rateLimit: false } }, handler().handle)
      }),
    )
    for (let i = 0; i < 3; i++) {
      const res = await a.inject('/health')
      expect(res.statusCode).toBe(200)
      expect(res.headers['ratelimit-policy']).toBeUndefined()
    }
  })

  it('gives routes with their own rules distinct prefixes on the shared store, even with equal rules', async () => {
    const recording = new RecordingStore(clocked().store)
    const own = { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })] }
    const a = await track(
      app({ rules: twoPerMinute(), store: recording }, (a) => {
        a.get('/a', { config: { rateLimit: own } }, handler().handle)
        a.get('/b', { config: { rateLimit: { ...own } } }, handler().handle)
        a.get('/users/:id', { config: { rateLimit: own } }, handler().handle)
      }),
    )
    expect((await a.inject('/a')).statusCode).toBe(200)
    expect((await a.inject('/b')).statusCode).toBe(200)
    expect((await a.inject('/users/1')).statusCode).toBe(200)
    expect((await a.inject('/users/2')).statusCode).toBe(429)
    expect(new Set(recording.calls.map((c) => c.prefix))).toEqual(
      new Set(['sluice:GET /a', 'sluice:GET /b', 'sluice:GET /users/:id']),
    )
  })

  it('derives distinct prefixes for constrained twins, and a digest for URLs a prefix cannot hold', async () => {
    const recording = new RecordingStore(clocked().store)
    const a = await track(
      app({ global: false, rules: twoPerMinute(), store: recording, prefix: 'api' }, (a) => {
        for (const version of ['1.0.0', '2.0.0']) {
          const rateLimit = { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })] }
          a.get('/v', { constraints: { version }, config: { rateLimit } }, handler().handle)
        }
        a.get(
          `/${'long/'.repeat(30)}:id`,
          { config: { rateLimit: { cost: 1, prefix: undefined, rules: twoPerMinute() } } },
          handler().handle,
        )
      }),
    )
    expect((await a.inject({ url: '/v', headers: { 'accept-version': '1.0.0' } })).statusCode).toBe(200)
    expect((await a.inject({ url: '/v', headers: { 'accept-version': '2.0.0' } })).statusCode).toBe(200)
    expect((await a.inject({ url: '/v', headers: { 'accept-version': '1.0.0' } })).statusCode).toBe(429)
    await a.inject(`/${'long/'.repeat(30)}7`)
    const prefixes = recording.calls.map((c) => c.prefix)
    expect(prefixes.slice(0, 3)).toEqual(['api:GET /v', 'api:GET /v#2', 'api:GET /v'])
    expect(prefixes[3]).toMatch(/^api:#[\w-]{22}$/)
  })

  it("shares a GET route's limit with Fastify's HEAD twin", async () => {
    const a = await track(
      app({ global: false, store: clocked().store }, (a) => {
        a.get('/doc', { config: { rateLimit: { rules: twoPerMinute() } } }, handler().handle)
      }),
    )
    expect((await a.inject('/doc')).statusCode).toBe(200)
    expect((await a.inject({ method: 'HEAD', url: '/doc' })).statusCode).toBe(200)
    expect((await a.inject('/doc')).statusCode).toBe(429)
  })

  it("a route of method ['GET', 'POST'] with a route prefix starts (no ERR_SLUICE_PREFIX_COLLISION): one limit for both methods and its HEAD twin", async () => {
    const { store } = clocked()
    const a = await track(
      app({ global: false, store }, (a) => {
        a.route({
          method: ['GET', 'POST'],
          url: '/doc',
          config: { rateLimit: { rules: [fixedWindow({ limit: 3, windowMs: 60_000 })], prefix: 'doc' } },
          handler: handler().handle,
        })
      }),
    )
    const statuses: number[] = []
    for (const method of ['GET', 'POST', 'HEAD', 'GET'] as const) {
      statuses.push((await a.inject({ method, url: '/doc' })).statusCode)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
  })

  it('a route of several methods without a prefix counts its HEAD twin on the same limit', async () => {
    const a = await track(
      app({ global: false, store: clocked().store }, (a) => {
        a.route({
          method: ['GET', 'POST'],
          url: '/doc',
          config: { rateLimit: { rules: twoPerMinute() } },
          handler: handler().handle,
        })
      }),
    )
    expect((await a.inject({ method: 'HEAD', url: '/doc' })).statusCode).toBe(200)
    expect((await a.inject({ method: 'POST', url: '/doc' })).statusCode).toBe(200)
    expect((await a.inject({ method: 'HEAD', url: '/doc' })).statusCode).toBe(429)
  })

  it('rateLimit(options) is one limit for every route given the hook, with its limiter exposed', async () => {
    const { store } = clocked()
    let strict: ReturnType<FastifyInstance['rateLimit']> | undefined
    const a = await track(
      app({ rules: [fixedWindow({ limit: 10, windowMs: 60_000 })], store }, (a) => {
        strict = a.rateLimit({ rules: twoPerMinute() })
        a.get('/one', { onRequest: strict }, handler().handle)
        a.get('/two', { onRequest: [strict] }, handler().handle)
        a.get('/other', handler().handle)
      }),
    )
    expect((await a.inject('/one')).statusCode).toBe(200)
    expect((await a.inject('/two')).statusCode).toBe(200)
    expect((await a.inject('/one')).statusCode).toBe(429)
    expect(strict!.limiter.prefix).toBe('sluice:rateLimit#1')
    expect((await strict!.limiter.peek('127.0.0.1')).remaining).toBe(0)
    // The global limit counted none of those: the route's own limit wins.
    expect((await a.inject('/other')).headers['ratelimit']).toBe('"10-per-60s";r=9;t=20')
  })

  it('rejects a route prefix that another limiter on the store already uses', async () => {
    const a = Fastify()
    await a.register(sluice, { rules: twoPerMinute(), store: clocked().store })
    expect(() =>
      a.get('/x', { config: { rateLimit: { prefix: 'sluice', rules: twoPerMinute() } } }, handler().handle),
    ).toThrowError(expect.objectContaining({ code: ErrorCode.PREFIX_COLLISION }))
    await a.close()
  })
})

describe('not-found handler and several registrations', () => {
  it('limits 404s through a hook on the not-found handler', async () => {
    const a = await track(
      app(
        { global: false, rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store },
        (a) => {
          a.setNotFoundHandler({ preHandler: a.rateLimit() }, async (_request, reply) =>
            reply.code(404).send({ missing: true }),
          )
        },
      ),
    )
    expect((await a.inject('/nothing')).statusCode).toBe(404)
    expect((await a.inject('/else')).statusCode).toBe(429)
  })

  it('a second registration on one instance keeps the first rateLimit; one in a child context has its own', async () => {
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store })
    await a.register(sluice, {
      global: false,
      rules: twoPerMinute(),
      store: clocked().store,
      prefix: 'second',
    })
    let childHook: ReturnType<FastifyInstance['rateLimit']> | undefined
    await a.register(async (child) => {
      await child.register(sluice, {
        global: false,
        rules: twoPerMinute(),
        store: clocked().store,
        prefix: 'child',
      })
      childHook = child.rateLimit()
    })
    expect(a.rateLimit().limiter.prefix).toBe('sluice')
    expect(childHook!.limiter.prefix).toBe('child')
  })
})

describe('counting once', () => {
  it('plugin + rateLimit() on a route: the same limit counts once', async () => {
    const a = await track(
      app({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store: clocked().store }, (a) => {
        a.get('/a', { onRequest: a.rateLimit() }, handler().handle)
      }),
    )
    expect((await a.inject('/a')).json()).toEqual({ ok: true, remaining: 4 })
    expect((await a.inject('/a')).json()).toEqual({ ok: true, remaining: 3 })
  })

  it('plugin + a context hook + route config: one count per registration, the first hook wins', async () => {
    const recording = new RecordingStore(clocked().store)
    const a = await track(
      app({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store: recording }, (a) => {
        a.register(async (child) => {
          child.addHook('onRequest', child.rateLimit({ rules: twoPerMinute(), prefix: 'ctx' }))
          child.get('/a', handler().handle)
          child.get('/b', { config: { rateLimit: { cost: 2 } } }, handler().handle)
        })
      }),
    )
    await a.inject('/a')
    await a.inject('/b')
    expect(recording.calls.map((c) => c.prefix)).toEqual(['ctx', 'ctx'])
  })

  it('two registrations count on their own limiters once each; a shared limiter counts once', async () => {
    const { store } = clocked()
    const outer = new RecordingStore(store)
    const inner = new RecordingStore(new MemoryStore({ sweepIntervalMs: 0 }))
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules: twoPerMinute(), store: outer })
    await a.register(async (child) => {
      await child.register(sluice, { rules: [fixedWindow({ limit: 9, windowMs: 60_000 })], store: inner })
      child.get('/both', handler().handle)
    })
    const shared = createLimiter({ rules: twoPerMinute(), store: new RecordingStore(clocked().store) })
    await a.register(async (child) => {
      await child.register(sluice, { limiter: shared })
      await child.register(async (grandchild) => {
        await grandchild.register(sluice, { limiter: shared, key: 'route' })
        grandchild.get('/shared', handler().handle)
      })
    })
    await a.ready()
    const both = await a.inject('/both')
    expect(both.statusCode).toBe(200)
    expect(outer.calls).toHaveLength(1)
    expect(inner.calls).toHaveLength(1)
    // Both limits are on the reply, the outer registration's first.
    expect(both.headers['ratelimit-policy']).toBe('"2-per-60s";q=2;w=60, "9-per-60s";q=9;w=60')
    expect(both.headers['ratelimit']).toMatch(/^"2-per-60s";r=1;t=\d+, "9-per-60s";r=8;t=\d+$/)

    await a.inject('/shared')
    expect((shared.store as RecordingStore).calls.map((c) => c.key)).toEqual(['127.0.0.1'])
  })

  it('a denial by a later registration lists both limits, through the default error handler', async () => {
    const a = Fastify()
    open.push(a)
    const outer = [fixedWindow({ limit: 9, windowMs: 60_000, name: 'outer' })]
    await a.register(sluice, { rules: outer, store: clocked().store })
    await a.register(async (child) => {
      const inner = [fixedWindow({ limit: 1, windowMs: 60_000, name: 'inner' })]
      await child.register(sluice, { rules: inner, store: clocked().store })
      child.get('/x', handler().handle)
    })
    await a.ready()
    const admitted = await a.inject('/x')
    expect(admitted.statusCode).toBe(200)
    expect(admitted.headers['ratelimit-policy']).toBe('"outer";q=9;w=60, "inner";q=1;w=60')
    const denied = await a.inject('/x')
    expect(denied.statusCode).toBe(429)
    expect(denied.headers['ratelimit-policy']).toBe('"outer";q=9;w=60, "inner";q=1;w=60')
    expect(denied.headers['ratelimit']).toMatch(/^"outer";r=7;t=\d+, "inner";r=0;t=\d+$/)
    expect(Number(denied.headers['retry-after'])).toBeGreaterThan(0)
  })

  it('a limiter reached through two registrations with guards of their own counts once', async () => {
    const shared = createLimiter({ rules: twoPerMinute(), store: new RecordingStore(clocked().store) })
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { limiter: shared })
    await a.register(async (child) => {
      await child.register(sluice, { global: false })
      child.get('/x', { onRequest: child.rateLimit({ limiter: shared }) }, handler().handle)
    })
    await a.ready()
    expect((await a.inject('/x')).statusCode).toBe(200)
    expect((shared.store as RecordingStore).calls).toHaveLength(1)
    // One of two used: the next would still be admitted.
    expect((await shared.peek('127.0.0.1')).allowed).toBe(true)
  })

  it('a limiter reached through three registrations counts once, next to another that counted first', async () => {
    const own = new RecordingStore(clocked().store)
    const shared = createLimiter({ rules: twoPerMinute(), store: new RecordingStore(clocked().store) })
    const a = Fastify()
    open.push(a)
    // Hooks on /x, in order: the route's own (shared), the root's global (its own limiter), the child's
    // global (shared again). Each registration has its own guard, so only the limiter's mark stops the third.
    await a.register(sluice, { rules: [fixedWindow({ limit: 9, windowMs: 60_000 })], store: own })
    await a.register(async (child) => {
      await child.register(sluice, { limiter: shared })
      await child.register(async (grandchild) => {
        await grandchild.register(sluice, { global: false })
        grandchild.get('/x', { onRequest: grandchild.rateLimit({ limiter: shared }) }, handler().handle)
      })
    })
    await a.ready()
    expect((await a.inject('/x')).statusCode).toBe(200)
    expect((await a.inject('/x')).statusCode).toBe(200)
    expect(own.calls).toHaveLength(2)
    expect((shared.store as RecordingStore).calls).toHaveLength(2)
  })
})

describe('keys', () => {
  const one = () => [fixedWindow({ limit: 1, windowMs: 60_000 })]

  it("'ip' is request.ip: without trustProxy a spoofed X-Forwarded-For changes nothing", async () => {
    const a = await track(app({ rules: one(), store: clocked().store }, (a) => a.get('/', handler().handle)))
    const from = (xff: string) =>
      a.inject({ url: '/', remoteAddress: '203.0.113.7', headers: { 'x-forwarded-for': xff } })
    expect((await from('198.51.100.1')).statusCode).toBe(200)
    expect((await from('198.51.100.2')).statusCode).toBe(429)
  })

  it("'ip' follows X-Forwarded-For when Fastify trusts the proxy", async () => {
    const a = await track(
      app({ rules: one(), store: clocked().store }, (a) => a.get('/', handler().handle), {
        trustProxy: true,
      }),
    )
    const from = (xff: string) =>
      a.inject({ url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': xff } })
    expect((await from('198.51.100.1')).statusCode).toBe(200)
    expect((await from('198.51.100.2')).statusCode).toBe(200)
    expect((await from('198.51.100.1')).statusCode).toBe(429)
  })

  it('groups IPv6 clients by /56 by default, or by ipv6Subnet', async () => {
    const recording = new RecordingStore(clocked().store)
    const a = await track(
      app({ rules: one(), store: recording }, (a) => {
        a.get('/56', handler().handle)
        a.get('/64', { config: { rateLimit: { ipv6Subnet: 64 } } }, handler().handle)
      }),
    )
    const get = (url: string, ip: string) => a.inject({ url, remoteAddress: ip })
    expect((await get('/56', '2001:db8:0:1::1')).statusCode).toBe(200)
    expect((await get('/56', '2001:db8:0:ff:abcd::2')).statusCode).toBe(429)
    expect((await get('/64', '2001:db8:1:1::1')).statusCode).toBe(200)
    expect((await get('/64', '2001:db8:1:2::1')).statusCode).toBe(200)
    expect(recording.calls.map((c) => c.key)).toEqual([
      '2001:db8::/56',
      '2001:db8::/56',
      '2001:db8:1:1::/64',
      '2001:db8:1:2::/64',
    ])
  })

  it("'route' is the method and URL template, never the raw URL", async () => {
    const recording = new RecordingStore(clocked().store)
    const a = await track(
      app({ rules: one(), store: recording, key: 'route' }, (a) => {
        a.get('/users/:id', handler().handle)
        a.get('/orders/:id', { onRequest: a.rateLimit({ key: ['route', 'ip'] }) }, handler().handle)
      }),
    )
    expect((await a.inject('/users/1')).statusCode).toBe(200)
    expect((await a.inject('/users/2')).statusCode).toBe(429)
    expect((await a.inject('/orders/7?x=1')).statusCode).toBe(200)
    expect(recording.calls.map((c) => c.key)).toEqual([
      'GET /users/:id',
      'GET /users/:id',
      'GET /orders/\\:id:127.0.0.1',
    ])
  })

  it("'route' is the template under case-insensitive routing and parameterised prefixes, key and label alike", async () => {
    const recording = new RecordingStore(clocked().store)
    const a = Fastify({ routerOptions: { caseSensitive: false } })
    open.push(a)
    await a.register(sluice, {
      rules: [fixedWindow({ limit: 100, windowMs: 60_000 })],
      store: recording,
      key: 'route',
    })
    await a.register(
      async (tenant) => {
        tenant.get('/pay', handler().handle)
      },
      { prefix: '/t/:tenant' },
    )
    a.get('/api/pay', { config: { rateLimit: { key: 'route', rules: twoPerMinute() } } }, handler().handle)
    await a.ready()
    const routes: unknown[] = []
    const listener = (message: unknown) => routes.push((message as { route?: unknown }).route)
    subscribe('sluice:http', listener)
    try {
      for (const url of ['/t/acme/pay', '/T/globex/pay', '/t/ACME/PAY']) {
        expect((await a.inject(url)).statusCode).toBe(200)
      }
      const statuses: number[] = []
      for (const url of ['/api/pay', '/API/pay', '/Api/Pay']) statuses.push((await a.inject(url)).statusCode)
      expect(statuses).toEqual([200, 200, 429])
    } finally {
      unsubscribe('sluice:http', listener)
    }
    expect(recording.calls.map((c) => c.key)).toEqual([
      'GET /t/:tenant/pay',
      'GET /t/:tenant/pay',
      'GET /t/:tenant/pay',
      'GET /api/pay',
      'GET /api/pay',
      'GET /api/pay',
    ])
    expect(routes).toEqual([...Array(3).fill('GET /t/:tenant/pay'), ...Array(3).fill('GET /api/pay')])
  })

  it('keys by headers and functions; a table of limits per key from a rules function', async () => {
    const table: Record<string, number> = { 'PAYMENT:ALIPAY': 1, 'PAYMENT:WECHAT': -1 }
    const a = await track(
      app(
        {
          store: clocked().store,
          key: { header: ['x-biz-type', 'x-channel'] },
          rules: (key) => (key in table ? [fixedWindow({ limit: table[key]!, windowMs: 60_000 })] : null),
        },
        (a) => a.post('/pay', handler().handle),
      ),
    )
    const pay = (channel: string) =>
      a.inject({ method: 'POST', url: '/pay', headers: { 'x-biz-type': 'PAYMENT', 'x-channel': channel } })
    expect((await pay('ALIPAY')).statusCode).toBe(200)
    expect((await pay('ALIPAY')).statusCode).toBe(429)
    for (let i = 0; i < 3; i++) {
      for (const channel of ['WECHAT', 'UNIONPAY']) {
        const res = await pay(channel)
        expect(res.statusCode).toBe(200)
        expect(res.headers['ratelimit']).toBeUndefined()
      }
    }

    const byUser = await track(
      app(
        { rules: one(), store: clocked().store, key: (request) => request.headers['x-user'] as string },
        (a) => a.get('/', handler().handle),
      ),
    )
    expect((await byUser.inject({ url: '/', headers: { 'x-user': 'ann' } })).statusCode).toBe(200)
    expect((await byUser.inject({ url: '/', headers: { 'x-user': 'bob' } })).statusCode).toBe(200)
    expect((await byUser.inject({ url: '/', headers: { 'x-user': 'ann' } })).statusCode).toBe(429)
  })

  it('a missing key part is rejected with 400 by default, skipped, or counted under a default', async () => {
    const key = { header: 'x-channel' }
    const h = handler()
    const a = await track(
      app({ rules: one(), store: clocked().store, key }, (a) => {
        a.get('/reject', h.handle)
        a.get('/skip', { config: { rateLimit: { onMissingKey: 'skip' } } }, h.handle)
        a.get('/default', { config: { rateLimit: { onMissingKey: { default: 'none' } } } }, h.handle)
      }),
    )
    const rejected = await a.inject('/reject')
    expect(rejected.statusCode).toBe(400)
    expect(rejected.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(rejected.body).toBe(
      '{"type":"about:blank","title":"Bad Request","status":400,' +
        '"detail":"This request needs the x-channel header."}',
    )
    expect(rejected.body).not.toContain('undefined')
    for (let i = 0; i < 2; i++) {
      const skipped = await a.inject('/skip')
      expect(skipped.statusCode).toBe(200)
      expect(skipped.json()).toEqual({ ok: true, remaining: null })
    }
    expect((await a.inject('/default')).statusCode).toBe(200)
    expect((await a.inject('/default')).statusCode).toBe(429)
    expect((await a.inject({ url: '/default', headers: { 'x-channel': 'none' } })).statusCode).toBe(429)
    expect((await a.inject({ url: '/default', headers: { 'x-channel': 'other' } })).statusCode).toBe(200)
    expect(h.calls).toHaveLength(4)
  })

  it('a missing key says what a client can act on, never "key function #1"', async () => {
    const a = await track(
      app(
        {
          rules: one(),
          store: clocked().store,
          key: ['ip', (request) => request.headers['x-api-key'] as string],
        },
        (a) => {
          a.get('/', handler().handle)
        },
      ),
    )
    const rejected = await a.inject('/')
    expect(rejected.statusCode).toBe(400)
    expect(rejected.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'This request cannot be identified for rate limiting.',
    })
    expect((await a.inject({ url: '/', headers: { 'x-api-key': 'k1' } })).statusCode).toBe(200)
  })
})

describe('skip, cost, headers and messages', () => {
  it('skips what skip() says; takes cost from a function', async () => {
    const a = await track(
      app(
        {
          rules: [fixedWindow({ limit: 10, windowMs: 60_000 })],
          store: clocked().store,
          skip: (request) => request.headers['x-internal'] === 'yes',
          cost: (request) => (request.method === 'POST' ? 4 : 1),
        },
        (a) => a.route({ method: ['GET', 'POST'], url: '/', handler: handler().handle }),
      ),
    )
    const internal = await a.inject({ url: '/', headers: { 'x-internal': 'yes' } })
    expect(internal.headers['ratelimit']).toBeUndefined()
    expect((await a.inject({ method: 'POST', url: '/' })).json()).toEqual({ ok: true, remaining: 6 })
    expect((await a.inject('/')).json()).toEqual({ ok: true, remaining: 5 })
  })

  it('writes legacy headers, or none, as headers asks', async () => {
    const a = await track(
      app({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store }, (a) => {
        a.get(
          '/legacy',
          { config: { rateLimit: { headers: { standard: 'draft-6', legacy: true } } } },
          handler().handle,
        )
        a.get('/none', { config: { rateLimit: { headers: false, key: () => 'none' } } }, handler().handle)
      }),
    )
    const legacy = await a.inject('/legacy')
    expect(legacy.headers).toMatchObject({
      'ratelimit-policy': '1;w=60',
      'ratelimit-limit': '1',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '20',
      'x-ratelimit-limit': '1',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '20',
    })
    await a.inject('/none')
    const none = await a.inject('/none')
    expect(none.statusCode).toBe(429)
    expect(Object.keys(none.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([])
  })

  it('uses message and statusCode: a string detail, an object as is, a function of the request', async () => {
    const one = [fixedWindow({ limit: 1, windowMs: 60_000 })]
    const a = await track(
      app({ rules: one, store: clocked().store, key: 'route' }, (a) => {
        a.get('/text', { config: { rateLimit: { message: 'Slow down.' } } }, handler().handle)
        a.get(
          '/object',
          { config: { rateLimit: { message: { error: 'busy' }, statusCode: 503 } } },
          handler().handle,
        )
        a.get(
          '/built',
          {
            config: {
              rateLimit: { message: (request, decision) => ({ url: request.url, rule: decision.rule }) },
            },
          },
          handler().handle,
        )
      }),
    )
    for (const url of ['/text', '/object', '/built']) await a.inject(url)
    const text = await a.inject('/text')
    expect(text.json()).toMatchObject({ status: 429, detail: 'Slow down.' })
    const object = await a.inject('/object')
    expect(object.statusCode).toBe(503)
    expect(object.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(object.body).toBe('{"error":"busy"}')
    expect((await a.inject('/built')).body).toBe('{"url":"/built","rule":"1-per-60s"}')
  })
})

describe('shadow mode', () => {
  it('counts as usual but lets every request through, with no rate-limit headers, per route too', async () => {
    const shadowed: string[] = []
    const listener = (m: unknown) => shadowed.push((m as { action: string }).action)
    subscribe('sluice:http', listener)
    try {
      const a = await track(
        app(
          { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store, shadow: true },
          (a) => {
            a.get('/', handler().handle)
            a.get('/enforced', { config: { rateLimit: { shadow: false } } }, handler().handle)
          },
        ),
      )
      const answers = [await a.inject('/'), await a.inject('/')]
      expect(answers.map((r) => r.statusCode)).toEqual([200, 200])
      for (const r of answers)
        expect(Object.keys(r.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([])
      expect(answers[1]!.json()).toEqual({ ok: true, remaining: 0 })
      // The same limiter, enforced on one route: the key is already spent.
      expect((await a.inject('/enforced')).statusCode).toBe(429)
      expect(shadowed).toEqual(['allow', 'shadow', 'deny'])
    } finally {
      unsubscribe('sluice:http', listener)
    }
  })
})

describe('hook: onRequest or preHandler', () => {
  const one = () => [fixedWindow({ limit: 1, windowMs: 60_000 })]
  /** An app whose authentication (a preValidation hook, after onRequest) sets request.user from a token. */
  async function authenticated(options: Parameters<typeof app>[0], routes?: (a: FastifyInstance) => void) {
    return track(
      app(options, (a) => {
        a.addHook('preValidation', async (request) => {
          const token = request.headers.authorization
          if (token !== undefined)
            (request as unknown as { user: string }).user = token.replace('Bearer ', '')
        })
        a.get('/', handler().handle)
        routes?.(a)
      }),
    )
  }
  const user = (request: unknown) => (request as { user?: string }).user
  const as = (name: string, url = '/') => ({ url, headers: { authorization: `Bearer ${name}` } })

  it('a preHandler limit keys on the user authentication set; at onRequest (the default) there is none yet', async () => {
    const early = await authenticated({ rules: one(), store: clocked().store, key: user })
    expect((await early.inject(as('ann'))).statusCode).toBe(400)

    const store = clocked().store
    const late = await authenticated({ rules: one(), store, key: user, hook: 'preHandler' })
    expect((await late.inject(as('ann'))).statusCode).toBe(200)
    expect((await late.inject(as('ann'))).statusCode).toBe(429)
    expect((await late.inject(as('bob'))).statusCode).toBe(200)
    const denied = await late.inject(as('bob'))
    expect(denied.statusCode).toBe(429)
    expect(denied.headers['retry-after']).toBe('20')
  })

  it('a route config chooses its own hook over the plugin', async () => {
    const a = await authenticated({ rules: one(), store: clocked().store, key: 'ip' }, (a) => {
      a.get(
        '/mine',
        { config: { rateLimit: { key: user, hook: 'preHandler', rules: twoPerMinute() } } },
        handler().handle,
      )
    })
    const statuses: number[] = []
    for (const name of ['ann', 'ann', 'ann', 'bob'])
      statuses.push((await a.inject(as(name, '/mine'))).statusCode)
    expect(statuses).toEqual([200, 200, 429, 200])
  })

  it('checks hook: only onRequest or preHandler, and not on fastify.rateLimit()', async () => {
    await expect(app({ rules: one(), hook: 'onSend' as 'onRequest' }, () => {})).rejects.toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      message: expect.stringContaining('sluice.hook'),
    })
    const a = await track(app({ rules: one() }, () => {}))
    expect(() => a.rateLimit({ hook: 'preHandler' })).toThrow(/rateLimit\.hook/)
  })
})

describe('key, rules and cost functions that return a promise', () => {
  it('waits for a key, rules and cost looked up asynchronously, and counts exactly', async () => {
    const owners: Record<string, string> = { k1: 'gold', k2: 'free' }
    const plans: Record<string, number> = { gold: 4, free: 2 }
    const a = await track(
      app(
        {
          store: clocked().store,
          key: async (request) => owners[String(request.headers['x-api-key'])] ?? null,
          rules: async (plan) => [fixedWindow({ limit: plans[plan] ?? 0, windowMs: 60_000 })],
          cost: async (request) => (request.method === 'POST' ? 2 : 1),
        },
        (a) => {
          a.get('/', handler().handle)
          a.post('/', handler().handle)
        },
      ),
    )
    const statuses: number[] = []
    for (const [method, apiKey] of [
      ['POST', 'k1'],
      ['GET', 'k1'],
      ['POST', 'k1'],
      ['GET', 'k1'],
      ['GET', 'k2'],
      ['GET', 'k2'],
      ['GET', 'k2'],
    ] as const) {
      statuses.push((await a.inject({ method, url: '/', headers: { 'x-api-key': apiKey } })).statusCode)
    }
    expect(statuses).toEqual([200, 200, 429, 200, 200, 200, 429])
    expect((await a.inject('/')).statusCode).toBe(400)
  })

  it("sends a key, rules or cost function's rejection to Fastify's error handler", async () => {
    for (const failing of [
      { key: async () => Promise.reject(new Error('cache down')) },
      { rules: async () => Promise.reject(new Error('cache down')) },
      { cost: async () => Promise.reject(new Error('cache down')) },
    ]) {
      const seen: unknown[] = []
      const a = Fastify()
      open.push(a)
      a.setErrorHandler((error, _request, reply) => {
        seen.push(error)
        return reply.code(503).send()
      })
      await a.register(sluice, { rules: twoPerMinute(), store: clocked().store, ...failing })
      a.get('/', handler().handle)
      expect((await a.inject('/')).statusCode).toBe(503)
      expect(seen).toEqual([new Error('cache down')])
    }
  })
})

describe("Fastify's error path", () => {
  it("hands denials to the user's error handler, headers already on the reply", async () => {
    const seen: unknown[] = []
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store })
    a.setErrorHandler((error, _request, reply) => {
      seen.push(error)
      reply.send({ mine: true, status: reply.statusCode, code: (error as { code?: string }).code })
    })
    a.get('/', handler().handle)
    await a.inject('/')
    const denied = await a.inject('/')
    expect(denied.statusCode).toBe(429)
    expect(denied.json()).toEqual({ mine: true, status: 429, code: 'ERR_SLUICE_RATE_LIMITED' })
    expect(denied.headers['retry-after']).toBe('20')
    expect(denied.headers['ratelimit']).toBe('"1-per-60s";r=0;t=20')
    expect(seen).toHaveLength(1)
    const rejection = seen[0] as RateLimitRejection
    expect(rejection).toBeInstanceOf(RateLimitRejection)
    expect(rejection.statusCode).toBe(429)
    expect(rejection.message).toBe('Rate limit 1-per-60s exceeded; retry in 20 s.')
    expect(rejection.decision).toMatchObject({ allowed: false, retryAfterMs: 20_000 })
    expect(rejection.body).toMatchObject({ status: 429, retryAfter: 20 })
  })

  it("keeps a missing key's 400 through a user's error handler, and the problem type on Fastify's own", async () => {
    for (const custom of [true, false]) {
      const a = Fastify()
      open.push(a)
      await a.register(sluice, {
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store: clocked().store,
        key: { header: 'x-channel' },
      })
      // Fastify drops content-type before a custom handler runs; the rejection's headers carry it.
      if (custom) a.setErrorHandler((error, _request, reply) => reply.send(error))
      a.get('/', handler().handle)
      const rejected = await a.inject('/')
      expect(rejected.statusCode).toBe(400)
      expect(rejected.json()).toMatchObject({
        status: 400,
        detail: 'This request needs the x-channel header.',
      })
      if (!custom) {
        expect(rejected.headers['content-type']).toBe('application/problem+json; charset=utf-8')
        await a.inject({ url: '/', headers: { 'x-channel': 'a' } })
        const denied = await a.inject({ url: '/', headers: { 'x-channel': 'a' } })
        expect([denied.statusCode, denied.headers['content-type']]).toEqual([
          429,
          'application/problem+json; charset=utf-8',
        ])
      }
    }
  })

  it('sends the problem body when a custom error handler passes the rejection on to reply.send', async () => {
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store })
    a.setErrorHandler((error, _request, reply) => {
      reply.send(error)
    })
    a.get('/', handler().handle)
    await a.inject('/')
    const denied = await a.inject('/')
    expect(denied.statusCode).toBe(429)
    expect(denied.json()).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Rate limit 1-per-60s exceeded; retry in 20 s.',
      retryAfter: 20,
    })
  })

  it('runs onSend and onResponse hooks for denials, as for any error response', async () => {
    const sent: number[] = []
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store: clocked().store })
    a.addHook('onSend', async (_request, reply) => {
      sent.push(reply.statusCode)
    })
    a.addHook('onResponse', async (_request, reply) => {
      sent.push(-reply.statusCode)
    })
    a.get('/', handler().handle)
    await a.inject('/')
    await a.inject('/')
    expect(sent).toEqual([200, -200, 429, -429])
  })

  it('onLimited answers instead of sluice when it returns the reply; else sluice denies', async () => {
    const calls: string[] = []
    const h = handler()
    const a = await track(
      app(
        {
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store: clocked().store,
          key: 'route',
          onLimited: (request, _reply, decision) => {
            calls.push(`${request.url} ${decision.rule}`)
          },
        },
        (a) => {
          a.get('/observe', h.handle)
          a.get(
            '/answer',
            {
              config: {
                rateLimit: {
                  onLimited: async (_request, reply, decision) => {
                    await reply.code(418).send({ teapot: decision.retryAfterMs })
                    return reply
                  },
                },
              },
            },
            h.handle,
          )
          a.get(
            '/throw',
            {
              config: {
                rateLimit: {
                  onLimited: () => {
                    throw new Error('onLimited failed')
                  },
                },
              },
            },
            h.handle,
          )
        },
      ),
    )
    for (const url of ['/observe', '/answer', '/throw']) await a.inject(url)
    const observed = await a.inject('/observe')
    expect(observed.statusCode).toBe(429)
    expect(observed.json()).toMatchObject({ title: 'Too Many Requests' })
    expect(calls).toEqual(['/observe 1-per-60s'])
    const answered = await a.inject('/answer')
    expect(answered.statusCode).toBe(418)
    expect(answered.json()).toEqual({ teapot: 20_000 })
    expect(answered.headers['retry-after']).toBe('20')
    const thrown = await a.inject('/throw')
    expect(thrown.statusCode).toBe(500)
    expect(thrown.json()).toMatchObject({ message: 'onLimited failed' })
    expect(h.calls).toHaveLength(3)
  })

  it('follows onStoreError: allow and deny answer by policy; throw goes to the error handler', async () => {
    const seen: unknown[] = []
    const a = Fastify()
    open.push(a)
    const rules = [fixedWindow({ limit: 1, windowMs: 60_000 })]
    await a.register(sluice, { rules, store: brokenStore() })
    a.setErrorHandler((error, _request, reply) => {
      seen.push(error)
      if (error instanceof RateLimitRejection) return reply.send(error)
      reply.code(503).send({ code: (error as { code?: string }).code })
    })
    a.get('/allow', handler().handle)
    a.get('/deny', { config: { rateLimit: { onStoreError: 'deny' } } }, handler().handle)
    a.get('/throw', { config: { rateLimit: { onStoreError: 'throw' } } }, handler().handle)
    await a.ready()
    expect((await a.inject('/allow')).statusCode).toBe(200)
    const denied = await a.inject('/deny')
    expect(denied.statusCode).toBe(429)
    expect(denied.headers['retry-after']).toBe('1')
    const thrown = await a.inject('/throw')
    expect(thrown.statusCode).toBe(503)
    expect(thrown.json()).toEqual({ code: ErrorCode.STORE_ERROR })
    expect(seen.filter((e) => e instanceof RateLimitRejection)).toHaveLength(1)
  })

  it("a store error with 'throw' and no error handler is a 500, never an unhandled rejection", async () => {
    const a = await track(
      app({ rules: twoPerMinute(), store: brokenStore(), onStoreError: 'throw' }, (a) =>
        a.get('/', handler().handle),
      ),
    )
    const res = await a.inject('/')
    expect(res.statusCode).toBe(500)
    expect(res.json()).toMatchObject({ code: ErrorCode.STORE_ERROR })
  })
})

describe('queue-and-wait (leaky bucket)', () => {
  it('holds each queued request its waitMs, then runs it; past maxQueueMs it is 429', async () => {
    const h = handler()
    const a = await track(
      app({ rules: [leakyBucket({ ratePerSecond: 20, maxQueueMs: 100 })], store: clocked().store }, (a) =>
        a.get('/', h.handle),
      ),
    )
    const started = performance.now()
    const timed = async () => {
      const res = await a.inject('/')
      return { status: res.statusCode, ms: performance.now() - started }
    }
    const results = await Promise.all([timed(), timed(), timed(), timed()])
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 429])
    const admitted = results.filter((r) => r.status === 200).map((r) => r.ms)
    admitted.sort((x, y) => x - y)
    expect(admitted[1]).toBeGreaterThanOrEqual(48)
    expect(admitted[2]).toBeGreaterThanOrEqual(98)
    expect(h.calls.map((r) => r.rateLimit!.waitMs).sort((x, y) => x - y)).toEqual([0, 50, 100])
  })
})

describe('options are checked at registration', () => {
  const rules = twoPerMinute()

  async function registering(options: unknown): Promise<unknown> {
    const a = Fastify()
    try {
      await a.register(sluice, options as never)
      await a.ready()
      return undefined
    } catch (error) {
      return error
    } finally {
      await a.close()
    }
  }

  it('names unknown and invalid plugin options sluice.<name>', async () => {
    const cases: [unknown, string][] = [
      [{ rules, windowMs: 1000 }, 'sluice.windowMs'],
      [{ rules, global: 'yes' }, 'sluice.global'],
      [{ rules, onLimited: 'x' }, 'sluice.onLimited'],
      [{ rules, limiter: 'x' }, 'sluice.limiter'],
      [{ rules, cost: 0 }, 'sluice.cost'],
      [{ global: true }, 'sluice.rules'],
      [{ global: false, cost: 0 }, 'sluice.cost'],
      [{ global: false, statusCode: 200 }, 'sluice.statusCode'],
      [{ rules, key: 'url' }, 'sluice.key'],
      [{ rules, headers: { standard: 'draft-1' } }, 'sluice.headers.standard'],
      [{ global: false, prefix: 'a{b}' }, 'sluice.prefix'],
      [{ global: false, onMissingKey: 'ignore' }, 'sluice.onMissingKey'],
    ]
    for (const [options, option] of cases) {
      expect(await registering(options)).toMatchObject({ code: ErrorCode.INVALID_OPTION, option })
    }
  })

  it('names unknown route options config.rateLimit.<name>, and decorator ones rateLimit.<name>', async () => {
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { rules, store: clocked().store })
    const route = (rateLimit: unknown) => () =>
      a.get(`/r${Math.random()}`, { config: { rateLimit: rateLimit as false } }, handler().handle)
    expect(route({ max: 5 })).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'config.rateLimit.max' }),
    )
    expect(route({ global: false })).toThrowError(
      expect.objectContaining({ option: 'config.rateLimit.global' }),
    )
    expect(route(true)).toThrowError(expect.objectContaining({ option: 'config.rateLimit' }))
    expect(route({ cost: 1.5 })).toThrowError(expect.objectContaining({ option: 'config.rateLimit.cost' }))
    expect(route({ ipv6Subnet: 0 })).toThrowError(
      expect.objectContaining({ option: 'config.rateLimit.ipv6Subnet' }),
    )
    expect(route({ limiter: createLimiter({ rules }), rules })).toThrowError(
      expect.objectContaining({ option: 'config.rateLimit.rules' }),
    )
    expect(() => a.rateLimit({ timeWindow: 1 } as never)).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'rateLimit.timeWindow' }),
    )
  })

  it('with global: false and no plugin rules, a route without rules is an error at registration', async () => {
    const a = Fastify()
    open.push(a)
    await a.register(sluice, { global: false, store: clocked().store })
    expect(() => a.get('/', { config: { rateLimit: { cost: 2 } } }, handler().handle)).toThrowError(
      expect.objectContaining({ option: 'config.rateLimit.rules' }),
    )
    expect(() => a.rateLimit()).toThrowError(expect.objectContaining({ option: 'rateLimit.rules' }))
  })
})

describe('closing the app', () => {
  it('releases its limiters prefixes, so the plugin registers again on the same long-lived store', async () => {
    const { store } = clocked()
    const config = { store, rules: [fixedWindow({ limit: 1, windowMs: 1000 })] }
    for (let round = 0; round < 2; round++) {
      const server = Fastify()
      await server.register(sluice, config)
      server.get(
        '/',
        { config: { rateLimit: { rules: [fixedWindow({ limit: 5, windowMs: 1000 })] } } },
        async () => 'ok',
      )
      await server.ready()
      expect((await server.inject('/')).statusCode).toBe(200)
      await server.close()
    }
  })
})
