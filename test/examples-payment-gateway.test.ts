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
import { sluice } from './harness/cli.ts'
import { type RedisServer, sleep, startRedis, stopAll } from './harness/redis.ts'

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

type Limits = { table: string; version: number; entries: Record<string, unknown> }

async function limitsOf(url: string): Promise<Limits> {
  return (await request(`${url}/limits`)).body as Limits
}

/** Ms until every gateway reports `check` true of its limits (polled every 10 ms); fails after `ms`. */
async function allWithin(
  urls: readonly string[],
  ms: number,
  check: (l: Limits) => boolean,
): Promise<number> {
  const started = performance.now()
  for (;;) {
    const all = await Promise.all(urls.map(limitsOf))
    if (all.every(check)) return performance.now() - started
    if (performance.now() - started > ms) throw new Error(`not within ${ms} ms: ${JSON.stringify(all)}`)
    await sleep(10)
  }
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
    // Still deciding on the last table they had.
    const urls = gateways.map((g) => g.url)
    const held = await limitsOf(urls[0]!)
    expect(held.entries['PAYMENT:ALIPAY']).toEqual([{ kind: 'slidingLog', limit: 7, windowMs: 60_000 }])
    expect(await limitsOf(urls[1]!)).toEqual(held)

    // Redis comes back empty (no persistence), and an operator changes CARD at once. Neither gateway rolls
    // back to the empty table; they write theirs back, the operator's edit merged in, and follow it.
    await redis.start()
    const env2 = ['--table', 'payment-gateway', '--redis', env.REDIS_URL]
    let set = await sluice('limits', 'set', 'PAYMENT:CARD', 'slidingLog:2/1m', ...env2)
    for (let i = 0; set.code === 2 && i < 20; i++) {
      await sleep(100)
      set = await sluice('limits', 'set', 'PAYMENT:CARD', 'slidingLog:2/1m', ...env2)
    }
    expect(set.code).toBe(0)
    await allWithin(urls, 6000, (l) => {
      const card = l.entries['PAYMENT:CARD'] as { limit: number }[] | undefined
      return l.version > held.version && card?.[0]?.limit === 2
    })
    for (const url of urls) {
      const now = await limitsOf(url)
      expect(now.entries['PAYMENT:ALIPAY']).toEqual([{ kind: 'slidingLog', limit: 7, windowMs: 60_000 }])
      expect(now.entries['REFUND:ALIPAY']).toBe(null)
    }
    const listed = JSON.parse((await sluice('limits', 'list', ...env2)).stdout)
    expect(listed.entries).toEqual((await limitsOf(urls[0]!)).entries)
  })

  it("follow an operator's `sluice limits set` within a second, keeping the counts exactly, and audit it", async () => {
    redis = await startRedis()
    writeFileSync(LIMITS, JSON.stringify({ 'PAYMENT:ALIPAY': { limit: 7, windowMs: 60_000 } }))
    const REDIS_URL = `redis://${redis.host}:${redis.port}`
    const env = { REDIS_URL, LIMITS, GATEWAY_PROCESSES: '2' }
    const gateways = [await startServer(SERVER, env), await startServer(SERVER, env)]
    const urls = gateways.map((g) => g.url)
    await allWithin(urls, 1000, (l) => l.version >= 1 && 'PAYMENT:ALIPAY' in l.entries)
    const spread = (n: number): Promise<Reply[]> =>
      Promise.all(
        Array.from({ length: n }, (_, i) => request(`${urls[i % 2]}/pay`, pay('PAYMENT', 'ALIPAY', `r${i}`))),
      )
    const cli = (...args: string[]) =>
      sluice('limits', ...args, '--table', 'payment-gateway', '--redis', REDIS_URL)

    expect(statuses(await spread(5))).toEqual({ 200: 5 })

    // Lowered to 6 while 5 are counted: one more passes, across both gateways, then 429.
    const lowered = await cli('set', 'PAYMENT:ALIPAY', 'slidingLog:6/1m', '--actor', 'ops:alice')
    expect(lowered.code).toBe(0)
    const { version } = JSON.parse(lowered.stdout)
    expect(await allWithin(urls, 1000, (l) => l.version === version)).toBeLessThan(1000)
    const after = await spread(4)
    expect(statuses(after)).toEqual({ 200: 1, 429: 3 })
    for (const r of after.filter((r) => r.status === 429)) {
      expect(r.body.detail).toMatch(/^Rate limit 6-per-60s exceeded; retry in \d+ s\.$/)
    }

    // Raised to 9: exactly three more, whichever gateway takes them.
    const raised = await cli('set', 'PAYMENT:ALIPAY', 'slidingLog:9/1m', '--actor', 'ops:bob')
    expect(await allWithin(urls, 1000, (l) => l.version === JSON.parse(raised.stdout).version)).toBeLessThan(
      1000,
    )
    expect(statuses(await spread(6))).toEqual({ 200: 3, 429: 3 })
    // One state in Redis across the edits (its identity holds no limit), and the channel saw exactly 9.
    expect(Number(await redis.cli('ZCARD', 'sluice:payment-gateway:{PAYMENT:ALIPAY}:slidingLog:60000'))).toBe(
      9,
    )
    const stats = await Promise.all(urls.map(channelStats))
    expect(stats.reduce((n, s) => n + (s['PAYMENT:ALIPAY']?.calls ?? 0), 0)).toBe(9)

    // Not limited at all, then deleted (no "*": not limited either).
    expect((await cli('set', 'PAYMENT:ALIPAY', '-1')).code).toBe(0)
    await allWithin(urls, 1000, (l) => l.entries['PAYMENT:ALIPAY'] === null)
    expect(statuses(await spread(4))).toEqual({ 200: 4 })

    const audit = JSON.parse((await cli('audit', '--count', '3')).stdout)
    expect(audit.changes.map((c: Record<string, unknown>) => [c.change, c.actor, c.before, c.after])).toEqual(
      [
        ['set', expect.any(String), [{ kind: 'slidingLog', limit: 9, windowMs: 60_000 }], null],
        [
          'set',
          'ops:bob',
          [{ kind: 'slidingLog', limit: 6, windowMs: 60_000 }],
          [{ kind: 'slidingLog', limit: 9, windowMs: 60_000 }],
        ],
        [
          'set',
          'ops:alice',
          [{ kind: 'slidingLog', limit: 7, windowMs: 60_000 }],
          [{ kind: 'slidingLog', limit: 6, windowMs: 60_000 }],
        ],
      ],
    )
  })
})
