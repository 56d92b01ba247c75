import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { fixedWindow, slidingLog } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { clocked, flavours, handler } from './support.ts'

const one = [fixedWindow({ limit: 1, windowMs: 60_000 })]
const ten = [fixedWindow({ limit: 10, windowMs: 60_000 })]

/** Units a key has used under a fixed window of `limit`: `peek` answers as if it counted one more. */
async function used(limit: ReturnType<typeof rateLimit>, key: string, of = 10): Promise<number> {
  return of - 1 - (await limit.limiter.peek(key)).remaining
}

describe.each(flavours)('keys on $name', ({ express }) => {
  it("keys by req.ip by default; X-Forwarded-For counts only under Express's trust proxy", async () => {
    const plain = express()
    const limit = rateLimit({ rules: ten, store: clocked().store })
    plain.use(limit)
    plain.use(handler().handle)
    await request(plain).get('/').set('X-Forwarded-For', '203.0.113.9')
    await request(plain).get('/').set('X-Forwarded-For', '198.51.100.4')
    expect(await used(limit, '127.0.0.1')).toBe(2)
    expect(await used(limit, '203.0.113.9')).toBe(0)
    expect(await used(limit, '198.51.100.4')).toBe(0)

    const proxied = express()
    proxied.set('trust proxy', 'loopback')
    const trusted = rateLimit({ rules: one, store: clocked().store })
    proxied.use(trusted)
    proxied.use(handler().handle)
    expect((await request(proxied).get('/').set('X-Forwarded-For', '203.0.113.9')).status).toBe(200)
    expect((await request(proxied).get('/').set('X-Forwarded-For', '198.51.100.4')).status).toBe(200)
    expect((await request(proxied).get('/').set('X-Forwarded-For', '203.0.113.9')).status).toBe(429)
    expect((await trusted.limiter.peek('127.0.0.1')).allowed).toBe(true)
  })

  it('groups IPv6 clients by /56, or by ipv6Subnet', async () => {
    const app = express()
    app.set('trust proxy', true)
    const wide = rateLimit({ rules: ten, store: clocked().store })
    const narrow = rateLimit({ rules: ten, store: clocked().store, ipv6Subnet: 64 })
    app.use(wide, narrow)
    app.use(handler().handle)
    await request(app).get('/').set('X-Forwarded-For', '2001:db8:0:1::1')
    await request(app).get('/').set('X-Forwarded-For', '2001:DB8:0:2:ffff::7')
    expect(await used(wide, '2001:db8::/56')).toBe(2)
    expect(await used(narrow, '2001:db8:0:1::/64')).toBe(1)
    expect(await used(narrow, '2001:db8:0:2::/64')).toBe(1)
  })

  it("keys 'route' by method and route template under the mount path, never by the ids in the URL", async () => {
    const app = express()
    const router = express.Router()
    const perRoute = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    const inRouter = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    app.post('/pay/:orderId', perRoute, handler().handle)
    router.get('/orders/:id', inRouter, handler().handle)
    app.use('/api', router)

    await request(app).post('/pay/1001')
    await request(app).post('/pay/1002?retry=1')
    await request(app).get('/api/orders/7')
    await request(app).get('/api/orders/8')
    await request(app).get('/api/orders/9')
    expect(await used(perRoute, 'POST /pay/:orderId')).toBe(2)
    expect(await used(inRouter, 'GET /api/orders/:id')).toBe(3)
  })

  it("keys 'route' at app.use level, before any route matched, by mount path + path without the query", async () => {
    const app = express()
    const limit = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    app.use('/api', limit)
    app.use(handler().handle)
    await request(app).get('/api/users/7?expand=1')
    await request(app).get('/api/users/7')
    await request(app).delete('/api/users/7')
    await request(app).get('/other')
    expect(await used(limit, 'GET /api/users/7')).toBe(2)
    expect(await used(limit, 'DELETE /api/users/7')).toBe(1)
    expect(await used(limit, 'GET /other')).toBe(0)
  })

  it("a per-route limit is not evaded by letter case: 'route' keys /API/pay where /api/pay counts", async () => {
    const app = express()
    const router = express.Router()
    const { calls, handle } = handler()
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
      store: clocked().store,
      key: 'route',
    })
    router.get('/pay', limit, handle)
    app.use('/api', router)

    const statuses: number[] = []
    for (const path of ['/api/pay', '/API/pay', '/Api/pay', '/aPi/pay']) {
      statuses.push((await request(app).get(path)).status)
    }
    expect(statuses).toEqual([200, 200, 429, 429])
    expect(calls).toHaveLength(2)
    expect((await limit.limiter.peek('GET /api/pay')).allowed).toBe(false)
    expect((await limit.limiter.peek('GET /API/pay')).remaining).toBe(1)
  })

  it("a per-route limit is not evaded by parameter values: 'route' keys a parameterised mount by its template", async () => {
    const app = express()
    const tenants = express.Router()
    const limit = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    tenants.get('/pay', limit, handler().handle)
    app.use('/t/:tenant', tenants)

    const routes: unknown[] = []
    const listener = (message: unknown) => routes.push((message as { route?: unknown }).route)
    subscribe('sluice:http', listener)
    try {
      for (const tenant of ['acme', 'globex', 'ACME', 'initech']) await request(app).get(`/t/${tenant}/pay`)
      await request(app).get('/T/acme/pay')
    } finally {
      unsubscribe('sluice:http', listener)
    }
    // The metrics label is the template too: one series, not one per tenant.
    expect(routes).toEqual(Array(5).fill('GET /t/:tenant/pay'))
    expect(await used(limit, 'GET /t/:tenant/pay')).toBe(5)
    expect(await used(limit, 'GET /t/acme/pay')).toBe(0)
  })

  it("'route' reads each mount of nested routers, and tells apart one router mounted at two paths", async () => {
    const app = express()
    const outer = express.Router()
    const inner = express.Router()
    const limit = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    inner.get('/orders/:id', limit, handler().handle)
    outer.use('/v/:version', inner)
    app.use('/api', outer)
    app.use('/legacy', inner)

    await request(app).get('/API/v/1/orders/7')
    await request(app).get('/api/V/2/orders/8')
    await request(app).get('/Legacy/orders/9')
    expect(await used(limit, 'GET /api/v/:version/orders/:id')).toBe(2)
    expect(await used(limit, 'GET /legacy/orders/:id')).toBe(1)
  })

  it("'route' at app.use level inside a parameterised mount keys the mount's template, not the tenant", async () => {
    const app = express()
    const tenants = express.Router()
    const limit = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    tenants.use('/reports', limit)
    tenants.use(handler().handle)
    app.use('/t/:tenant', tenants)

    await request(app).get('/t/acme/reports/summary')
    await request(app).get('/t/globex/reports/summary')
    expect(await used(limit, 'GET /t/:tenant/reports/summary')).toBe(2)
  })

  it("'route' reads a mounted sub-app's mount path", async () => {
    const app = express()
    const sub = express()
    const router = express.Router()
    const limit = rateLimit({ rules: ten, store: clocked().store, key: 'route' })
    router.get('/:id', limit, handler().handle)
    sub.use('/users', router)
    app.use('/v/:version', sub)

    await request(app).get('/v/1/users/7')
    await request(app).get('/V/2/Users/8')
    expect(await used(limit, 'GET /v/:version/users/:id')).toBe(2)
  })

  it('joins header parts into one key, such as x-biz-type + x-channel', async () => {
    const app = express()
    const limit = rateLimit({
      rules: one,
      store: clocked().store,
      key: { header: ['x-biz-type', 'x-channel'] },
    })
    app.post('/pay', limit, handler().handle)
    const pay = (bizType: string, channel: string) =>
      request(app).post('/pay').set('x-biz-type', bizType).set('x-channel', channel)

    expect((await pay('PAYMENT', 'ALIPAY')).status).toBe(200)
    expect((await pay('PAYMENT', 'ALIPAY')).status).toBe(429)
    expect((await pay('PAYMENT', 'WECHAT')).status).toBe(200)
    expect((await pay('REFUND', 'ALIPAY')).status).toBe(200)
    // A ':' inside a value is escaped, so these two never share a key.
    expect((await pay('A:B', 'C')).status).toBe(200)
    expect((await pay('A', 'B:C')).status).toBe(200)
    expect((await limit.limiter.peek('PAYMENT:ALIPAY')).allowed).toBe(false)
    expect((await limit.limiter.peek('A\\:B:C')).allowed).toBe(false)
  })

  it('answers 400 with a problem body for a missing key part by default, never keying it as "undefined"', async () => {
    const app = express()
    const { calls, handle } = handler()
    const limit = rateLimit({
      rules: one,
      store: clocked().store,
      key: { header: ['x-biz-type', 'x-channel'] },
    })
    app.post('/pay', limit, handle)

    const missing = await request(app).post('/pay').set('x-biz-type', 'PAYMENT')
    expect(missing.status).toBe(400)
    expect(missing.headers['content-type']).toBe('application/problem+json')
    expect(missing.headers['ratelimit']).toBeUndefined()
    expect(JSON.parse(missing.text)).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'This request needs the x-channel header.',
    })
    const empty = await request(app).post('/pay').set('x-biz-type', 'PAYMENT').set('x-channel', '')
    expect(empty.status).toBe(400)
    expect(calls).toHaveLength(0)
    expect((await limit.limiter.peek('PAYMENT:undefined')).remaining).toBe(0)
    expect((await limit.limiter.peek('PAYMENT:undefined')).allowed).toBe(true)
  })

  it('lets a request with a missing key part through under skip, or counts it under a default', async () => {
    const skipping = express()
    const { calls, handle } = handler()
    skipping.post(
      '/pay',
      rateLimit({ rules: one, store: clocked().store, key: { header: 'x-channel' }, onMissingKey: 'skip' }),
      handle,
    )
    for (let i = 0; i < 3; i++) {
      const res = await request(skipping).post('/pay')
      expect(res.status).toBe(200)
      expect(res.headers['ratelimit']).toBeUndefined()
    }
    expect(calls).toHaveLength(3)
    expect(calls.every((req) => req.rateLimit === undefined)).toBe(true)

    const defaulting = express()
    const limit = rateLimit({
      rules: one,
      store: clocked().store,
      key: { header: 'x-channel' },
      onMissingKey: { default: 'none' },
    })
    defaulting.post('/pay', limit, handler().handle)
    expect((await request(defaulting).post('/pay')).status).toBe(200)
    expect((await request(defaulting).post('/pay')).status).toBe(429)
    expect((await request(defaulting).post('/pay').set('x-channel', 'ALIPAY')).status).toBe(200)
    expect((await limit.limiter.peek('none')).allowed).toBe(false)
  })

  it('keys by a function, and by a list of parts joined', async () => {
    const app = express()
    const limit = rateLimit({
      rules: ten,
      store: clocked().store,
      key: ['route', (req) => (req.query['tenant'] as string | undefined) ?? null],
    })
    app.get('/reports/:id', limit, handler().handle)
    await request(app).get('/reports/1?tenant=acme')
    await request(app).get('/reports/2?tenant=acme')
    expect(await used(limit, 'GET /reports/\\:id:acme')).toBe(2)
    const missing = await request(app).get('/reports/3')
    expect(missing.status).toBe(400)
    // A client is told what it can act on, never sluice's numbering of the key's parts ("key function #1").
    expect(JSON.parse(missing.text).detail).toBe('This request cannot be identified for rate limiting.')
  })

  it('gives each bizType + channel its own limit from a table; missing or -1 is not limited', async () => {
    const table: Record<string, number> = { 'PAYMENT:ALIPAY': 2, 'PAYMENT:WECHAT': 1, 'REFUND:ALIPAY': -1 }
    const contexts: unknown[] = []
    const app = express()
    const { calls, handle } = handler()
    app.post(
      '/pay',
      rateLimit({
        store: clocked().store,
        key: { header: ['x-biz-type', 'x-channel'] },
        rules: (key, req) => {
          contexts.push(req.path)
          const limit = table[key]
          return limit === undefined ? null : [slidingLog({ limit, windowMs: 1000 })]
        },
      }),
      handle,
    )
    const pay = (bizType: string, channel: string) =>
      request(app).post('/pay').set('x-biz-type', bizType).set('x-channel', channel)

    const statuses = async (bizType: string, channel: string, n: number) => {
      const out: number[] = []
      for (let i = 0; i < n; i++) out.push((await pay(bizType, channel)).status)
      return out
    }
    expect(await statuses('PAYMENT', 'ALIPAY', 3)).toEqual([200, 200, 429])
    expect(await statuses('PAYMENT', 'WECHAT', 2)).toEqual([200, 429])
    expect(await statuses('REFUND', 'ALIPAY', 5)).toEqual([200, 200, 200, 200, 200])
    expect(await statuses('QUERY', 'UNIONPAY', 5)).toEqual([200, 200, 200, 200, 200])

    const wechat = await pay('PAYMENT', 'WECHAT')
    expect(wechat.headers['ratelimit-policy']).toBe('"1-per-1s";q=1;w=1')
    const unlimited = await pay('REFUND', 'ALIPAY')
    expect(unlimited.headers['ratelimit']).toBeUndefined()
    expect(unlimited.headers['ratelimit-policy']).toBeUndefined()
    expect(unlimited.body).toEqual({ ok: true, remaining: null })
    expect(calls).toHaveLength(2 + 1 + 5 + 5 + 1)
    expect(new Set(contexts)).toEqual(new Set(['/pay']))
  })
})

