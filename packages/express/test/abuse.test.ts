import http from 'node:http'
import { concurrency, fixedWindow, leakyBucket } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { clocked, flavours, listen, unhandledDuring } from './support.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

/** Opens a GET that the test can cut off. */
function openRequest(url: string): http.ClientRequest {
  const req = http.get(url, { agent: false })
  req.on('error', () => {})
  return req
}

/** Collects the process warnings of type SluiceWarning while the test runs. */
function sluiceWarnings(): string[] {
  const seen: string[] = []
  const spy = vi.spyOn(process, 'emitWarning')
  spy.mockImplementation(((warning: string | Error, type?: unknown) => {
    if (type === 'SluiceWarning') seen.push(String(warning))
  }) as typeof process.emitWarning)
  return seen
}

describe.each(flavours)('abuse controls on $name', ({ express }) => {
  it('answers the denial that begins a block and every blocked request with blockedStatusCode', async () => {
    const { clock, store } = clocked()
    const app = express()
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 2, windowMs: 1000 })],
      store,
      block: { ms: 10_000, factor: 2, maxMs: 40_000, forgetMs: 3_600_000 },
      blockedStatusCode: 403,
    })
    app.use(limit)
    app.get('/', (_req, res) => res.json({ ok: true }))
    const server = await listen(app)
    try {
      const get = async () => {
        const res = await fetch(server.url)
        return {
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          body: (await res.json()) as Record<string, unknown>,
        }
      }
      expect((await get()).status).toBe(200)
      expect((await get()).status).toBe(200)
      // The window would free a place in 1 s, but the block lasts 10.
      const began = await get()
      expect(began).toMatchObject({ status: 403, retryAfter: '10' })
      expect(began.body).toMatchObject({
        title: 'Forbidden',
        status: 403,
        detail: 'Rate limit 2-per-1s exceeded; retry in 10 s.',
      })
      clock.now += 5000
      const blocked = await get()
      expect(blocked).toMatchObject({ status: 403, retryAfter: '5' })
      expect(blocked.body.detail).toBe('Blocked after exceeding rate limit 2-per-1s; retry in 5 s.')
      clock.now += 5000
      expect((await get()).status).toBe(200)
      expect((await get()).status).toBe(200)
      // The second block within forgetMs lasts twice as long.
      expect(await get()).toMatchObject({ status: 403, retryAfter: '20' })
      await limit.limiter.reset('127.0.0.1')
      expect((await get()).status).toBe(200)
    } finally {
      await server.close()
    }
  })

  it('refunds what countWhen answers false for: only failed logins count', async () => {
    const { store } = clocked()
    const app = express()
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
      store,
      countWhen: (_req, res) => res.statusCode >= 400,
    })
    app.use(limit)
    app.get('/ok', (_req, res) => res.json({ ok: true }))
    app.get('/fail', (_req, res) => res.status(401).json({ ok: false }))
    const server = await listen(app)
    const remaining = async () => (await limit.limiter.peek('127.0.0.1')).remaining
    try {
      for (let i = 0; i < 5; i++) {
        expect((await fetch(`${server.url}/ok`)).status).toBe(200)
        // The refund runs when the response has finished: by the next request it is done.
        await vi.waitFor(async () => expect(await remaining()).toBe(1))
      }
      expect((await fetch(`${server.url}/fail`)).status).toBe(401)
      expect((await fetch(`${server.url}/fail`)).status).toBe(401)
      expect((await fetch(`${server.url}/fail`)).status).toBe(429)
      expect((await fetch(`${server.url}/ok`)).status).toBe(429)
    } finally {
      await server.close()
    }
  })

  it('counts a request whose client left before the response was sent, without asking countWhen', async () => {
    const { store } = clocked()
    const app = express()
    const asked: number[] = []
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 5, windowMs: 60_000 })],
      store,
      countWhen: () => {
        asked.push(1)
        return false
      },
    })
    let arrived = 0
    app.use(limit)
    app.get('/', () => {
      arrived++
    })
    const server = await listen(app)
    try {
      const client = openRequest(server.url)
      await vi.waitFor(() => expect(arrived).toBe(1))
      client.destroy()
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(asked).toHaveLength(0)
      expect((await limit.limiter.peek('127.0.0.1')).remaining).toBe(3)
    } finally {
      await server.close()
    }
  })

  it('counts the request when countWhen throws or answers a promise, warning once per failure kind', async () => {
    const { store } = clocked()
    const warnings = sluiceWarnings()
    const app = express()
    let mode: 'throw' | 'promise' | 'other' = 'throw'
    const limit = rateLimit({
      rules: [fixedWindow({ limit: 10, windowMs: 60_000 })],
      store,
      countWhen: (() => {
        if (mode === 'throw') throw new Error('bad predicate')
        if (mode === 'promise') return Promise.reject(new Error('late predicate'))
        return 'no' as unknown as boolean
      }) as () => boolean,
    })
    app.use(limit)
    app.get('/', (_req, res) => res.json({ ok: true }))
    const server = await listen(app)
    const remaining = async () => (await limit.limiter.peek('127.0.0.1')).remaining
    try {
      const unhandled = await unhandledDuring(async () => {
        for (const m of ['throw', 'throw', 'promise', 'promise', 'other'] as const) {
          mode = m
          expect((await fetch(server.url)).status).toBe(200)
        }
        await new Promise((resolve) => setTimeout(resolve, 20))
      })
      expect(unhandled).toEqual([])
      // Every request stayed counted: only `false` refunds.
      expect(await remaining()).toBe(4)
      expect(warnings).toHaveLength(2)
      expect(warnings[0]).toContain('countWhen threw (the request stays counted): Error: bad predicate')
      expect(warnings[1]).toContain('countWhen returned a promise')
    } finally {
      await server.close()
    }
  })

  it('holds at most queuePerClient requests of one client in a queue, and gives abandoned slots back', async () => {
    const { store } = clocked()
    const app = express()
    const limit = rateLimit({
      rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 60_000 })],
      store,
      queuePerClient: 2,
    })
    let handled = 0
    app.use(limit)
    app.get('/', (_req, res) => {
      handled++
      res.json({ ok: true })
    })
    const server = await listen(app)
    const nextWait = async () => (await limit.limiter.peek('127.0.0.1')).waitMs
    try {
      await limit.limiter.consume('127.0.0.1') // the slot that needs no wait
      const first = openRequest(server.url)
      await vi.waitFor(async () => expect(await nextWait()).toBe(2000))
      const second = openRequest(server.url)
      await vi.waitFor(async () => expect(await nextWait()).toBe(3000))
      // A third request of the same client is refused at once; its slot (last in line) goes back.
      const third = await fetch(server.url)
      expect(third.status).toBe(429)
      expect(third.headers.get('retry-after')).toBe('3')
      expect(await nextWait()).toBe(3000)
      // The second leaves: it is last in line, so its slot goes back; then the first is last, and leaves.
      second.destroy()
      await vi.waitFor(async () => expect(await nextWait()).toBe(2000))
      first.destroy()
      await vi.waitFor(async () => expect(await nextWait()).toBe(1000))
      expect(handled).toBe(0)
    } finally {
      await server.close()
    }
  })
})

