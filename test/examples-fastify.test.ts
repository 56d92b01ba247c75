/**
 * examples/fastify as its users run it (`node examples/fastify/server.mjs`): a real server process on a
 * free port, real HTTP requests, and the exact limits it promises. Each test starts a server of its own,
 * so every count starts from zero.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { many, request, startServer, statuses, stopExamples } from './examples-harness.ts'

const SERVER = 'examples/fastify/server.mjs'

afterAll(stopExamples)

const pay = (bizType: string, channel?: string): RequestInit => ({
  method: 'POST',
  headers: { 'x-biz-type': bizType, ...(channel === undefined ? {} : { 'x-channel': channel }) },
})

describe('examples/fastify', () => {
  it('gives GET /search its own limit, 5 per 10 s, and leaves GET /health alone', async () => {
    const server = await startServer(SERVER)
    const seen: string[] = []
    for (let i = 0; i < 5; i++) {
      const r = await request(`${server.url}/search`)
      expect(r.headers.get('ratelimit-policy')).toBe('"5-per-10s";q=5;w=10')
      seen.push(`${r.status} ${r.headers.get('ratelimit')} ${r.body.remaining}`)
    }
    expect(seen).toEqual([
      '200 "5-per-10s";r=4;t=10 4',
      '200 "5-per-10s";r=3;t=10 3',
      '200 "5-per-10s";r=2;t=10 2',
      '200 "5-per-10s";r=1;t=10 1',
      '200 "5-per-10s";r=0;t=10 0',
    ])
    const denied = await request(`${server.url}/search`)
    expect(denied.status).toBe(429)
    expect(['9', '10']).toContain(denied.headers.get('retry-after'))
    expect(denied.headers.get('content-type')).toMatch(/^application\/problem\+json\b/)
    expect(denied.body).toMatchObject({ title: 'Too Many Requests', status: 429 })
    expect(denied.body.detail).toMatch(/^Rate limit 5-per-10s exceeded; retry in (9|10) s\.$/)

    const health = await many(20, `${server.url}/health`)
    expect(statuses(health)).toEqual({ 200: 20 })
    for (const r of health) {
      expect(r.headers.get('ratelimit')).toBe(null)
      expect(r.body).toEqual({ ok: true })
    }
  })

  it('limits POST /pay per bizType + channel from its table; -1 and missing pairs are not limited', async () => {
    const server = await startServer(SERVER)
    const url = `${server.url}/pay`

    const alipay = await many(10, url, pay('PAYMENT', 'ALIPAY'))
    expect(statuses(alipay)).toEqual({ 200: 3, 429: 7 })
    expect(
      alipay
        .filter((r) => r.status === 200)
        .map((r) => r.headers.get('ratelimit'))
        .sort(),
    ).toEqual(['"3-per-1s";r=0;t=1', '"3-per-1s";r=1;t=1', '"3-per-1s";r=2;t=1'])
    for (const r of alipay.filter((r) => r.status === 429)) {
      expect(r.headers.get('retry-after')).toBe('1')
      expect(r.body.detail).toBe('Rate limit 3-per-1s exceeded; retry in 1 s.')
    }
    expect(statuses(await many(10, url, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 8 })

    for (const bizType of ['REFUND', 'QUERY']) {
      const free = await many(10, url, pay(bizType, 'ALIPAY'))
      expect(statuses(free)).toEqual({ 200: 10 })
      for (const r of free) {
        expect(r.body).toEqual({ paid: true, limitedBy: null })
        expect(r.headers.get('ratelimit')).toBe(null)
      }
    }

    const missing = await request(url, pay('PAYMENT'))
    expect(missing.status).toBe(400)
    expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json\b/)
    expect(missing.body.detail).toBe('This request needs the x-channel header.')
  })

  it('queues GET /report at 2 a second, and refuses a request that would wait past 2 s', async () => {
    const server = await startServer(SERVER)
    const replies = await many(6, `${server.url}/report`)
    expect(statuses(replies)).toEqual({ 200: 5, 429: 1 })
    const served = replies
      .filter((r) => r.status === 200)
      .sort((a, b) => (a.body.waitedMs as number) - (b.body.waitedMs as number))
    served.forEach((r, i) => {
      const waitedMs = r.body.waitedMs as number
      expect(waitedMs).toBeLessThanOrEqual(i * 500)
      expect(waitedMs).toBeGreaterThan(i * 500 - 150)
      expect(r.tookMs).toBeGreaterThanOrEqual(waitedMs - 1)
    })
    const refused = replies.find((r) => r.status === 429)!
    expect(refused.headers.get('retry-after')).toBe('1')
  })

  it('stops on SIGTERM', async () => {
    const server = await startServer(SERVER)
    expect((await request(`${server.url}/health`)).status).toBe(200)
    await server.stop()
    expect(await server.exited).not.toBe(0)
  })
})
