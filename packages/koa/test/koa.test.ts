/**
 * What only Koa has: `app.proxy` and `ctx.ip`, `@koa/router` routes and prefixes (`ctx._matchedRoute`),
 * `ctx.state.rateLimit` downstream, denials answered through `ctx` rather than thrown, and the app's error
 * handling for what `onLimited` or a key function throws. The shared behaviour is the contract suite's.
 */
import type { AddressInfo } from 'node:net'
import Router from '@koa/router'
import { type Decision, fixedWindow, MemoryStore } from '@sluice/core'
import { rateLimit } from '@sluice/koa'
import Koa, { type Context, type Next } from 'koa'
import { afterEach, describe, expect, it } from 'vitest'

const ten = [fixedWindow({ limit: 10, windowMs: 60_000 })]
const one = [fixedWindow({ limit: 1, windowMs: 60_000 })]

const store = () => new MemoryStore({ clock: () => 1_000_020_000, sweepIntervalMs: 0 })

const open: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const server of open.splice(0)) await server.close()
})

async function listen(app: Koa): Promise<string> {
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  open.push({
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Units of a 10-unit rule a key has used: `peek` answers as if it counted one more. */
async function used(limit: ReturnType<typeof rateLimit>, key: string): Promise<number> {
  return 9 - (await limit.limiter.peek(key)).remaining
}

const ok = (ctx: Context) => {
  ctx.body = { remaining: ctx.state.rateLimit?.remaining ?? null }
}

describe('Koa', () => {
  it("keys by ctx.ip: X-Forwarded-For counts only under the app's proxy setting", async () => {
    const plain = new Koa()
    const direct = rateLimit({ rules: ten, store: store() })
    plain.use(direct).use(ok)
    const plainUrl = await listen(plain)
    await fetch(plainUrl, { headers: { 'x-forwarded-for': '203.0.113.9' } })
    expect(await used(direct, '127.0.0.1')).toBe(1)
    expect(await used(direct, '203.0.113.9')).toBe(0)

    const proxied = new Koa({ proxy: true, maxIpsCount: 1 })
    const behind = rateLimit({ rules: ten, store: store() })
    proxied.use(behind).use(ok)
    const proxiedUrl = await listen(proxied)
    await fetch(proxiedUrl, { headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.9' } })
    await fetch(proxiedUrl, { headers: { 'x-forwarded-for': '2001:db8:0:1::1' } })
    // maxIpsCount: 1 takes the hop the proxy appended, not what the client wrote before it.
    expect(await used(behind, '203.0.113.9')).toBe(1)
    expect(await used(behind, '198.51.100.1')).toBe(0)
    expect(await used(behind, '2001:db8::/56')).toBe(1)
    expect(await used(behind, '127.0.0.1')).toBe(0)
  })

  it("keys 'route' by the template @koa/router matched, under the router's prefix; by the path at app.use level", async () => {
    const app = new Koa()
    const router = new Router({ prefix: '/api' })
    const perRoute = rateLimit({ rules: ten, store: store(), key: 'route' })
    const appLevel = rateLimit({ rules: ten, store: store(), key: 'route' })
    const routerLevel = rateLimit({ rules: ten, store: store(), key: 'route' })
    router.use(routerLevel)
    router.get('/orders/:id', perRoute, ok)
    router.post('/pay/:orderId', perRoute, ok)
    app.use(appLevel).use(router.routes())
    const url = await listen(app)
    await fetch(`${url}/api/orders/7?expand=1`)
    await fetch(`${url}/api/orders/8`)
    await fetch(`${url}/api/pay/1001`, { method: 'POST' })
    expect(await used(perRoute, 'GET /api/orders/:id')).toBe(2)
    expect(await used(perRoute, 'POST /api/pay/:orderId')).toBe(1)
    expect(await used(appLevel, 'GET /api/orders/7')).toBe(1)
    expect(await used(appLevel, 'GET /api/orders/8')).toBe(1)
    expect(await used(routerLevel, 'GET /api/orders/:id')).toBe(2)
    expect(await used(routerLevel, 'POST /api/pay/:orderId')).toBe(1)
  })

  it('puts the decision on ctx.state.rateLimit for every later middleware; undefined where no limit counted', async () => {
    const app = new Koa()
    const router = new Router()
    const seen: (Decision | undefined)[] = []
    router.get('/limited', rateLimit({ rules: ten, store: store() }), async (ctx, next) => {
      seen.push(ctx.state.rateLimit)
      await next()
    })
    router.get('/free', async (ctx, next) => {
      seen.push(ctx.state.rateLimit)
      await next()
    })
    app.use(router.routes()).use(ok)
    const url = await listen(app)
    expect(await (await fetch(`${url}/limited`)).json()).toEqual({ remaining: 9 })
    expect(await (await fetch(`${url}/free`)).json()).toEqual({ remaining: null })
    expect(seen).toEqual([expect.objectContaining({ allowed: true, remaining: 9, limit: 10 }), undefined])
  })

  it("answers a denial through ctx: outer middleware sees the 429 after next(), the app's error handling nothing", async () => {
    const app = new Koa()
    const errors: unknown[] = []
    const outer: number[] = []
    app.on('error', (error) => errors.push(error))
    app.use(async (ctx: Context, next: Next) => {
      try {
        await next()
      } catch (error) {
        errors.push(error)
        throw error
      }
      outer.push(ctx.status)
    })
    app.use(rateLimit({ rules: one, store: store() })).use(ok)
    const url = await listen(app)
    expect((await fetch(url)).status).toBe(200)
    const denied = await fetch(url)
    expect(denied.status).toBe(429)
    expect(denied.headers.get('content-type')).toBe('application/problem+json')
    expect(denied.headers.get('retry-after')).toBe('60')
    expect(await denied.json()).toMatchObject({
      status: 429,
      detail: 'Rate limit 1-per-60s exceeded; retry in 60 s.',
    })
    expect(outer).toEqual([200, 429])
    expect(errors).toEqual([])
  })

  it("sends what onLimited throws (ctx.throw) to the app's error handling, and a key function's error too", async () => {
    const app = new Koa()
    const caught: { status: unknown; message: string }[] = []
    app.silent = true
    app.use(async (ctx: Context, next: Next) => {
      try {
        await next()
      } catch (error) {
        const e = error as { status?: number; message: string }
        caught.push({ status: e.status, message: e.message })
        ctx.status = e.status ?? 500
        ctx.body = { error: e.message }
      }
    })
    const router = new Router()
    router.get(
      '/throws',
      rateLimit({ rules: one, store: store(), onLimited: (ctx) => ctx.throw(429, 'Slow down') }),
      ok,
    )
    router.get(
      '/key',
      rateLimit({
        rules: one,
        store: store(),
        key: () => {
          throw new Error('no tenant')
        },
      }),
      ok,
    )
    app.use(router.routes())
    const url = await listen(app)
    expect((await fetch(`${url}/throws`)).status).toBe(200)
    const thrown = await fetch(`${url}/throws`)
    expect(thrown.status).toBe(429)
    expect(await thrown.json()).toEqual({ error: 'Slow down' })
    const failed = await fetch(`${url}/key`)
    expect(failed.status).toBe(500)
    expect(caught).toEqual([
      { status: 429, message: 'Slow down' },
      { status: undefined, message: 'no tenant' },
    ])
  })

  it('counts a request once per limit when the same limit meets it on the app and again on a route', async () => {
    const app = new Koa()
    const router = new Router()
    const limit = rateLimit({ rules: ten, store: store() })
    const other = rateLimit({ rules: ten, store: store(), prefix: 'other' })
    router.get('/', limit, other, ok)
    app.use(limit).use(router.routes())
    const url = await listen(app)
    const res = await fetch(url)
    expect(await res.json()).toEqual({ remaining: 9 })
    expect(await used(limit, '127.0.0.1')).toBe(1)
    expect(await used(other, '127.0.0.1')).toBe(1)
    expect(res.headers.get('ratelimit-policy')).toBe('"10-per-60s";q=10;w=60, "10-per-60s";q=10;w=60')
  })
})
