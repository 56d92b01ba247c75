/**
 * Many processes, one Redis: counts stay exact when 4 processes keep 256 calls each in flight on one key,
 * and 3 processes share one leaky-bucket queue. The workers run the built packages (`pnpm build` first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind } from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { startWorker, stopWorkers } from '../../../test/harness/workers.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  stopWorkers()
  await stopAll()
})

type Result = [sentAt: number, allowed: 0 | 1, waitMs: number, retryAfterMs: number, answeredAt: number]

let run = 0

/** Runs `processes` workers with the same setup, started together; resolves with every result. */
async function together(
  processes: number,
  client: ClientKind,
  setup: { rules: [string, object][]; calls: number; inFlight: number },
): Promise<Result[][]> {
  const prefix = `procs${run++}`
  const workers = Array.from({ length: processes }, () => startWorker('redis-caller.mjs'))
  await Promise.all(
    workers.map((w) =>
      w.ask({ setup: { ...setup, client, host: server.host, port: server.port, prefix, key: 'shared' } }),
    ),
  )
  const replies = await Promise.all(workers.map((w) => w.ask<{ results: Result[] }>({ go: true })))
  return replies.map((r) => r.results)
}

/** Waits, if needed, until the current aligned window of `windowMs` has more than `marginMs` left. */
async function awayFromWindowEdge(windowMs: number, marginMs: number): Promise<void> {
  const [seconds, micros] = (await server.cli('TIME')).trim().split('\n').map(Number)
  const now = seconds! * 1000 + Math.floor(micros! / 1000)
  const left = windowMs - (now % windowMs)
  if (left < marginMs) await sleep(left + 5)
}

describe.each(CLIENT_KINDS)('exact across 4 processes x 256 in flight (%s)', (client) => {
  const LIMIT = 300
  const CALLS = 512

  it('slidingLog admits exactly its limit', async () => {
    const results = await together(4, client, {
      rules: [['slidingLog', { limit: LIMIT, windowMs: 600_000 }]],
      calls: CALLS,
      inFlight: 256,
    })
    const admitted = results.flat().filter((r) => r[1] === 1).length
    expect(results.flat()).toHaveLength(4 * CALLS)
    expect(admitted).toBe(LIMIT)
    const members = Number(await server.cli('ZCARD', `sluice:procs${run - 1}:{shared}:slidingLog:600000`))
    expect(members).toBe(LIMIT)
  })

  it('tokenBucket admits exactly its capacity', async () => {
    const results = await together(4, client, {
      rules: [['tokenBucket', { capacity: LIMIT, refillPerSecond: 0.0001 }]],
      calls: CALLS,
      inFlight: 256,
    })
    expect(results.flat().filter((r) => r[1] === 1).length).toBe(LIMIT)
  })

  it('fixedWindow admits exactly its limit within one window', async () => {
    const windowMs = 3_600_000
    await awayFromWindowEdge(windowMs, 15_000)
    const results = await together(4, client, {
      rules: [['fixedWindow', { limit: LIMIT, windowMs }]],
      calls: CALLS,
      inFlight: 256,
    })
    expect(results.flat().filter((r) => r[1] === 1).length).toBe(LIMIT)
  })
})

describe('leaky bucket queue shared by 3 processes', () => {
  it('passes calls one interval apart and never asks a call to wait past maxQueueMs', async () => {
    // A slow leak (one pass per 500 ms) so the spread of the 120 sends across three processes, which a
    // loaded machine can stretch to tens of milliseconds, never lets the queue drain a slot mid-test.
    const ratePerSecond = 2
    const maxQueueMs = 25_000
    const intervalMs = 1000 / ratePerSecond
    const results = (
      await together(3, 'ioredis', {
        rules: [['leakyBucket', { ratePerSecond, maxQueueMs }]],
        calls: 40,
        inFlight: 8,
      })
    ).flat()
    const sentAt = results.map((r) => r[0])
    expect(Math.max(...sentAt) - Math.min(...sentAt)).toBeLessThan(intervalMs)
    const admitted = results.filter((r) => r[1] === 1)
    // The queue holds maxQueueMs of calls behind the one passing now: 51 of the 120.
    expect(admitted).toHaveLength(Math.floor((maxQueueMs * ratePerSecond) / 1000) + 1)
    for (const [, , waitMs] of admitted) {
      expect(waitMs).toBeGreaterThanOrEqual(0)
      expect(waitMs).toBeLessThanOrEqual(maxQueueMs)
    }
    // Pass times (the time Redis ran the script plus the wait) merged across processes are one interval
    // apart. Redis ran each script between the worker's send and its answer, so each estimate from the
    // send time is early by at most that call's round trip: the spacing holds within the two round trips.
    const passes = admitted
      .map(([sentAt, , waitMs, , answeredAt]) => ({ at: sentAt + waitMs, slack: answeredAt - sentAt }))
      .sort((a, b) => a.at - b.at)
    for (let i = 1; i < passes.length; i++) {
      const [before, after] = [passes[i - 1]!, passes[i]!]
      expect(Math.abs(after.at - before.at - intervalMs)).toBeLessThanOrEqual(before.slack + after.slack + 1)
    }
    const denied = results.filter((r) => r[1] === 0)
    for (const [, , , retryAfterMs] of denied) expect(retryAfterMs).toBeGreaterThan(0)
  })
})
