/**
 * examples/koa and examples/node as their users run them (`node examples/<name>/server.mjs`): a real server
 * process on a free port, real HTTP requests, and the exact limits each promises. Both examples keep the
 * same limits, so one set of cases runs against each. Each test starts a server of its own.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { many, request, run, startServer, statuses, stopExamples } from './examples-harness.ts'

afterAll(stopExamples)

const pay = (bizType: string, channel?: string): RequestInit => ({
  method: 'POST',
  headers: { 'x-biz-type': bizType, ...(channel === undefined ? {} : { 'x-channel': channel }) },
})

describe.each(['koa', 'node'])('examples/%s', (name) => {
  const SERVER = `examples/${name}/server.mjs`

  it('limits POST /pay per bizType + channel from its table; -1 and missing pairs are not limited', async () => {
    const server = await startServer(SERVER)
    const url = `${server.url}/pay`
    const alipay = await many(10, url, pay('PAYMENT', 'ALIPAY'))
    expect(statuses(alipay)).toEqual({ 200: 3, 429: 7 })
    for (const r of alipay.filter((r) => r.status === 200)) {
      expect(r.body).toEqual({ paid: true, limitedBy: '3-per-1s' })
      expect(r.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60, "3-per-1s";q=3;w=1')
    }
    for (const r of alipay.filter((r) => r.status === 429)) {
      expect(r.headers.get('retry-after')).toBe('1')
      expect(r.headers.get('content-type')).toBe('application/problem+json')
      expect(r.body.detail).toBe('Rate limit 3-per-1s exceeded; retry in 1 s.')
    }
    expect(statuses(await many(10, url, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 8 })
    for (const bizType of ['REFUND', 'QUERY']) {
      const free = await many(10, url, pay(bizType, 'ALIPAY'))
      expect(statuses(free)).toEqual({ 200: 10 })
      for (const r of free) expect(r.body).toEqual({ paid: true, limitedBy: null })
    }
    const missing = await request(url, pay('PAYMENT'))
    expect(missing.status).toBe(400)
    expect(missing.body.detail).toBe('This request needs the x-channel header.')
  })

  it('counts GET /users/:id by its route template: five a minute whatever the ids', async () => {
    const server = await startServer(SERVER)
    const replies = []
    for (let id = 1; id <= 6; id++) replies.push(await request(`${server.url}/users/${id}`))
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429])
    expect(replies[0]!.body).toEqual({ id: '1', remaining: 4 })
    expect(replies[4]!.body).toEqual({ id: '5', remaining: 0 })
  })

  it('queues GET /report at 2 a second, and refuses the request that would wait past 2 s', async () => {
    const server = await startServer(SERVER)
    const replies = await many(6, `${server.url}/report`)
    expect(statuses(replies)).toEqual({ 200: 5, 429: 1 })
    const waits = replies
      .filter((r) => r.status === 200)
      .map((r) => r.body.waitedMs as number)
      .sort((a, b) => a - b)
    waits.forEach((waitedMs, i) => {
      expect(waitedMs).toBeLessThanOrEqual(i * 500)
      expect(waitedMs).toBeGreaterThan(i * 500 - 500)
    })
    const refused = replies.find((r) => r.status === 429)!
    expect(refused.body.detail).toBe('Rate limit 2-per-s-queue-2000ms exceeded; retry in 1 s.')
  })

  it('says so and exits 1 when its port is taken', async () => {
    const server = await startServer(SERVER)
    const second = run(SERVER, [], { PORT: new URL(server.url).port })
    expect(await second.exited).toBe(1)
    expect(second.output()).toMatch(/^Cannot listen on port \d+: EADDRINUSE\. Set PORT to a free port\.\n$/)
  })
})
