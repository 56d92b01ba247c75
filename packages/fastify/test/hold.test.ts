/**
 * Queue-and-wait on a real listening server: a held request whose client goes away never reaches its
 * handler and leaves no timer behind; one whose client stays is answered after its wait.
 */
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { leakyBucket } from '@sluice/core'
import type { FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { app, clocked, handler } from './support.ts'

let server: FastifyInstance | undefined
afterEach(async () => {
  vi.restoreAllMocks()
  await server?.close()
  server = undefined
})

const HOLD_MS = 20_000

/**
 * Watches timers: the hold's is the one set for `HOLD_MS` (nothing else here waits that long), and a
 * timer left behind is one never cleared.
 */
function watchTimers() {
  const set = vi.spyOn(globalThis, 'setTimeout')
  const clear = vi.spyOn(globalThis, 'clearTimeout')
  const holdTimer = () => {
    const i = set.mock.calls.findIndex((call) => call[1] === HOLD_MS)
    return i === -1 ? undefined : set.mock.results[i]!.value
  }
  return {
    started: () => holdTimer() !== undefined,
    cleared: () => clear.mock.calls.some((call) => call[0] === holdTimer()),
  }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A server whose route admits one request at once and queues the next ones `intervalMs` apart. */
async function queued(intervalMs: number) {
  const h = handler()
  server = await app(
    {
      rules: [leakyBucket({ ratePerSecond: 1000 / intervalMs, maxQueueMs: 60_000 })],
      store: clocked().store,
    },
    (a) => a.get('/queued', h.handle),
  )
  await server.listen({ port: 0, host: '127.0.0.1' })
  const { port } = server.server.address() as AddressInfo
  return { h, url: `http://127.0.0.1:${port}/queued` }
}

describe('a held request', () => {
  it('whose client goes away (http.request destroyed) never runs its handler and leaves no timer', async () => {
    const { h, url } = await queued(HOLD_MS)
    expect((await fetch(url)).status).toBe(200)
    const timers = watchTimers()

    const outcome = new Promise<string>((resolve) => {
      const req = httpRequest(url, (res) => resolve(`answered ${res.statusCode}`))
      req.on('error', (error) => resolve(`closed: ${(error as NodeJS.ErrnoException).code}`))
      req.end()
      void until(timers.started, 'the hold to start').then(() => req.destroy())
    })
    expect(await outcome).toMatch(/^closed/)
    await until(timers.cleared, 'the hold timer to be cleared')
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(h.calls).toHaveLength(1)
  })

  it('whose fetch is aborted stops waiting at once, its handler never called', async () => {
    const { h, url } = await queued(HOLD_MS)
    await fetch(url)
    const timers = watchTimers()
    const controller = new AbortController()
    const pending = fetch(url, { signal: controller.signal })
    await until(timers.started, 'the hold to start')
    controller.abort()
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' })
    await until(timers.cleared, 'the hold timer to be cleared')
    expect(h.calls).toHaveLength(1)
  })

  it('whose client stays is answered after its wait, with the queue position in request.rateLimit', async () => {
    const { h, url } = await queued(150)
    await fetch(url)
    const started = performance.now()
    const res = await fetch(url)
    expect(res.status).toBe(200)
    expect(performance.now() - started).toBeGreaterThanOrEqual(145)
    expect(h.calls.map((r) => r.rateLimit?.waitMs)).toEqual([0, 150])
  })
})
