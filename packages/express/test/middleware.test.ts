import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { type Decision, fixedWindow, slidingLog, tokenBucket } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import request from 'supertest'
import { describe, expect, it } from 'vitest'
import { clocked, flavours, handler } from './support.ts'

const PROBLEM = 'application/problem+json'

describe.each(flavours)('rateLimit on $name', ({ express }) => {
  it('admits up to the limit with the current draft headers, then answers 429 with Retry-After and a problem', async () => {
    const { clock, store } = clocked()
    const app = express()
    const { calls, handle } = handler()
    app.use(rateLimit({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store }))
    app.get('/', handle)

    const first = await request(app).get('/')
    expect(first.status).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"2-per-60s";q=2;w=60')
    expect(first.headers['ratelimit']).toBe('"2-per-60s";r=1;t=60')
    expect(first.headers['retry-after']).toBeUndefined()
    expect(first.body).toEqual({ ok: true, remaining: 1 })

    clock.now += 15_000
    const second = await request(app).get('/')
    expect(second.status).toBe(200)
    expect(second.headers['ratelimit']).toBe('"2-per-60s";r=0;t=45')

    clock.now += 100
    const third = await request(app).get('/')
    expect(third.status).toBe(429)
    expect(third.headers['content-type']).toBe(PROBLEM)
    expect(third.headers['retry-after']).toBe('45')
    expect(third.headers['ratelimit-policy']).toBe('"2-per-60s";q=2;w=60')
    expect(third.headers['ratelimit']).toBe('"2-per-60s";r=0;t=45')
    expect(JSON.parse(third.text)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Rate limit 2-per-60s exceeded; retry in 45 s.',
      retryAfter: 45,
    })
    expect(third.headers['content-length']).toBe(String(Buffer.byteLength(third.text)))
    expect(calls).toHaveLength(2)
  })

  it('lists one policy item per rule; Retry-After follows the rule that frees up last', async () => {
    const { clock, store } = clocked()
    const app = express()
    app.use(
      rateLimit({
        rules: [fixedWindow({ limit: 3, windowMs: 1000 }), slidingLog({ limit: 3, windowMs: 60_000 })],
        store,
      }),
    )
    app.get('/', handler().handle)
    for (let i = 0; i < 3; i++) expect((await request(app).get('/')).status).toBe(200)
    clock.now += 1
    const denied = await request(app).get('/')
    expect(denied.status).toBe(429)
    expect(denied.headers['retry-after']).toBe('60')
    expect(denied.headers['ratelimit-policy']).toBe('"3-per-1s";q=3;w=1, "3-per-60s";q=3;w=60')
    expect(denied.headers['ratelimit']).toBe('"3-per-1s";r=0;t=1, "3-per-60s";r=0;t=60')
    expect(JSON.parse(denied.text)).toMatchObject({
      detail: 'Rate limit 3-per-60s exceeded; retry in 60 s.',
      retryAfter: 60,
    })
  })

  it('writes older drafts, legacy X-RateLimit-* headers, or none, as the headers option asks', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 60_000 })]
    const get = async (headers: Parameters<typeof rateLimit>[0]['headers']) => {
      const app = express()
      app.use(rateLimit({ rules, store: clocked().store, headers }))
      app.get('/', handler().handle)
      return [await request(app).get('/'), await request(app).get('/')] as const
    }

    const [draft7, draft7Denied] = await get({ standard: 'draft-7' })
    expect(draft7.headers['ratelimit-policy']).toBe('1;w=60')
    expect(draft7.headers['ratelimit']).toBe('limit=1, remaining=0, reset=60')
    expect(draft7Denied.headers['retry-after']).toBe('60')

    const [draft6] = await get({ standard: 'draft-6' })
    expect(draft6.headers['ratelimit-policy']).toBe('1;w=60')
    expect(draft6.headers['ratelimit-limit']).toBe('1')
    expect(draft6.headers['ratelimit-remaining']).toBe('0')
    expect(draft6.headers['ratelimit-reset']).toBe('60')
    expect(draft6.headers['ratelimit']).toBeUndefined()

    const [legacy, legacyDenied] = await get({ standard: false, legacy: true })
    expect(legacy.headers['x-ratelimit-limit']).toBe('1')
    expect(legacy.headers['x-ratelimit-remaining']).toBe('0')
    expect(legacy.headers['x-ratelimit-reset']).toBe('60')
    expect(legacy.headers['ratelimit']).toBeUndefined()
    expect(legacyDenied.headers['x-ratelimit-remaining']).toBe('0')
    expect(legacyDenied.headers['retry-after']).toBe('60')

    const [none, noneDenied] = await get(false)
    expect(Object.keys(none.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([])
    expect(noneDenied.status).toBe(429)
    expect(Object.keys(noneDenied.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([])
  })

  it('puts the decision on req.rateLimit for the handler', async () => {
    const app = express()
    let seen: Decision | undefined
    app.use(rateLimit({ rules: [tokenBucket({ capacity: 5, refillPerSecond: 1 })], store: clocked().store }))
    app.get('/', (req, res) => {
      seen = req.rateLimit
      res.end()
    })
    await request(app).get('/')
    expect(seen).toEqual({
      allowed: true,
      limit: 5,
      remaining: 4,
      resetMs: 1000,
      retryAfterMs: 0,
      waitMs: 0,
      rule: '5-burst-1-per-s',
      rules: [
        {
          rule: '5-burst-1-per-s',
          allowed: true,
          limit: 5,
          remaining: 4,
          resetMs: 1000,
          retryAfterMs: 0,
          waitMs: 0,
          windowSeconds: 5,
        },
      ],
      reason: 'rules',
      countedAt: 1_000_020_000,
    })
  })

  it('keeps req.rateLimit off the request itself, and visible across mounted apps', async () => {
    const app = express()
    const api = express()
    const payments = express()
    const seen: unknown[] = []
    payments.use(rateLimit({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store: clocked().store }))
    payments.get('/pay', (req, _res, next) => {
      seen.push(req.rateLimit?.remaining, Object.hasOwn(req, 'rateLimit'))
      next()
    })
    api.use('/payments', payments)
    // Express has left each mounted app (and its request prototype) when these run.
    api.use((req, _res, next) => {
      seen.push(req.rateLimit?.remaining)
      next()
    })
    app.use('/api', api)
    app.use((req, res) => {
      seen.push(req.rateLimit?.remaining)
      res.end()
    })
    await request(app).get('/api/payments/pay')
    await request(app).get('/other')
    expect(seen).toEqual([4, false, 4, 4, undefined])
  })

  it('answers statusCode with a message as the problem detail', async () => {
    const app = express()
    app.use(
      rateLimit({
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store: clocked().store,
        statusCode: 503,
        message: 'Payments are busy.',
      }),
    )
    app.get('/', handler().handle)
    await request(app).get('/')
    const denied = await request(app).get('/')
    expect(denied.status).toBe(503)
    expect(denied.headers['content-type']).toBe(PROBLEM)
    expect(denied.headers['retry-after']).toBe('60')
    expect(JSON.parse(denied.text)).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'Payments are busy.',
      retryAfter: 60,
    })
  })

  it('sends a message object, or one a message function builds, as plain JSON', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 60_000 })]
    const whole = express()
    whole.use(rateLimit({ rules, store: clocked().store, message: { error: 'busy' } }))
    whole.get('/', handler().handle)
    await request(whole).get('/')
    const a = await request(whole).get('/')
    expect(a.status).toBe(429)
    expect(a.headers['content-type']).toBe('application/json')
    expect(a.text).toBe('{"error":"busy"}')

    const built = express()
    built.use(
      rateLimit({
        rules,
        store: clocked().store,
        message: (req, decision) =>
          req.path === '/text'
            ? `Wait ${decision.retryAfterMs} ms.`
            : { rule: decision.rule, path: req.path },
      }),
    )
    built.use(handler().handle)
    await request(built).get('/x')
    const b = await request(built).get('/object')
    expect(b.headers['content-type']).toBe('application/json')
    expect(b.body).toEqual({ rule: '1-per-60s', path: '/object' })
    const c = await request(built).get('/text')
    expect(c.headers['content-type']).toBe(PROBLEM)
    expect(JSON.parse(c.text).detail).toBe('Wait 60000 ms.')
  })

  it('in shadow mode counts as usual but lets every request through, with no rate-limit headers', async () => {
    const app = express()
    const shadowed: string[] = []
    const listener = (m: unknown) => shadowed.push((m as { action: string }).action)
    subscribe('sluice:http', listener)
    try {
      const limit = rateLimit({
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store: clocked().store,
        shadow: true,
      })
      app.use(limit)
      app.get('/', handler().handle)
      const answers = [await request(app).get('/'), await request(app).get('/')]
      expect(answers.map((a) => a.status)).toEqual([200, 200])
      for (const a of answers) {
        expect(Object.keys(a.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([])
      }
      // The decision is there for the handler, and the count is real.
      expect(answers[1]!.body).toEqual({ ok: true, remaining: 0 })
      expect((await limit.limiter.peek('127.0.0.1')).allowed).toBe(false)
      expect(shadowed).toEqual(['allow', 'shadow'])
    } finally {
      unsubscribe('sluice:http', listener)
    }
  })

  it('sends its 429 when onLimited only logs, so the request never hangs (sync and async)', async () => {
    for (const onLimited of [() => undefined, async () => undefined]) {
      const app = express()
      const logged: number[] = []
      app.use(
        rateLimit({
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store: clocked().store,
          onLimited: (_req, _res, decision) => {
            logged.push(decision.retryAfterMs)
            return onLimited()
          },
        }),
      )
      app.get('/', handler().handle)
      await request(app).get('/')
      const denied = await request(app).get('/').timeout(2000)
      expect(denied.status).toBe(429)
      expect(denied.headers['content-type']).toBe(PROBLEM)
      expect(denied.body).toMatchObject({ status: 429, retryAfter: 60 })
      expect(logged).toEqual([60_000])
    }
  })

  it('lets onLimited send the denied response, with the status and headers already set', async () => {
    const app = express()
    const seen: Decision[] = []
    app.use(
      rateLimit({
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store: clocked().store,
        statusCode: 503,
        onLimited: async (req, res, decision) => {
          seen.push(decision)
          expect(res.statusCode).toBe(503)
          expect(res.getHeader('Retry-After')).toBe('60')
          expect(req.rateLimit).toEqual(decision)
          await Promise.resolve()
          res.type('text/plain').send(`slow down: ${decision.rule}`)
        },
      }),
    )
    app.get('/', handler().handle)
    await request(app).get('/')
    const denied = await request(app).get('/')
    expect(denied.status).toBe(503)
    expect(denied.headers['content-type']).toBe('text/plain; charset=utf-8')
    expect(denied.headers['retry-after']).toBe('60')
    expect(denied.headers['ratelimit']).toBe('"1-per-60s";r=0;t=60')
    expect(denied.text).toBe('slow down: 1-per-60s')
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ allowed: false, retryAfterMs: 60_000, rule: '1-per-60s' })
  })

  it('lets skip() requests through uncounted and without headers', async () => {
    const app = express()
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
      store: clocked().store,
      skip: async (req) => req.path === '/health',
    })
    app.use(limit)
    const { calls, handle } = handler()
    app.use(handle)
    for (let i = 0; i < 3; i++) {
      const health = await request(app).get('/health')
      expect(health.status).toBe(200)
      expect(health.headers['ratelimit']).toBeUndefined()
      expect(health.body).toEqual({ ok: true, remaining: null })
    }
    // peek answers as if this call were counted: 1 left means nothing was counted yet.
    expect((await limit.limiter.peek('127.0.0.1')).remaining).toBe(1)
    expect((await request(app).get('/work')).status).toBe(200)
    expect((await request(app).get('/work')).status).toBe(200)
    expect((await request(app).get('/work')).status).toBe(429)
    expect(calls).toHaveLength(5)
  })

  it('works on a Router and per route, leaving other routes alone', async () => {
    const { store } = clocked()
    const app = express()
    const router = express.Router()
    const perRoute = rateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store, prefix: 'pay' })
    const routed = rateLimit({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store, prefix: 'api' })
    router.use(routed)
    router.get('/orders', handler().handle)
    app.use('/api', router)
    app.post('/pay', perRoute, handler().handle)
    app.get('/free', handler().handle)

    expect((await request(app).post('/pay')).status).toBe(200)
    expect((await request(app).post('/pay')).status).toBe(429)
    expect((await request(app).get('/api/orders')).status).toBe(200)
    expect((await request(app).get('/api/orders')).status).toBe(200)
    expect((await request(app).get('/api/orders')).status).toBe(429)
    for (let i = 0; i < 3; i++) {
      const free = await request(app).get('/free')
      expect(free.status).toBe(200)
      expect(free.headers['ratelimit']).toBeUndefined()
    }
  })
})
