/**
 * The `overload` option on a real Fastify server, with the guard on a manual clock and an injected signal:
 * a shed request is answered 503 with `Retry-After` before the per-client limit, counts against no client,
 * is published on `sluice:http`; critical requests get the headroom; a request leaves the guard when its
 * response ends.
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
