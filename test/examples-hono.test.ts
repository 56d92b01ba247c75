/**
 * examples/hono as its users run it (`node examples/hono/server.mjs`): a real server process on a free
 * port, real HTTP requests, and the exact limits it promises.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { many, request, startServer, statuses, stopExamples } from './examples-harness.ts'

afterAll(stopExamples)

describe('examples/hono', () => {
  it('gives GET /search 5 per 10 s on top of the app-wide limit, leaves /health alone, and holds 2 exports at once', async () => {
    const server = await startServer('examples/hono/server.mjs')
    const seen: string[] = []
    for (let i = 0; i < 5; i++) {
      const r = await request(`${server.url}/search`)
      seen.push(`${r.status} ${r.body.remaining}`)
      expect(r.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60, "5-per-10s";q=5;w=10')
    }
    expect(seen).toEqual(['200 4', '200 3', '200 2', '200 1', '200 0'])
    const denied = await request(`${server.url}/search`)
    expect(denied.status).toBe(429)
    expect(['9', '10']).toContain(denied.headers.get('retry-after'))
    expect(denied.body).toMatchObject({ title: 'Too Many Requests', status: 429 })

    const health = await many(20, `${server.url}/health`)
    expect(statuses(health)).toEqual({ 200: 20 })
    expect(health[0]!.headers.get('ratelimit')).toBe(null)

    // Two exports stream at once; a third, sent while both are streaming, is refused.
    const open = await Promise.all([fetch(`${server.url}/export`), fetch(`${server.url}/export`)])
    expect(open.map((r) => r.status)).toEqual([200, 200])
    const third = await fetch(`${server.url}/export`)
    expect(third.status).toBe(429)
    await third.body?.cancel()
    const texts = await Promise.all(open.map((r) => r.text()))
    expect(texts).toEqual(['row 1\nrow 2\nrow 3\nrow 4\nrow 5\n', 'row 1\nrow 2\nrow 3\nrow 4\nrow 5\n'])
    const after = await fetch(`${server.url}/export`)
    expect(after.status).toBe(200)
    expect(await after.text()).toBe('row 1\nrow 2\nrow 3\nrow 4\nrow 5\n')
  })
})
