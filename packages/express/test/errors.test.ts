import { createLimiter, ErrorCode, fixedWindow, MemoryStore, type Store } from '@sluice/core'
import { type ExpressRateLimitOptions, rateLimit } from '@sluice/express'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { catchError } from '../../core/test/support.ts'
import { clocked, errors, flavours, handler, unhandledDuring } from './support.ts'

const rules = [fixedWindow({ limit: 1, windowMs: 60_000 })]

/** A store whose every call fails, as a store does when its server is down. */
const brokenStore = (): Store => ({
  apply: () => Promise.reject(new Error('connection refused')),
  reset: () => undefined,
})

describe('rateLimit options', () => {
  it('rejects unknown and invalid options at construction, naming rateLimit.<option>', () => {
    const cases: [unknown, string][] = [
      [{ rules, windowMs: 60_000 }, 'rateLimit.windowMs'],
      [{ rules, max: 10 }, 'rateLimit.max'],
      [{ rules, onLimited: 'send 429' }, 'rateLimit.onLimited'],
      [{}, 'rateLimit.rules'],
      [{ rules, cost: 0 }, 'rateLimit.cost'],
      [{ rules, skip: true }, 'rateLimit.skip'],
      [{ rules, message: 42 }, 'rateLimit.message'],
      [{ rules, statusCode: 200 }, 'rateLimit.statusCode'],
      [{ limiter: createLimiter({ rules }), prefix: 'x' }, 'rateLimit.prefix'],
      [null, 'rateLimit'],
      ['fixedWindow', 'rateLimit'],
    ]
    for (const [options, option] of cases) {
      expect(() => rateLimit(options as ExpressRateLimitOptions), option).toThrowError(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option }),
      )
    }
    expect(() => rateLimit({ rules, key: 'url' as 'ip' })).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION }),
    )
    expect(() => rateLimit({ rules, headers: { standard: 'draft-12' as 'draft-11' } })).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION }),
    )
  })

  it('ignores options given as undefined, so they keep their defaults', () => {
    const limit = rateLimit({ rules, onLimited: undefined, statusCode: undefined, prefix: undefined })
    expect(limit.limiter.prefix).toBe('sluice')
  })

  it("rejects an unknown name even when its value is undefined, and points peers' names to sluice's", () => {
    expect(catchError(() => rateLimit({ rules, ...{ onMissing: undefined } }))).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'rateLimit.onMissing',
    })
    const peer = catchError(() => rateLimit({ rules, ...{ windowMs: 60_000, limit: 100 } }))
    expect(peer).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'rateLimit.windowMs' })
    expect((peer as Error).message).toContain('rules: [fixedWindow({ limit: 100, windowMs: 60_000 })]')
    expect((peer as Error).message).toContain('(docs/migrating.md#from-express-rate-limit)')
  })

  it('gives each rateLimit without a store its own memory store', () => {
    const a = rateLimit({ rules })
    const b = rateLimit({ rules })
    expect(a.limiter.store).toBeInstanceOf(MemoryStore)
    expect(a.limiter.store).not.toBe(b.limiter.store)
  })

  it('throws ERR_SLUICE_PREFIX_COLLISION for two limits on one store with the same prefix', () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    rateLimit({ rules, store })
    expect(() => rateLimit({ rules, store })).toThrowError(
      expect.objectContaining({ code: ErrorCode.PREFIX_COLLISION }),
    )
    expect(() => rateLimit({ rules, store, prefix: 'other' })).not.toThrow()
  })
})

