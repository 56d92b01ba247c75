/**
 * The `overload` option on a real Fastify server, with the guard on a manual clock and an injected signal:
 * a shed request is answered 503 with `Retry-After` before the per-client limit, counts against no client,
 * is published on `sluice:http`; critical requests get the headroom, only once their client's own limit
 * admits them (and give their count back when it is full); a request leaves the guard when its response ends.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { AddressInfo } from 'node:net'
import { fixedWindow, type HttpMessage, type OverloadSignals, overload } from '@sluice/core'
import type { FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import { app, clocked } from './support.ts'

function gate() {
  let open!: () => void
  let reached!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  const arrived = new Promise<void>((resolve) => {
    reached = resolve
  })
  return { open, opened, reached, arrived }
}

describe('overload on Fastify', () => {
  it('sheds past the estimate with 503 and Retry-After before the rules, counting against no client', async () => {
    const { store } = clocked()
    const guardClock = { now: 0 }
    let signal: OverloadSignals = { eventLoopDelayMs: 500, utilization: 1 }
    const guard = overload<FastifyRequest>({
      maxEventLoopDelayMs: 100,
      critical: (request) => request.url === '/health',
      clock: () => guardClock.now,
      signals: () => signal,
    })
    const slow = gate()
    const again = gate()
    const a = await app(
      { rules: [fixedWindow({ limit: 10, windowMs: 60_000 })], store, overload: guard },
      (instance) => {
        instance.get('/slow', async () => {
          slow.reached()
          await slow.opened
          return { ok: true }
        })
        instance.get('/slow2', async () => {
          again.reached()
          await again.opened
          return { ok: true }
        })
        instance.get('/', async (request) => ({ remaining: request.rateLimit?.remaining }))
        instance.get('/health', async () => ({ ok: true }))
      },
    )
    const messages: HttpMessage[] = []
    const seen = (message: unknown) => messages.push(message as HttpMessage)
    subscribe('sluice:http', seen)
    await a.listen({ port: 0, host: '127.0.0.1' })
    const url = `http://127.0.0.1:${(a.server.address() as AddressInfo).port}`
    try {
      // No completion yet, no evidence: admitted however overloaded.
      expect((await fetch(`${url}/`)).status).toBe(200)
      expect(guard.state()).toMatchObject({ inFlight: 0, maxPass: 10, estimate: 1, triggered: true })
      const held = fetch(`${url}/slow`)
      await slow.arrived
      expect(guard.state().inFlight).toBe(1)

      const shed = await fetch(`${url}/`)
      expect(shed.status).toBe(503)
      expect(shed.headers.get('retry-after')).toBe('1')
      expect(shed.headers.get('ratelimit')).toBeNull()
      expect(shed.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect(await shed.json()).toEqual({
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The server is overloaded; retry in 1 s.',
        retryAfter: 1,
      })
      expect((await fetch(`${url}/health`)).status).toBe(200)

      slow.open()
      expect((await held).status).toBe(200)
      const after = await fetch(`${url}/`)
      expect(after.status).toBe(200)
      // Four admitted requests counted (/, /slow, /health, this one); the shed one took nothing.
      expect(await after.json()).toEqual({ remaining: 6 })
      expect(guard.state().inFlight).toBe(0)

      const shedMessages = messages.filter((m) => m.decision?.reason === 'overload')
      expect(shedMessages).toHaveLength(1)
      expect(shedMessages[0]).toMatchObject({
        limiter: 'sluice',
        key: '',
        action: 'deny',
        decision: { allowed: false, retryAfterMs: 100, reason: 'overload', rules: [] },
      })
      expect(messages.filter((m) => m.action === 'allow')).toHaveLength(4)

      // Calm from the next bucket on: nothing is shed, whatever is in flight.
      signal = { eventLoopDelayMs: 10, utilization: 0.2 }
      guardClock.now = 100
      const second = fetch(`${url}/slow2`)
      await again.arrived
      expect((await fetch(`${url}/`)).status).toBe(200)
      again.open()
      expect((await second).status).toBe(200)
    } finally {
      slow.open()
      again.open()
      unsubscribe('sluice:http', seen)
      await a.close()
      guard.close()
    }
  })

  it('a client over its own limit never takes the critical headroom: another payer is served while it waits on its limit', async () => {
    const { store } = clocked()
    // Overloaded throughout; estimate 1 (one completion of 0 ms), critical room 2.
    const guard = overload<FastifyRequest>({
      maxEventLoopDelayMs: 100,
      criticalHeadroom: 2,
      // What authentication established (here a bearer token of a paying account), not the path alone.
      critical: (request) => payers.has(String(request.headers.authorization)),
      clock: () => 0,
      signals: () => ({ eventLoopDelayMs: 500, utilization: 1 }),
    })
    const payers = new Set(['mallory', 'alice', 'bob'])
    // The client's identity, looked up by its token (as a session store would answer): mallory's second
    // lookup is held, so its request waits on its own limit while others arrive.
    const lookup = gate()
    let mallorys = 0
    const slow = gate()
    const hold = gate()
    const a = await app(
      {
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store,
        overload: guard,
        key: async (request) => {
          const token = String(request.headers.authorization)
          if (token === 'mallory' && ++mallorys === 2) {
            lookup.reached()
            await lookup.opened
          }
          return token
        },
      },
      (instance) => {
        instance.get('/slow', async () => {
          slow.reached()
          await slow.opened
          return { ok: true }
        })
        instance.get('/pay', async (request) => {
          if (request.headers['x-hold'] === '1') {
            hold.reached()
            await hold.opened
          }
          return { paid: true }
        })
        instance.get('/', async () => ({ ok: true }))
      },
    )
    await a.listen({ port: 0, host: '127.0.0.1' })
    const url = `http://127.0.0.1:${(a.server.address() as AddressInfo).port}`
    const as = (token: string, headers: Record<string, string> = {}) => ({
      headers: { authorization: token, ...headers },
    })
    try {
      expect((await fetch(`${url}/`, as('warm'))).status).toBe(200)
      const held = fetch(`${url}/slow`, as('slow'))
      await slow.arrived
      expect(guard.state()).toMatchObject({ inFlight: 1, estimate: 1, triggered: true })
      expect((await fetch(`${url}/`, as('carol'))).status).toBe(503) // an ordinary request is shed

      // Mallory's first payment is within its limit: it takes the headroom, as a payment should.
      expect((await fetch(`${url}/pay`, as('mallory'))).status).toBe(200)
      // Its second waits on its limit (the lookup), and holds no place in the guard meanwhile.
      const second = fetch(`${url}/pay`, as('mallory'))
      await lookup.arrived
      expect(guard.state().inFlight).toBe(1)
      // So alice's payment finds the headroom free.
      expect((await fetch(`${url}/pay`, as('alice'))).status).toBe(200)
      lookup.open()
      const over = await second
      expect(over.status).toBe(429) // over its own limit: denied as usual, never shed, never in the guard
      expect(await over.json()).toMatchObject({ status: 429 })
      expect(guard.state().inFlight).toBe(1)

      // The headroom full (bob's payment held in it), a payment within its limit is shed, and its count given
      // back: once there is room, the same client's next payment is admitted by its limit of 1.
      const bobs = fetch(`${url}/pay`, as('bob', { 'x-hold': '1' }))
      await hold.arrived
      expect(guard.state().inFlight).toBe(2)
      const shed = await fetch(`${url}/pay`, as('dave-the-payer'))
      expect(shed.status).toBe(503) // not a payer: shed as any request
      payers.add('erin')
      expect((await fetch(`${url}/pay`, as('erin'))).status).toBe(503)
      hold.open()
      expect((await bobs).status).toBe(200)
      expect((await fetch(`${url}/pay`, as('erin'))).status).toBe(200)
      slow.open()
      expect((await held).status).toBe(200)
    } finally {
      slow.open()
      lookup.open()
      hold.open()
      await a.close()
      guard.close()
    }
  })

  it('hands a shed request to the error handler with ERR_SLUICE_OVERLOADED and the guard status', async () => {
    const guard = overload({ maxUtilization: 0.5, status: 429, clock: () => 0, signals: () => busy })
    const slow = gate()
    const codes: unknown[] = []
    const a = await app(
      { rules: [fixedWindow({ limit: 10, windowMs: 60_000 })], overload: guard },
      (instance) => {
        instance.setErrorHandler((error: { code?: string; statusCode?: number }, _request, reply) => {
          codes.push(error.code)
          return reply.code(error.statusCode ?? 500).send({ code: error.code })
        })
        instance.get('/slow', async () => {
          slow.reached()
          await slow.opened
          return { ok: true }
        })
        instance.get('/', async () => ({ ok: true }))
      },
    )
    await a.listen({ port: 0, host: '127.0.0.1' })
    const url = `http://127.0.0.1:${(a.server.address() as AddressInfo).port}`
    try {
      expect((await fetch(`${url}/`)).status).toBe(200)
      const held = fetch(`${url}/slow`)
      await slow.arrived
      const shed = await fetch(`${url}/`)
      expect(shed.status).toBe(429)
      expect(shed.headers.get('retry-after')).toBe('1')
      expect(await shed.json()).toEqual({ code: 'ERR_SLUICE_OVERLOADED' })
      expect(codes).toEqual(['ERR_SLUICE_OVERLOADED'])
      slow.open()
      expect((await held).status).toBe(200)
    } finally {
      slow.open()
      await a.close()
    }
  })

  it('rejects an overload option that is not a guard, naming it', async () => {
    await expect(
      app({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], overload: {} as never }, () => {}),
    ).rejects.toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option: 'sluice.overload' })
  })
})

const busy: OverloadSignals = { eventLoopDelayMs: 0, utilization: 0.9 }