describe.each(flavours)('key, rules and cost functions that return a promise, on $name', ({ express }) => {
  it('waits for a key, rules and cost looked up asynchronously (a plan per API key), and counts exactly', async () => {
    const plans: Record<string, number> = { gold: 2, free: 1 }
    const owners: Record<string, string> = { k1: 'gold', k2: 'free' }
    const app = express()
    const limit = rateLimit({
      store: clocked().store,
      key: async (req) => owners[String(req.headers['x-api-key'])] ?? null,
      rules: async (plan) => [fixedWindow({ limit: 2 * (plans[plan] ?? 0), windowMs: 60_000 })],
      cost: async (req) => (req.method === 'POST' ? 2 : 1),
    })
    app.use(limit)
    app.use(handler().handle)
    const statuses: number[] = []
    for (const [method, apiKey] of [
      ['post', 'k1'],
      ['get', 'k1'],
      ['post', 'k1'],
      ['get', 'k1'],
      ['get', 'k2'],
      ['get', 'k2'],
      ['get', 'k2'],
    ] as const) {
      statuses.push((await request(app)[method]('/').set('x-api-key', apiKey)).status)
    }
    // gold: 4 units a minute, a POST taking 2; free: 2.
    expect(statuses).toEqual([200, 200, 429, 200, 200, 200, 429])
    expect((await request(app).get('/').set('x-api-key', 'nobody')).status).toBe(400)
  })

  it("sends a key, rules or cost function's rejection to the error path", async () => {
    for (const failing of [
      { key: async () => Promise.reject(new Error('cache down')) },
      { rules: async () => Promise.reject(new Error('cache down')) },
      { cost: async () => Promise.reject(new Error('cache down')) },
    ]) {
      const app = express()
      const seen: unknown[] = []
      app.use(rateLimit({ rules: ten, store: clocked().store, ...failing }))
      app.use(handler().handle)
      app.use(((error, _req, res, _next) => {
        seen.push(error)
        res.status(503).end()
      }) as import('express').ErrorRequestHandler)
      expect((await request(app).get('/')).status).toBe(503)
      expect(seen).toEqual([new Error('cache down')])
    }
  })
})