describe.each(flavours)('concurrency on $name', ({ express }) => {
  it('holds at most limit slow requests per key, and a client that disconnects gives its unit back', async () => {
    const app = express()
    const limit = rateLimit({ rules: [concurrency({ limit: 2, leaseMs: 60_000 })] })
    let running = 0
    let most = 0
    const finish: (() => void)[] = []
    app.use(limit)
    app.get('/', (_req, res) => {
      running++
      most = Math.max(most, running)
      finish.push(() => {
        running--
        res.json({ ok: true })
      })
    })
    app.get('/hang', () => {})
    const server = await listen(app)
    const held = async () => {
      const d = await limit.limiter.peek('127.0.0.1')
      return 2 - d.remaining - (d.allowed ? 1 : 0)
    }
    try {
      const slow = [fetch(server.url), fetch(server.url)]
      await vi.waitFor(() => expect(finish).toHaveLength(2))
      const third = await fetch(server.url)
      expect(third.status).toBe(429)
      expect(third.headers.get('ratelimit-policy')).toBe('"2-concurrent";q=2;qu="concurrent-requests";w=60')
      // A response sent gives its unit back.
      finish.shift()!()
      await slow[0]
      await vi.waitFor(async () => expect(await held()).toBe(1))
      // A client that leaves gives its unit back too.
      const hanging = openRequest(`${server.url}/hang`)
      await vi.waitFor(async () => expect(await held()).toBe(2))
      hanging.destroy()
      await vi.waitFor(async () => expect(await held()).toBe(1))
      finish.shift()!()
      await slow[1]
      await vi.waitFor(async () => expect(await held()).toBe(0))
      expect(most).toBe(2)
    } finally {
      await server.close()
    }
  })
})
