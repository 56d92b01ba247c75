/**
 * The `overload` option on a real Express server, with the guard on a manual clock and an injected signal:
 * a shed request is answered 503 with `Retry-After` before the per-client limit, counts against no client,
 * is published on `sluice:http`; critical requests get the headroom; a request leaves the guard when its
 * response ends.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { fixedWindow, type HttpMessage, type OverloadSignals, overload } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { describe, expect, it } from 'vitest'
import { clocked, flavours, listen } from './support.ts'

/** A gate the handler of `/slow` waits at, so a request stays in flight until the test opens it. */
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

describe.each(flavours)('overload on $name', ({ express }) => {
  it('sheds past the estimate with 503 and Retry-After before the rules, counting against no client', async () => {
    const { store } = clocked()
    const guardClock = { now: 0 }
    let signal: OverloadSignals = { eventLoopDelayMs: 500, utilization: 1 }
    const guard = overload({
      maxEventLoopDelayMs: 100,
      critical: (req: { path?: string }) => req.path === '/health',
      clock: () => guardClock.now,
      signals: () => signal,
    })
    const slow = gate()
    const app = express()
    app.use(rateLimit({ rules: [fixedWindow({ limit: 10, windowMs: 60_000 })], store, overload: guard }))
    app.get('/slow', async (_req, res) => {
      slow.reached()
      await slow.opened
      res.json({ ok: true })
    })
    app.get('/', (req, res) => res.json({ remaining: req.rateLimit?.remaining }))
    app.get('/health', (_req, res) => res.json({ ok: true }))
    const messages: HttpMessage[] = []
    const seen = (message: unknown) => messages.push(message as HttpMessage)
    subscribe('sluice:http', seen)
    const server = await listen(app)
    try {
      // Overloaded from the first request, but with no completion there is no evidence: it is admitted.
      expect((await fetch(`${server.url}/`)).status).toBe(200)
      // One completion of 0 ms in bucket 0: estimate max(1, 10/s × 0 ms) = 1 request in flight.
      expect(guard.state()).toMatchObject({ inFlight: 0, maxPass: 10, estimate: 1, triggered: true })
      const held = fetch(`${server.url}/slow`)
      await slow.arrived
      expect(guard.state().inFlight).toBe(1)

      const shed = await fetch(`${server.url}/`)
      expect(shed.status).toBe(503)
      expect(shed.headers.get('retry-after')).toBe('1')
      expect(shed.headers.get('ratelimit')).toBeNull()
      expect(shed.headers.get('content-type')).toBe('application/problem+json')
      expect(await shed.json()).toEqual({
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The server is overloaded; retry in 1 s.',
        retryAfter: 1,
      })
      // A critical request has 1.5 × the room: one in flight is under it.
      expect((await fetch(`${server.url}/health`)).status).toBe(200)

      slow.open()
      expect((await held).status).toBe(200)
      // The held request left the guard when its response ended: the next one is admitted, and the
      // client has been counted for the four admitted requests only (the shed one took nothing).
      const after = await fetch(`${server.url}/`)
      expect(after.status).toBe(200)
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
      // Its decision reached no rule, so no store: one message per admitted request besides (/, /slow, /health and the last).
      expect(messages.filter((m) => m.action === 'allow')).toHaveLength(4)

      // The signal calms; the guard reads it in the next bucket and sheds nothing, whatever is in flight.
      signal = { eventLoopDelayMs: 10, utilization: 0.2 }
      guardClock.now = 100
      const again = gate()
      app.get('/slow2', async (_req, res) => {
        again.reached()
        await again.opened
        res.json({ ok: true })
      })
      const second = fetch(`${server.url}/slow2`)
      await again.arrived
      expect((await fetch(`${server.url}/`)).status).toBe(200)
      again.open()
      expect((await second).status).toBe(200)
    } finally {
      slow.open()
      unsubscribe('sluice:http', seen)
      await server.close()
      guard.close()
    }
  })

  it('enters a request once however many limits share the guard, and answers the guard status', async () => {
    const { store } = clocked()
    const guard = overload({ maxUtilization: 0.5, status: 429, clock: () => 0, signals: () => busy })
    const app = express()
    const first = rateLimit({ rules: [fixedWindow({ limit: 10, windowMs: 60_000 })], store, overload: guard })
    const second = rateLimit({
      rules: [fixedWindow({ limit: 10, windowMs: 60_000, name: 'route' })],
      store,
      prefix: 'route',
      overload: guard,
    })
    const slow = gate()
    app.use(first)
    app.get('/slow', second, async (_req, res) => {
      slow.reached()
      await slow.opened
      res.json({ ok: true })
    })
    app.get('/', second, (_req, res) => res.json({ ok: true }))
    const server = await listen(app)
    try {
      expect((await fetch(`${server.url}/`)).status).toBe(200)
      const held = fetch(`${server.url}/slow`)
      await slow.arrived
      // Two limits saw the held request; it is one request in flight.
      expect(guard.state().inFlight).toBe(1)
      const shed = await fetch(`${server.url}/`)
      expect(shed.status).toBe(429)
      expect(shed.headers.get('retry-after')).toBe('1')
      slow.open()
      expect((await held).status).toBe(200)
    } finally {
      slow.open()
      await server.close()
    }
  })

  it('rejects an overload option that is not a guard, naming it', () => {
    expect(() =>
      rateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], overload: {} as never }),
    ).toThrow(expect.objectContaining({ code: 'ERR_SLUICE_INVALID_OPTION', option: 'rateLimit.overload' }))
  })
})

const busy: OverloadSignals = { eventLoopDelayMs: 0, utilization: 0.9 }
