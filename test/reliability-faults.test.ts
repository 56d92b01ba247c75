/**
 * Reliability under Redis faults, end to end: an Express or Fastify server in a child process of its own
 * (built packages, README client settings) under a bounded stream of real HTTP requests, while its Redis
 * is killed and restarted, paused (CLIENT PAUSE) or put to sleep (DEBUG SLEEP).
 *
 * What is asserted, per run: every request is answered, within the store's timeout plus a margin, as
 * measured by the server from arrival to the last byte; the server neither crashes nor reports an
 * unhandled rejection or uncaught exception; while Redis is away each answer is exactly what the
 * `onStoreError` policy says (the insurance limiter's own decisions, counted exactly, when it is one);
 * Redis decides again within 1 s of its return, exactly; and a slow Redis never gets more commands than
 * the store's `maxInFlight`, checked on Redis itself (INFO commandstats, INFO clients).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type Answer, agent, closeAgents, get, startLoad } from './harness/http-load.ts'
import { type RedisServer, sleep, startRedis, stopAll } from './harness/redis.ts'
import { startWorker, stopWorkers, type Worker } from './harness/workers.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis(['--enable-debug-command', 'yes'])
})

afterEach(() => {
  closeAgents()
  stopWorkers()
})

afterAll(async () => {
  closeAgents()
  stopWorkers()
  await stopAll()
})

/** The store's per-call timeout in these servers. */
const TIMEOUT_MS = 100
/** Slack for timers and two busy event loops on a loaded 2-core machine; the store's own bound is TIMEOUT_MS. */
const MARGIN_MS = 150
/** A request the client waited longer for than this was stuck, whoever's event loop was busy. */
const CLIENT_BOUND_MS = 1000
/** Calls on an `exact-` key the server admits (its `redis-exact` rule); the insurance limiter's limit. */
const EXACT_LIMIT = 5
const INSURANCE_LIMIT = 5

type Adapter = 'express' | 'fastify'
type ClientKind = 'ioredis' | 'node-redis'
type Mode = 'allow' | 'deny' | 'throw' | 'insurance'

interface Report {
  durations: number[]
  unhandled: string[]
  uncaught: string[]
  store: { ok: number; timeout: number; refused: number; error: number }
}

let run = 0

/** A limited HTTP server in a child process; resolves with it and its URL once it listens. */
async function limitedServer(
  adapter: Adapter,
  client: ClientKind,
  extra: Record<string, unknown>,
): Promise<{ worker: Worker; url: string }> {
  const worker = startWorker('http-limited.mjs')
  const { url } = await worker.ask<{ url: string }>({
    setup: {
      adapter,
      client,
      host: server.host,
      port: server.port,
      timeoutMs: TIMEOUT_MS,
      prefix: `rel${run++}`,
      exactLimit: EXACT_LIMIT,
      insuranceLimit: INSURANCE_LIMIT,
      ...extra,
    },
  })
  return { worker, url }
}

/** Asks until Redis decides a request (rule `redis`); resolves with when that answer arrived. */
async function redisDecides(url: string, label: string, withinMs: number): Promise<number> {
  const via = agent(1)
  const until = performance.now() + withinMs
  for (let n = 0; ; n++) {
    const answer = await get(url, '/r', `${label}-${n}`, via)
    if (answer.body?.rule === 'redis') return performance.now()
    if (performance.now() > until) throw new Error(`Redis did not decide a request within ${withinMs} ms`)
    await sleep(10)
  }
}

/** `EXACT_LIMIT + 3` requests at once on a fresh `exact-` key: exactly EXACT_LIMIT admitted, all by Redis. */
async function expectExact(url: string, key: string): Promise<void> {
  const via = agent(EXACT_LIMIT + 3)
  const answers = await Promise.all(Array.from({ length: EXACT_LIMIT + 3 }, () => get(url, '/r', key, via)))
  expect(answers.map((a) => a.body?.rule)).toEqual(Array(EXACT_LIMIT + 3).fill('redis-exact'))
  expect(answers.filter((a) => a.status === 200)).toHaveLength(EXACT_LIMIT)
  expect(answers.filter((a) => a.status === 429)).toHaveLength(3)
  const remaining = answers.filter((a) => a.status === 200).map((a) => a.body?.remaining)
  expect(remaining.sort()).toEqual(Array.from({ length: EXACT_LIMIT }, (_, i) => i))
}

