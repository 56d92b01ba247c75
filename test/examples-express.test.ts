/**
 * examples/express as its users run it (`node examples/express/server.mjs`, the root `pnpm start`):
 * a real server process on a free port, real HTTP requests, and the exact limits it promises.
 * Each test starts a server of its own, so every count starts from zero.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { many, request, run, startServer, statuses, stopExamples } from './examples-harness.ts'

const SERVER = 'examples/express/server.mjs'

afterAll(stopExamples)

const pay = (bizType: string, channel?: string): RequestInit => ({
  method: 'POST',
  headers: { 'x-biz-type': bizType, ...(channel === undefined ? {} : { 'x-channel': channel }) },
})

describe('examples/express', () => {
  it('limits POST /pay per bizType + channel from its table; -1 and missing pairs are not limited', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    const url = `${server.url}/pay`

    // 3 a second on PAYMENT/ALIPAY: ten at once, three go through.
    const alipay = await many(10, url, pay('PAYMENT', 'ALIPAY'))
    expect(statuses(alipay)).toEqual({ 200: 3, 429: 7 })
    // Both limits that counted a payment are listed, the app-wide one first.
    const routeItem = (header: string | null) => header?.replace(/^"100-per-60s";r=\d+;t=\d+, /, '')
    const admitted = alipay.filter((r) => r.status === 200)
    expect(admitted.map((r) => routeItem(r.headers.get('ratelimit'))).sort()).toEqual([
      '"3-per-1s";r=0;t=1',
      '"3-per-1s";r=1;t=1',
      '"3-per-1s";r=2;t=1',
    ])
    for (const r of admitted) {
      expect(r.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60, "3-per-1s";q=3;w=1')
      expect(r.body).toEqual({ paid: true, limitedBy: '3-per-1s' })
    }
    for (const r of alipay.filter((r) => r.status === 429)) {
      expect(r.headers.get('retry-after')).toBe('1')
      expect(r.headers.get('ratelimit')).toMatch(/^"100-per-60s";r=9\d;t=\d+, "3-per-1s";r=0;t=1$/)
      expect(r.headers.get('content-type')).toBe('application/problem+json')
      expect(r.body).toEqual({
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        detail: 'Rate limit 3-per-1s exceeded; retry in 1 s.',
        retryAfter: 1,
      })
    }

    // 2 a second on PAYMENT/WECHAT, counted apart from ALIPAY.
    expect(statuses(await many(10, url, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 8 })

    // REFUND/ALIPAY is -1 and QUERY/ALIPAY is not in the table: never limited by the route, so only
    // the app-wide limit's headers are on the response.
    for (const bizType of ['REFUND', 'QUERY']) {
      const free = await many(10, url, pay(bizType, 'ALIPAY'))
      expect(statuses(free)).toEqual({ 200: 10 })
      for (const r of free) {
        expect(r.body).toEqual({ paid: true, limitedBy: null })
        expect(r.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60')
      }
    }

    // No x-channel: 400, never counted under a key like "PAYMENT:undefined".
    const missing = await request(url, pay('PAYMENT'))
    expect(missing.status).toBe(400)
    expect(missing.headers.get('content-type')).toBe('application/problem+json')
    expect(missing.body.detail).toBe('This request needs the x-channel header.')
  })

  it('limits every request to 100 a minute per client IP (app.use)', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    // Any path counts, even one with no route: the limit runs before routing.
    const first = await many(100, `${server.url}/anything`)
    expect(statuses(first)).toEqual({ 404: 100 })
    const remaining = first.map((r) => Number(/;r=(\d+);/.exec(r.headers.get('ratelimit') ?? '')?.[1]))
    expect(remaining.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i))

    const denied = await request(`${server.url}/anything`)
    expect(denied.status).toBe(429)
    expect(denied.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60')
    expect(denied.headers.get('ratelimit')).toMatch(/^"100-per-60s";r=0;t=\d+$/)
    // 10 buckets of 6 s: the 100 calls sit in the current bucket, which leaves the window 54 to 60 s on.
    const retryAfter = Number(denied.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(54)
    expect(retryAfter).toBeLessThanOrEqual(60)
  })

  it('queues GET /report at 2 a second, and refuses a request that would wait past 2 s', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    const replies = await many(6, `${server.url}/report`)
    expect(statuses(replies)).toEqual({ 200: 5, 429: 1 })
    // Slots 500 ms apart from the first arrival: waits of 0, 500, 1000, 1500 and 2000 ms, less the time a
    // request arrived after the first. The test holds while the six arrive within 450 ms (the 6th is refused
    // only if it arrives less than 500 ms after the first), so that is the margin, not a load-bound 150 ms.
    const served = replies
      .filter((r) => r.status === 200)
      .sort((a, b) => (a.body.waitedMs as number) - (b.body.waitedMs as number))
    served.forEach((r, i) => {
      const waitedMs = r.body.waitedMs as number
      expect(waitedMs).toBeLessThanOrEqual(i * 500)
      expect(waitedMs).toBeGreaterThan(i * 500 - 450)
      expect(r.tookMs).toBeGreaterThanOrEqual(waitedMs - 1)
    })
    const refused = replies.find((r) => r.status === 429)!
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.body.detail).toBe('Rate limit 2-per-s-queue-2000ms exceeded; retry in 1 s.')
  })

  it('serves GET /metrics: the decisions it made, for Prometheus, never limited itself', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    expect(statuses(await many(4, `${server.url}/pay`, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 2 })
    const text = (await (await fetch(`${server.url}/metrics`)).text()).split('\n')
    const line = (prefix: string) => text.find((l) => l.startsWith(prefix))
    // Two limits counted each payment: the app-wide one 4 times, the route's 2 admitted and 2 denied.
    expect(
      line('sluice_decisions_total{limiter="per-ip",rule="100-per-60s",result="allowed",reason="rules"}'),
    ).toMatch(/ 4$/)
    // Per request and limit, by route template where the route is known (never the raw URL).
    expect(text.filter((l) => l.startsWith('sluice_http_requests_total'))).toEqual([
      'sluice_http_requests_total{limiter="per-ip",action="allow",route=""} 4',
      'sluice_http_requests_total{limiter="pay",action="allow",route="POST /pay"} 2',
      'sluice_http_requests_total{limiter="pay",action="deny",route="POST /pay"} 2',
    ])
    const denied = text.filter((l) => l.startsWith('sluice_decisions_total') && l.includes('result="denied"'))
    expect(denied).toEqual([
      'sluice_decisions_total{limiter="pay",rule="2-per-1s",result="denied",reason="rules"} 2',
    ])
  })

  it('says so and exits 1 when its port is taken (it crashed reading a null address)', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    const second = run(SERVER, [], { PORT: new URL(server.url).port, ADMIN_PORT: '0' })
    expect(await second.exited).toBe(1)
    expect(second.output()).toMatch(/^Cannot listen on port \d+: EADDRINUSE\. Set PORT to a free port\.\n$/)
  })

  it('serves the live dashboard at /sluice/ on a loopback admin listener only, outside the limits, with its table editable', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    const adminPort =
      /dashboard \(this machine only, on its own listener\): http:\/\/localhost:(\d+)\/sluice\//.exec(
        server.output(),
      )![1]!
    // The public port, which a reverse proxy forwards to, serves no dashboard at all.
    expect((await fetch(`${server.url}/sluice/`)).status).toBe(404)
    const admin = { url: `http://127.0.0.1:${adminPort}` }
    const bare = await fetch(`${admin.url}/sluice`, { redirect: 'manual' })
    expect(bare.status).toBe(308)
    expect(bare.headers.get('location')).toBe('./sluice/')
    const page = await fetch(`${admin.url}/sluice/`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
    expect(page.headers.get('ratelimit')).toBeNull()
    const csrf = /<meta name="sluice-csrf" content="([^"]+)">/.exec(await page.text())![1]!

    // Two WECHAT payments pass, the third is denied; the dashboard counts them and names the key.
    expect(statuses(await many(3, `${server.url}/pay`, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 1 })
    const stats = (await request(`${admin.url}/sluice/api/stats`)).body as {
      limiters: { limiter: string; series: { allowed: number; denied: number }[]; topDenied: unknown[] }[]
    }
    const payStats = stats.limiters.find((l) => l.limiter === 'pay')!
    expect(payStats.series.reduce((n, p) => n + p.allowed, 0)).toBe(2)
    expect(payStats.series.reduce((n, p) => n + p.denied, 0)).toBe(1)
    expect(payStats.topDenied).toEqual([{ key: 'PAYMENT:WECHAT', count: 1 }])

    // Raising WECHAT to 5 a second on the dashboard takes effect at the next payment.
    const put = await request(`${admin.url}/sluice/api/tables/channels/entries/PAYMENT%3AWECHAT`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-sluice-csrf': csrf },
      body: JSON.stringify(['slidingLog:5/1s']),
    })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({ version: 1, rules: [{ kind: 'slidingLog', limit: 5, windowMs: 1000 }] })
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(statuses(await many(6, `${server.url}/pay`, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 5, 429: 1 })
  })

  it('stops on SIGTERM', async () => {
    const server = await startServer(SERVER, { ADMIN_PORT: '0' })
    expect((await request(`${server.url}/report`)).status).toBe(200)
    // Express installs no signal handler, so the process ends by the signal itself.
    expect(await server.stop()).toBe(null)
  })
})
