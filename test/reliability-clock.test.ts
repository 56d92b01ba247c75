/**
 * Clock skew: application servers' clocks do not matter, Redis's does. Three processes whose `Date.now` is
 * 5 s behind, right, and 5 s ahead (patched before sluice is loaded) share one limit on one Redis, and admit
 * exactly as many calls as three processes with true clocks: the exact limit of every rule. Windows are
 * aligned by Redis's TIME, so a fixed window that local clocks would split 5 s apart is one window here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, sleep, startRedis, stopAll } from './harness/redis.ts'
import { startWorker, stopWorkers, type Worker } from './harness/workers.ts'

let server: RedisServer
const SHIFTS = [-5000, 0, 5000]
let skewed: Worker[]
let plain: Worker[]

/** Starts a caller whose clock is `shift` ms off, on `client`; checks that its clock is indeed off. */
async function caller(shift: number, client: 'ioredis' | 'node-redis'): Promise<Worker> {
  const worker = startWorker('skewed-caller.mjs', { env: { SLUICE_TEST_CLOCK_SHIFT_MS: String(shift) } })
  const { now } = await worker.ask<{ now: number }>({
    setup: { client, host: server.host, port: server.port },
  })
  expect(Math.abs(now - Date.now() - shift)).toBeLessThan(1000)
  return worker
}

beforeAll(async () => {
  server = await startRedis()
  const kinds = ['ioredis', 'node-redis', 'ioredis'] as const
  skewed = await Promise.all(SHIFTS.map((shift, i) => caller(shift, kinds[i]!)))
  plain = await Promise.all(SHIFTS.map((_, i) => caller(0, kinds[i]!)))
})

afterAll(async () => {
  stopWorkers()
  await stopAll()
})

/** Redis's clock in ms. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = (await server.cli('TIME')).trim().split('\n').map(Number)
  return seconds! * 1000 + Math.floor(micros! / 1000)
}

/** Waits, if needed, until Redis's current aligned window of `windowMs` has at least `marginMs` left. */
async function awayFromWindowEdge(windowMs: number, marginMs: number): Promise<void> {
  const left = windowMs - ((await redisNow()) % windowMs)
  if (left < marginMs) await sleep(left + 5)
}

/** Each rule, and how many calls it admits in a run of well under a second. */
const RULES: [name: string, rule: [string, object], admits: number][] = [
  // Windows shorter than the skew, and a refill that 10 s would show: local clocks would admit more.
  ['slidingLog', ['slidingLog', { limit: 50, windowMs: 4000 }], 50],
  ['fixedWindow', ['fixedWindow', { limit: 50, windowMs: 10_000 }], 50],
  ['slidingWindow', ['slidingWindow', { limit: 50, windowMs: 10_000, buckets: 10 }], 50],
  ['tokenBucket', ['tokenBucket', { capacity: 50, refillPerSecond: 0.1 }], 50],
  // One unit per 2 s, queueing up to 8 s ahead: now, +2 s, +4 s, +6 s, +8 s.
  ['leakyBucket', ['leakyBucket', { ratePerSecond: 0.5, maxQueueMs: 8000 }], 5],
]

/** The three processes call one key at once, 40 calls each, 8 in flight; resolves with the total admitted. */
async function together(workers: Worker[], rule: [string, object], label: string): Promise<number> {
  await awayFromWindowEdge(10_000, 1500)
  const replies = await Promise.all(
    workers.map((w) =>
      w.ask<{ admitted: number }>({
        run: { rules: [rule], prefix: label, key: 'shared', calls: 40, inFlight: 8 },
      }),
    ),
  )
  return replies.reduce((sum, r) => sum + r.admitted, 0)
}

describe('clocks 5 s apart share one Redis limit exactly (server time wins)', () => {
  it.each(RULES)(
    '%s: processes at -5 s, 0 and +5 s admit exactly what processes with true clocks admit',
    async (name, rule, admits) => {
      const withTrueClocks = await together(plain, rule, `${name}-plain`)
      const withSkewedClocks = await together(skewed, rule, `${name}-skewed`)
      expect(withTrueClocks).toBe(admits)
      expect(withSkewedClocks).toBe(admits)
    },
  )
})
