import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { leakyBucket, MemoryStore, type Store } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import type { Response } from 'express'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { clocked, flavours, handler, listen } from './support.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

/** Opens a GET that the test can cut off; resolves nothing, errors are the point. */
function openRequest(url: string): http.ClientRequest {
  const req = http.get(url, { agent: false })
  req.on('error', () => {})
  return req
}

/** Lets pending I/O callbacks and microtasks run. */
const turn = () => new Promise((resolve) => setImmediate(resolve))

const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length

describe.each(flavours)('queue-and-wait on $name', ({ express }) => {
  it('holds queued requests their waitMs, in order, and answers 429 past maxQueueMs', async () => {
    // The clock stands still, so the slots are exactly 0, 50 and 100 ms out; the holds are real.
    const { store } = clocked()
    const app = express()
    const arrived = new Map<string, number>()
    const passed: { id: string; waitMs: number; heldMs: number }[] = []
    app.use((req, _res, next) => {
      arrived.set(String(req.query['id']), performance.now())
      next()
    })
    app.use(rateLimit({ rules: [leakyBucket({ ratePerSecond: 20, maxQueueMs: 100 })], store }))
    app.use((req, res) => {
      const id = String(req.query['id'])
      passed.push({ id, waitMs: req.rateLimit!.waitMs, heldMs: performance.now() - arrived.get(id)! })
      res.json({ id })
    })
    const server = await listen(app)
    try {
      const answers = await Promise.all(
        [1, 2, 3, 4].map(async (id) => {
          const res = await fetch(`${server.url}/?id=${id}`)
          return { status: res.status, headers: res.headers, body: await res.text() }
        }),
      )
      const denied = answers.filter((a) => a.status === 429)
      expect(answers.filter((a) => a.status === 200)).toHaveLength(3)
      expect(denied).toHaveLength(1)
      expect(denied[0]!.headers.get('retry-after')).toBe('1')
      expect(JSON.parse(denied[0]!.body)).toMatchObject({
        detail: 'Rate limit 20-per-s-queue-100ms exceeded; retry in 1 s.',
      })

      // Handlers ran in slot order, each after its wait (a timer may fire a millisecond early).
      expect(passed.map((p) => p.waitMs)).toEqual([0, 50, 100])
      for (const p of passed) expect(p.heldMs).toBeGreaterThanOrEqual(p.waitMs - 2)
      expect(passed[2]!.heldMs - passed[1]!.heldMs).toBeGreaterThan(0)
    } finally {
      await server.close()
    }
  })

  it('never calls the handler of a client that goes away while held, and leaves no timer or listener', async () => {
    const { store } = clocked()
    const app = express()
    const { calls, handle } = handler()
    const responses: { res: Response; closeListeners: number }[] = []
    app.use((_req, res, next) => {
      responses.push({ res, closeListeners: res.listenerCount('close') })
      next()
    })
    const limit = rateLimit({ rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 60_000 })], store })
    app.use(limit)
    app.use(handle)
    const server = await listen(app)
    try {
      await limit.limiter.consume('127.0.0.1') // takes the slot that needs no wait
      const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout')
      const clearTimeoutSpy = vi.spyOn(globalThis, 'clearTimeout')
      const holdCall = () => setTimeoutSpy.mock.calls.findIndex((call) => call[1] === 1000)
      const before = timeouts()

      const client = openRequest(server.url)
      await vi.waitFor(() => expect(holdCall()).toBeGreaterThanOrEqual(0))
      const timer = setTimeoutSpy.mock.results[holdCall()]!.value
      const held = responses[0]!
      expect(held.res.listenerCount('close')).toBe(held.closeListeners + 1)
      const whileHeld = timeouts()
      expect(whileHeld).toBe(before + 1)

      client.destroy()
      await vi.waitFor(() => expect(clearTimeoutSpy).toHaveBeenCalledWith(timer))
      await turn()
      expect(calls).toHaveLength(0)
      expect(held.res.listenerCount('close')).toBe(held.closeListeners)
      expect(timeouts()).toBeLessThan(whileHeld)
      // Nobody queued behind it, so its slot went back: the next caller waits 1 s, not 2.
      await vi.waitFor(async () => expect((await limit.limiter.peek('127.0.0.1')).waitMs).toBe(1000))
    } finally {
      await server.close()
    }
  })

  it('does not hold at all when the client went away while the store was deciding', async () => {
    const memory = new MemoryStore({ clock: () => 1_000_000, sweepIntervalMs: 0 })
    let gate: Promise<void> | undefined
    let open = () => {}
    let deciding = 0
    let decided = 0
    const gated: Store = {
      apply: async (...args) => {
        deciding++
        if (gate !== undefined) await gate
        decided++
        return memory.apply(...args)
      },
      reset: (prefix, key) => memory.reset(prefix, key),
    }
    const app = express()
    const { calls, handle } = handler()
    let closed = 0
    app.use((_req, res, next) => {
      res.on('close', () => closed++)
      next()
    })
    const limit = rateLimit({ rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 60_000 })], store: gated })
    app.use(limit)
    app.use(handle)
    const server = await listen(app)
    try {
      await limit.limiter.consume('127.0.0.1') // takes the slot that needs no wait
      gate = new Promise((resolve) => {
        open = resolve
      })
      const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout')
      const client = openRequest(server.url)
      await vi.waitFor(() => expect(deciding).toBe(2))
      client.destroy()
      await vi.waitFor(() => expect(closed).toBe(1))
      gate = undefined
      open()
      await vi.waitFor(() => expect(decided).toBe(2))
      await turn()
      // The request was counted (its slot, 1 s out, is taken) but never held and never handled.
      expect((await limit.limiter.peek('127.0.0.1')).waitMs).toBe(2000)
      expect(setTimeoutSpy.mock.calls.some((call) => call[1] === 1000)).toBe(false)
      expect(calls).toHaveLength(0)
    } finally {
      await server.close()
    }
  })
})
