/**
 * examples/payment-gateway as its users run it (`node examples/payment-gateway/server.mjs`): real gateway
 * processes on free ports, real HTTP requests, and the outside channels (simulated in the process) sent
 * exactly what each channel's limit allows. In memory with the shipped limits.json; then two gateways
 * sharing one real redis-server, and falling back to their shares when it goes away.
 */
import { rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { many, type Reply, request, startServer, statuses, stopExamples } from './examples-harness.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

const SERVER = 'examples/payment-gateway/server.mjs'
const LIMITS = join(tmpdir(), `sluice-gateway-limits-${process.pid}.json`)

afterAll(async () => {
  await stopExamples()
  await stopAll()
  rmSync(LIMITS, { force: true })
})

const pay = (bizType: string, channel: string, requestId = 'r'): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ requestId, bizType, channel, amount: 100 }),
})

type Stats = Record<string, { calls: number; times: number[] }>

async function channelStats(url: string): Promise<Stats> {
  return (await request(`${url}/channels`)).body as Stats
}

describe('examples/payment-gateway, limits in memory (limits.json)', () => {
  it('sends each channel at most its limit per second, from the table', async () => {
    const gateway = await startServer(SERVER)
    const url = `${gateway.url}/pay`

    // PAYMENT via ALIPAY: 5 a second. Twelve at once: five reach the channel, seven get 429.
    const alipay = await many(12, url, pay('PAYMENT', 'ALIPAY'))
    expect(statuses(alipay)).toEqual({ 200: 5, 429: 7 })
    for (const r of alipay.filter((r) => r.status === 200)) {
      expect(r.body).toMatchObject({
        bizType: 'PAYMENT',
        channel: 'ALIPAY',
        status: 'SUCCESS',
        waitedMs: 0,
        limitedBy: '5-per-1s',
      })
      expect(r.headers.get('ratelimit-policy')).toBe('"5-per-1s";q=5;w=1')
    }
    for (const r of alipay.filter((r) => r.status === 429)) {
      expect(r.headers.get('retry-after')).toBe('1')
      expect(r.headers.get('ratelimit')).toBe('"5-per-1s";r=0;t=1')
      expect(r.headers.get('content-type')).toBe('application/problem+json')
      expect(r.body).toEqual({
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        detail: 'Rate limit 5-per-1s exceeded; retry in 1 s.',
        retryAfter: 1,
      })
    }

    // PAYMENT via WECHAT: 3 a second, counted apart from ALIPAY.
    expect(statuses(await many(12, url, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 3, 429: 9 })

    // REFUND via ALIPAY is -1, QUERY via WECHAT is not in the table: neither is limited.
    for (const [bizType, channel] of [
      ['REFUND', 'ALIPAY'],
      ['QUERY', 'WECHAT'],
    ] as const) {
      const free = await many(20, url, pay(bizType, channel))
      expect(statuses(free)).toEqual({ 200: 20 })
      for (const r of free) {
        expect(r.body.limitedBy).toBe(null)
        expect(r.headers.get('ratelimit')).toBe(null)
      }
    }

    const stats = await channelStats(gateway.url)
    expect(Object.fromEntries(Object.entries(stats).map(([key, s]) => [key, s.calls]))).toEqual({
      'PAYMENT:ALIPAY': 5,
      'PAYMENT:WECHAT': 3,
      'REFUND:ALIPAY': 20,
      'QUERY:WECHAT': 20,
    })
  })

  it('spaces the calls to a queued channel evenly, and refuses those that would wait past maxQueueMs', async () => {
    const gateway = await startServer(SERVER)
    // PAYMENT via UNIONPAY: a leaky bucket passing 5 a second, each call waiting at most 1000 ms.
    // Ten at once: the first passes now, five more queue 200 ms apart, four would wait too long.
    const replies = await many(10, `${gateway.url}/pay`, pay('PAYMENT', 'UNIONPAY'))
    expect(statuses(replies)).toEqual({ 200: 6, 429: 4 })
    const waits = replies
      .filter((r) => r.status === 200)
      .map((r) => r.body.waitedMs as number)
      .sort((a, b) => a - b)
    waits.forEach((waitedMs, i) => {
      expect(waitedMs).toBeLessThanOrEqual(i * 200)
      expect(waitedMs).toBeGreaterThan(i * 200 - 150)
    })
    for (const r of replies.filter((r) => r.status === 429)) {
      expect(r.body.detail).toBe('Rate limit 5-per-s-queue-1000ms exceeded; retry in 1 s.')
    }
    // The channel was called no faster than its rate: the i-th call at least i × 200 ms after the first.
    const times = (await channelStats(gateway.url))['PAYMENT:UNIONPAY']!.times
    expect(times).toHaveLength(6)
    times.forEach((t, i) => {
      expect(t - times[0]!).toBeGreaterThanOrEqual(i * 200 - 10)
    })
  })

  it('never calls the channel for a payment whose caller hung up while it waited its turn', async () => {
    const gateway = await startServer(SERVER)
    const url = `${gateway.url}/pay`
    expect((await request(url, pay('PAYMENT', 'UNIONPAY', 'first'))).status).toBe(200)
    // The next one must wait about 200 ms for its slot; its caller gives up after 50.
    const hangUp = new AbortController()
    setTimeout(() => hangUp.abort(), 50)
    await expect(
      request(url, { ...pay('PAYMENT', 'UNIONPAY', 'second'), signal: hangUp.signal }),
    ).rejects.toThrow()
    await new Promise((resolve) => setTimeout(resolve, 400))
    expect((await channelStats(gateway.url))['PAYMENT:UNIONPAY']!.calls).toBe(1)
  })

  it('answers 400 to a payment without a proper bizType and channel, counting nothing', async () => {
    const gateway = await startServer(SERVER)
    const url = `${gateway.url}/pay`
    for (const body of [
      '{"bizType":"PAYMENT"}',
      '{"bizType":"payment","channel":"ALIPAY"}',
      'not json',
      '',
    ]) {
      const r = await request(url, { method: 'POST', body })
      expect(r.status).toBe(400)
      expect(r.body.title).toBe('Bad Request')
    }
    // A key with a colon in it could pose as another pair; it is refused before it reaches the limiter.
    expect((await request(url, pay('PAYMENT:ALIPAY', 'X'))).status).toBe(400)
    expect(await channelStats(gateway.url)).toEqual({})
  })
})

describe('examples/payment-gateway, two gateways on one Redis (REDIS_URL)', () => {
  let redis: RedisServer

  it('share each channel limit exactly, and each fall back to its share while Redis is away', async () => {
    redis = await startRedis()
    // Minute-long windows, so the counts do not depend on how fast this machine is.
    writeFileSync(
      LIMITS,
      JSON.stringify({
        'PAYMENT:ALIPAY': { limit: 7, windowMs: 60_000 },
        'PAYMENT:CARD': { limit: 8, windowMs: 60_000 },
        'REFUND:ALIPAY': -1,
      }),
    )
    const env = { REDIS_URL: `redis://${redis.host}:${redis.port}`, LIMITS, GATEWAY_PROCESSES: '2' }
    const gateways = [await startServer(SERVER, env), await startServer(SERVER, env)]
    expect(gateways[0]!.output()).toContain(`limits in Redis at redis://${redis.host}:${redis.port}`)

    /** `n` payments at once, spread over both gateways in turn. */
    const spread = (n: number, bizType: string, channel: string): Promise<Reply[]> =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          request(`${gateways[i % 2]!.url}/pay`, pay(bizType, channel, `r${i}`)),
        ),
      )
    const calls = async (key: string) => {
      const both = await Promise.all(gateways.map((g) => channelStats(g.url)))
      return both.map((s) => s[key]?.calls ?? 0)
    }

    // Thirty at once, half to each gateway: seven reach ALIPAY in all.
    const burst = await spread(30, 'PAYMENT', 'ALIPAY')
    expect(statuses(burst)).toEqual({ 200: 7, 429: 23 })
    const [a, b] = await calls('PAYMENT:ALIPAY')
    expect(a! + b!).toBe(7)
    expect(Number(await redis.cli('ZCARD', 'sluice:payment-gateway:{PAYMENT:ALIPAY}:slidingLog:60000'))).toBe(
      7,
    )
    for (const r of burst.filter((r) => r.status === 429)) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(50)
      expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(60)
    }
    expect(statuses(await spread(10, 'REFUND', 'ALIPAY'))).toEqual({ 200: 10 })

    // Redis goes away. Each gateway falls back to its share of every limit, in its own memory: 8 / 2 = 4
    // for CARD (Redis would have let one gateway take all 8), so together the channel still sees 8 at most.
    await redis.kill()
    for (const gateway of gateways) {
      const fallback = await many(10, `${gateway.url}/pay`, pay('PAYMENT', 'CARD'))
      expect(statuses(fallback)).toEqual({ 200: 4, 429: 6 })
      for (const r of fallback.filter((r) => r.status === 200)) expect(r.body.limitedBy).toBe('4-per-60s')
    }
    expect(await calls('PAYMENT:CARD')).toEqual([4, 4])
  })
})