/** The server is alive, and reported nothing unhandled; every request took at most TIMEOUT_MS + MARGIN_MS. */
async function expectHealthy(worker: Worker, answered: number): Promise<Report> {
  expect(worker.exit).toBeUndefined()
  const report = await worker.ask<Report>({ report: true })
  expect(report.unhandled).toEqual([])
  expect(report.uncaught).toEqual([])
  expect(report.durations.length).toBeGreaterThanOrEqual(answered)
  expect(Math.max(...report.durations)).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS)
  return report
}

/** Checks what the insurance limiter served: per key, exactly its first INSURANCE_LIMIT calls admitted. */
function expectInsuranceExact(fallbacks: Answer[]): void {
  const byKey = new Map<string, Answer[]>()
  for (const a of fallbacks) byKey.set(a.key, [...(byKey.get(a.key) ?? []), a])
  for (const [key, answers] of byKey) {
    const admitted = answers.filter((a) => a.status === 200)
    const denied = answers.filter((a) => a.status === 429)
    expect(admitted.length + denied.length, key).toBe(answers.length)
    expect(admitted.length, key).toBe(Math.min(INSURANCE_LIMIT, answers.length))
    // Each admitted call took one unit: remaining counts down INSURANCE_LIMIT - 1 … 0, each value once.
    expect(admitted.map((a) => a.body?.remaining).sort(), key).toEqual(
      Array.from({ length: admitted.length }, (_, i) => INSURANCE_LIMIT - admitted.length + i),
    )
    for (const a of denied) expect(a.body?.remaining, key).toBe(0)
  }
}

/**
 * Both adapters on ioredis under every policy, and on node-redis under two. node-redis before 5.12 could
 * come back from a killed Redis ready on a dead socket for good (a reconnect reaching the dying process);
 * the suite runs node-redis 5.12.1, which reconnects properly.
 */
const cases: [Adapter, ClientKind, Mode][] = [
  ['express', 'ioredis', 'allow'],
  ['express', 'ioredis', 'deny'],
  ['express', 'ioredis', 'throw'],
  ['express', 'ioredis', 'insurance'],
  ['fastify', 'ioredis', 'allow'],
  ['fastify', 'ioredis', 'deny'],
  ['fastify', 'ioredis', 'throw'],
  ['fastify', 'ioredis', 'insurance'],
  ['express', 'node-redis', 'deny'],
  ['fastify', 'node-redis', 'insurance'],
]

describe('Redis killed under HTTP load, and restarted', () => {
  it.each(cases)(
    '%s + %s, onStoreError %s: every request answered within the timeout, as the policy says while Redis is away; exact again within 1 s of its return',
    async (adapter, client, mode) => {
      const { worker, url } = await limitedServer(adapter, client, { onStoreError: mode })
      await redisDecides(url, 'warm', 5000)
      await worker.ask({ report: true })

      // 8 lanes over 16 keys; bounded in count and time whatever happens to Redis.
      const load = startLoad(url, '/r', {
        lanes: 8,
        maxRequests: 20_000,
        maxMs: 15_000,
        keyOf: (n) => `u${n % 16}`,
      })
      await sleep(150)
      await server.kill()
      await sleep(400)
      await server.start()
      const back = performance.now()
      const recovered = await redisDecides(url, 'probe', 5000)
      await sleep(100)
      load.stop()
      const answers = await load.answers

      expect(recovered - back).toBeLessThanOrEqual(1000)
      await expectExact(url, `exact-${mode}`)

      // Answered, every one: none lost, none stuck (the client's own clock also sees its event loop).
      expect(answers.filter((a) => a.status === 0)).toEqual([])
      expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(CLIENT_BOUND_MS)
      const byRedis = answers.filter((a) => a.body?.rule === 'redis')
      const fallbacks = answers.filter((a) => a.body?.rule !== 'redis')
      for (const a of byRedis) expect(a.status).toBe(200)
      expect(byRedis.length).toBeGreaterThan(0)
      expect(fallbacks.length).toBeGreaterThan(0)
      if (mode === 'allow') {
        for (const a of fallbacks) expect([a.status, a.body?.reason]).toEqual([200, 'store-error'])
      } else if (mode === 'deny') {
        for (const a of fallbacks) {
          expect([a.status, a.body?.reason]).toEqual([429, 'store-error'])
          expect(a.headers['retry-after']).toBe('1')
        }
      } else if (mode === 'throw') {
        for (const a of fallbacks) {
          expect(a.status).toBe(500)
          expect(['ERR_SLUICE_STORE', 'ERR_SLUICE_STORE_TIMEOUT']).toContain(a.body?.code)
        }
      } else {
        for (const a of fallbacks) expect(a.body?.rule).toBe('insurance')
        expectInsuranceExact(fallbacks)
      }
      await expectHealthy(worker, answers.length)
    },
  )
})