describe.each(flavours)('limits and failures on $name', ({ express }) => {
  it('keeps two limits on one app apart: each counts every request once, on its own', async () => {
    const { store } = clocked()
    const app = express()
    const global = rateLimit({
      rules: [fixedWindow({ limit: 10, windowMs: 60_000 })],
      store,
      prefix: 'global',
    })
    const pay = rateLimit({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store, prefix: 'pay' })
    const own = rateLimit({ rules: [fixedWindow({ limit: 10, windowMs: 60_000 })] })
    app.use(global, own)
    app.post('/pay', pay, handler().handle)
    app.get('/', handler().handle)

    expect((await request(app).post('/pay')).status).toBe(200)
    expect((await request(app).post('/pay')).status).toBe(200)
    expect((await request(app).post('/pay')).status).toBe(429)
    expect((await request(app).get('/')).status).toBe(200)
    // peek answers as if it counted one more: 10 - 4 - 1 = 5.
    expect((await global.limiter.peek('127.0.0.1')).remaining).toBe(5)
    expect((await own.limiter.peek('127.0.0.1')).remaining).toBe(5)
    expect((await pay.limiter.peek('127.0.0.1')).allowed).toBe(false)
  })

  it('counts a request once when the same limit is mounted on the app and again on a router', async () => {
    const app = express()
    const router = express.Router()
    const limit = rateLimit({ rules: [fixedWindow({ limit: 3, windowMs: 60_000 })], store: clocked().store })
    app.use(limit)
    router.use(limit)
    router.get('/orders', limit, handler().handle)
    app.use('/api', router)
    const first = await request(app).get('/api/orders')
    expect(first.status).toBe(200)
    expect(first.headers['ratelimit']).toBe('"3-per-60s";r=2;t=60')
    expect((await request(app).get('/api/orders')).headers['ratelimit']).toBe('"3-per-60s";r=1;t=60')
  })

  it('counts a request once per limit when two limits meet it again, in the other order, on a router', async () => {
    const app = express()
    const router = express.Router()
    const { store } = clocked()
    const a = rateLimit({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store, prefix: 'a' })
    const b = rateLimit({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store, prefix: 'b' })
    app.use(a, b)
    router.use(b, a)
    router.get('/x', handler().handle)
    app.use('/api', router)
    expect((await request(app).get('/api/x')).status).toBe(200)
    // One count each: peek answers as if it counted one more, 5 - 1 - 1 = 3.
    expect((await a.limiter.peek('127.0.0.1')).remaining).toBe(3)
    expect((await b.limiter.peek('127.0.0.1')).remaining).toBe(3)
  })

  it("lists every limit that counted a request in its headers, and a denial's Retry-After", async () => {
    const app = express()
    const { store } = clocked()
    app.use(rateLimit({ rules: [fixedWindow({ limit: 100, windowMs: 60_000, name: 'global' })], store }))
    app.post(
      '/pay',
      rateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000, name: 'pay' })], store, prefix: 'pay' }),
      handler().handle,
    )
    const first = await request(app).post('/pay')
    expect(first.status).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"global";q=100;w=60, "pay";q=1;w=60')
    expect(first.headers['ratelimit']).toMatch(/^"global";r=99;t=\d+, "pay";r=0;t=\d+$/)
    const denied = await request(app).post('/pay')
    expect(denied.status).toBe(429)
    expect(denied.headers['ratelimit-policy']).toBe('"global";q=100;w=60, "pay";q=1;w=60')
    expect(denied.headers['ratelimit']).toMatch(/^"global";r=98;t=\d+, "pay";r=0;t=\d+$/)
    expect(Number(denied.headers['retry-after'])).toBeGreaterThan(0)
    // A request only the global limit counts carries its item alone.
    expect((await request(app).get('/')).headers['ratelimit-policy']).toBe('"global";q=100;w=60')
  })

  it('adds to what an earlier limit sent: nothing when it sent no headers, its legacy fields kept', async () => {
    const app = express()
    const { store } = clocked()
    const rule = (name: string) => [fixedWindow({ limit: 5, windowMs: 60_000, name })]
    app.get('/quiet', rateLimit({ rules: rule('quiet'), store, prefix: 'q', headers: false }))
    app.get('/legacy', rateLimit({ rules: rule('legacy'), store, prefix: 'l', headers: { legacy: true } }))
    app.use(rateLimit({ rules: rule('route'), store, prefix: 'r' }))
    app.get(['/quiet', '/legacy'], handler().handle)
    const quiet = await request(app).get('/quiet')
    expect(quiet.headers['ratelimit-policy']).toBe('"route";q=5;w=60')
    const legacy = await request(app).get('/legacy')
    expect(legacy.headers['ratelimit-policy']).toBe('"legacy";q=5;w=60, "route";q=5;w=60')
    expect(legacy.headers['x-ratelimit-remaining']).toBe('4')
  })

  it('follows onStoreError when the store fails: allow, deny, or the error to next(err)', async () => {
    const app = express()
    const failed = errors()
    const broken = brokenStore()
    app.get('/allow', rateLimit({ rules, store: broken, prefix: 'allow' }), handler().handle)
    app.get(
      '/deny',
      rateLimit({ rules, store: broken, prefix: 'deny', onStoreError: 'deny' }),
      handler().handle,
    )
    app.get(
      '/throw',
      rateLimit({ rules, store: broken, prefix: 'throw', onStoreError: 'throw' }),
      handler().handle,
    )
    app.use(failed.handle)

    const allowed = await request(app).get('/allow')
    expect(allowed.status).toBe(200)
    expect(allowed.headers['ratelimit']).toBeUndefined()

    const denied = await request(app).get('/deny')
    expect(denied.status).toBe(429)
    expect(denied.headers['retry-after']).toBe('1')
    expect(JSON.parse(denied.text)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'The rate-limit store is unavailable; retry in 1 s.',
      retryAfter: 1,
    })

    const thrown = await request(app).get('/throw')
    expect(thrown.status).toBe(500)
    expect(thrown.body).toEqual({ error: ErrorCode.STORE_ERROR })
    expect(failed.seen).toHaveLength(1)
    expect((failed.seen[0] as Error).cause).toEqual(new Error('connection refused'))
  })

  it('sends errors from key and cost functions and onLimited to next(err), with no unhandled rejection', async () => {
    const app = express()
    const failed = errors()
    const { calls, handle } = handler()
    app.get(
      '/key',
      rateLimit({
        rules,
        key: () => {
          throw new Error('no tenant')
        },
      }),
      handle,
    )
    app.get('/bad-key', rateLimit({ rules, key: () => 42 as unknown as string }), handle)
    app.get('/cost', rateLimit({ rules, cost: () => 0 }), handle)
    app.get('/too-costly', rateLimit({ rules, cost: () => 2 }), handle)
    const limited = (onLimited: ExpressRateLimitOptions['onLimited']) =>
      rateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], onLimited })
    app.get(
      '/on-limited-throws',
      limited(() => {
        throw new Error('onLimited threw')
      }),
      handle,
    )
    app.get(
      '/on-limited-rejects',
      limited(async () => {
        throw new Error('onLimited rejected')
      }),
      handle,
    )
    app.get('/message-fails', rateLimit({ rules, message: () => ({ n: 1n }) }), handle)
    app.use(failed.handle)

    const unhandled = await unhandledDuring(async () => {
      expect((await request(app).get('/key')).body).toEqual({ error: 'Error: no tenant' })
      expect((await request(app).get('/bad-key')).body).toEqual({ error: ErrorCode.INVALID_KEY })
      expect((await request(app).get('/cost')).body).toEqual({ error: ErrorCode.INVALID_COST })
      expect((await request(app).get('/too-costly')).body).toEqual({ error: ErrorCode.INVALID_COST })
      expect((await request(app).get('/on-limited-throws')).status).toBe(200)
      expect((await request(app).get('/on-limited-throws')).body).toEqual({ error: 'Error: onLimited threw' })
      expect((await request(app).get('/on-limited-rejects')).status).toBe(200)
      expect((await request(app).get('/on-limited-rejects')).body).toEqual({
        error: 'Error: onLimited rejected',
      })
      expect((await request(app).get('/message-fails')).status).toBe(200)
      const failedMessage = await request(app).get('/message-fails')
      expect(failedMessage.status).toBe(500)
      expect(failedMessage.body.error).toMatch(/BigInt/)
    })
    expect(unhandled).toEqual([])
    expect(failed.seen).toHaveLength(7)
    expect(calls).toHaveLength(3)
  })
})
