import http from 'node:http'
import { concurrency, fixedWindow, leakyBucket } from '@sluice/core'
import type { FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { app, clocked } from './support.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

async function listening(instance: FastifyInstance): Promise<string> {
  return instance.listen({ port: 0, host: '127.0.0.1' })
}

function openRequest(url: string): http.ClientRequest {
  const req = http.get(url, { agent: false })
  req.on('error', () => {})
  return req
}

describe('abuse controls on Fastify', () => {
  it('answers the denial that begins a block and every blocked request with blockedStatusCode', async () => {
    const { clock, store } = clocked(1_000_020_000)
    const instance = await app(
      {
        rules: [fixedWindow({ limit: 1, windowMs: 1000 })],
        store,
        block: { ms: 30_000 },
        blockedStatusCode: 403,
      },
      (a) => a.get('/', async () => ({ ok: true })),
    )
    try {
      expect((await instance.inject('/')).statusCode).toBe(200)
      const began = await instance.inject('/')
      expect(began.statusCode).toBe(403)
      expect(began.headers['retry-after']).toBe('30')
      clock.now += 29_000
      const blocked = await instance.inject('/')
      expect(blocked.statusCode).toBe(403)
      expect(blocked.headers['retry-after']).toBe('1')
      expect(blocked.json()).toMatchObject({
        title: 'Forbidden',
        detail: 'Blocked after exceeding rate limit 1-per-1s; retry in 1 s.',
      })
      clock.now += 1000
      expect((await instance.inject('/')).statusCode).toBe(200)
    } finally {
      await instance.close()
    }
  })

  it('refunds what countWhen answers false for, per route config too', async () => {
    const { store } = clocked()
    const instance = await app(
      {
        rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
        store,
        countWhen: (_request, reply) => reply.statusCode >= 400,
      },
      (a) => {
        a.get('/ok', async () => ({ ok: true }))
        a.get('/fail', async (_request, reply) => reply.code(401).send({ ok: false }))
      },
    )
    const url = await listening(instance)
    const limiter = instance.rateLimit().limiter
    const remaining = async () => (await limiter.peek('127.0.0.1')).remaining
    try {
      for (let i = 0; i < 4; i++) {
        expect((await fetch(`${url}/ok`)).status).toBe(200)
        await vi.waitFor(async () => expect(await remaining()).toBe(1))
      }
      expect((await fetch(`${url}/fail`)).status).toBe(401)
      expect((await fetch(`${url}/fail`)).status).toBe(401)
      expect((await fetch(`${url}/ok`)).status).toBe(429)
    } finally {
      await instance.close()
    }
  })

  it('counts the request when countWhen throws, with one warning', async () => {
    const { store } = clocked()
    const warnings: string[] = []
    vi.spyOn(process, 'emitWarning').mockImplementation(((w: string, type?: unknown) => {
      if (type === 'SluiceWarning') warnings.push(String(w))
    }) as typeof process.emitWarning)
    const instance = await app(
      {
        rules: [fixedWindow({ limit: 5, windowMs: 60_000 })],
        store,
        countWhen: () => {
          throw new Error('nope')
        },
      },
      (a) => a.get('/', async () => ({ ok: true })),
    )
    const url = await listening(instance)
    const limiter = instance.rateLimit().limiter
    try {
      for (let i = 0; i < 3; i++) expect((await fetch(url)).status).toBe(200)
      await new Promise((resolve) => setTimeout(resolve, 20))
      expect((await limiter.peek('127.0.0.1')).remaining).toBe(1)
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain('countWhen threw')
    } finally {
      await instance.close()
    }
  })

  it('holds at most queuePerClient requests of one client, and gives abandoned slots back', async () => {
    const { store } = clocked()
    let handled = 0
    const instance = await app(
      { rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 60_000 })], store, queuePerClient: 1 },
      (a) =>
        a.get('/', async () => {
          handled++
          return { ok: true }
        }),
    )
    const url = await listening(instance)
    const limiter = instance.rateLimit().limiter
    const nextWait = async () => (await limiter.peek('127.0.0.1')).waitMs
    try {
      await limiter.consume('127.0.0.1')
      const first = openRequest(url)
      await vi.waitFor(async () => expect(await nextWait()).toBe(2000))
      const second = await fetch(url)
      expect(second.status).toBe(429)
      expect(await nextWait()).toBe(2000)
      first.destroy()
      await vi.waitFor(async () => expect(await nextWait()).toBe(1000))
      expect(handled).toBe(0)
    } finally {
      await instance.close()
    }
  })
})

describe('concurrency on Fastify', () => {
  it('holds at most limit slow requests per key, and a client that disconnects gives its unit back', async () => {
    let running = 0
    let most = 0
    const finish: (() => void)[] = []
    const instance = await app({ rules: [concurrency({ limit: 2, leaseMs: 60_000 })] }, (a) => {
      a.get('/', async () => {
        running++
        most = Math.max(most, running)
        await new Promise<void>((resolve) => finish.push(resolve))
        running--
        return { ok: true }
      })
      a.get('/hang', () => new Promise(() => {}))
    })
    const url = await listening(instance)
    const limiter = instance.rateLimit().limiter
    const held = async () => {
      const d = await limiter.peek('127.0.0.1')
      return 2 - d.remaining - (d.allowed ? 1 : 0)
    }
    try {
      const slow = [fetch(url), fetch(url)]
      await vi.waitFor(() => expect(finish).toHaveLength(2))
      const third = await fetch(url)
      expect(third.status).toBe(429)
      expect(third.headers.get('ratelimit-policy')).toBe('"2-concurrent";q=2;qu="concurrent-requests";w=60')
      finish.shift()!()
      await slow[0]
      await vi.waitFor(async () => expect(await held()).toBe(1))
      const hanging = openRequest(`${url}/hang`)
      await vi.waitFor(async () => expect(await held()).toBe(2))
      hanging.destroy()
      await vi.waitFor(async () => expect(await held()).toBe(1))
      finish.shift()!()
      await slow[1]
      await vi.waitFor(async () => expect(await held()).toBe(0))
      expect(most).toBe(2)
    } finally {
      for (const resolve of finish) resolve()
      await instance.close()
    }
  })
})