/** `connected_clients` and `blocked_clients` from INFO clients. */
async function clients(): Promise<{ connected: number; blocked: number }> {
  const info = await server.cli('INFO', 'clients')
  const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(info)?.[1])
  return { connected: field('connected_clients'), blocked: field('blocked_clients') }
}

/** EVALSHA and EVAL calls Redis has run since the last CONFIG RESETSTAT. */
async function scriptCalls(): Promise<number> {
  const info = await server.cli('INFO', 'commandstats')
  let calls = 0
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(m[1])
  return calls
}

/** Resolves once Redis answers PING again (after a pause or a sleep). */
async function answering(): Promise<void> {
  const until = Date.now() + 10_000
  while (!(await server.cli('PING')).includes('PONG')) {
    if (Date.now() > until) throw new Error('Redis did not answer again')
    await sleep(20)
  }
}

const MAX_IN_FLIGHT = 16

const slow: [string, Adapter, ClientKind, () => Promise<unknown>][] = [
  ['CLIENT PAUSE', 'express', 'ioredis', () => server.cli('CLIENT', 'PAUSE', '900', 'ALL')],
  [
    'DEBUG SLEEP',
    'fastify',
    'node-redis',
    async () => {
      // DEBUG SLEEP blocks redis-cli too: it is left running, and Redis is asleep once it has arrived.
      server.cli('DEBUG', 'SLEEP', '0.9').catch(() => {})
      await sleep(30)
    },
  ],
]

describe('Redis slow to answer, under HTTP load', () => {
  it.each(slow)(
    '%s (%s + %s): every request answered within the timeout, and Redis gets no more than maxInFlight commands',
    async (_, adapter, client, stall) => {
      const { worker, url } = await limitedServer(adapter, client, {
        onStoreError: 'allow',
        maxInFlight: MAX_IN_FLIGHT,
      })
      await redisDecides(url, 'warm', 5000)
      const before = await clients()
      await worker.ask({ report: true })
      await server.cli('CONFIG', 'RESETSTAT')

      await stall()
      // 24 lanes, more than the cap, for most of the stall; distinct keys, so no cache can answer.
      const load = startLoad(url, '/r', { lanes: 24, maxRequests: 20_000, maxMs: 600, keyOf: (n) => `s${n}` })
      const answers = await load.answers
      await answering()
      await sleep(200)

      // While Redis stalled: the first MAX_IN_FLIGHT calls went to Redis and timed out; every later one was
      // refused at once. Redis ran exactly those MAX_IN_FLIGHT scripts once it woke, and nothing else.
      const report = await expectHealthy(worker, answers.length)
      expect(answers.filter((a) => a.status !== 200)).toEqual([])
      expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(CLIENT_BOUND_MS)
      expect(answers.length).toBeGreaterThan(MAX_IN_FLIGHT)
      for (const a of answers) expect(a.body?.reason).toBe('store-error')
      expect(report.store).toEqual({
        ok: 0,
        timeout: MAX_IN_FLIGHT,
        refused: answers.length - MAX_IN_FLIGHT,
        error: 0,
      })
      expect(await scriptCalls()).toBe(MAX_IN_FLIGHT)
      // No connection was opened to get round the stall, and nothing is left blocked.
      expect(await clients()).toEqual(before)

      // And Redis decides again, exactly.
      await redisDecides(url, 'after', 2000)
      await expectExact(url, `exact-slow-${client}`)
    },
  )
})
