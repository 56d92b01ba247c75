/**
 * examples/many-processes as its users run it: the cluster of server.mjs on a real redis-server, and
 * burst.mjs firing at all of its workers at once; then main.mjs, which does all of it by itself
 * (starting its own redis-server). Together the workers admit exactly the limit, every time, and
 * nothing they started outlives them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isRunning, request, run, startServer, stopExamples, waitFor } from './examples-harness.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

interface Tally {
  admitted: number
  denied: number
  failed: number
}
interface BurstResult {
  apiKey: string
  requests: number
  limit: number
  workers: Record<string, Tally>
  total: Tally
  exact: boolean
}

let redis: RedisServer

beforeAll(async () => {
  redis = await startRedis()
})

afterAll(async () => {
  await stopExamples()
  await stopAll()
})

/** Runs burst.mjs against `url` and returns its JSON result. */
async function burst(url: string, requests: number): Promise<BurstResult> {
  const script = run('examples/many-processes/burst.mjs', [url, String(requests), '--json'])
  const code = await script.exited
  const result = JSON.parse(script.output()) as BurstResult
  expect(code).toBe(result.exact ? 0 : 1)
  return result
}

describe('examples/many-processes', () => {
  it('4 worker processes admit exactly the limit between them, burst after burst', async () => {
    const server = await startServer('examples/many-processes/server.mjs', {
      REDIS_URL: `redis://${redis.host}:${redis.port}`,
      WORKERS: '4',
      LIMIT: '50',
    })
    const pids = (await waitFor(server, /pids ([\d ]+)\)/))[1]!.split(' ').map(Number)
    expect(pids).toHaveLength(4)

    for (let round = 0; round < 2; round++) {
      const result = await burst(server.url, 200)
      expect(result.limit).toBe(50)
      expect(result.total).toEqual({ admitted: 50, denied: 150, failed: 0 })
      expect(result.exact).toBe(true)
      // Every worker took part, and the per-worker rows add up to the total.
      expect(Object.keys(result.workers).sort()).toEqual(['1', '2', '3', '4'])
      const sum = Object.values(result.workers).reduce((n, w) => n + w.admitted, 0)
      expect(sum).toBe(50)
      // One sorted-set member per admitted request, in the key every worker writes.
      const key = `sluice:many-processes:{${result.apiKey}}:slidingLog:60000`
      expect(Number(await redis.cli('ZCARD', key))).toBe(50)

      // After the burst, any worker denies that key with the minute's Retry-After.
      const after = await request(server.url, { headers: { 'x-api-key': result.apiKey } })
      expect(after.status).toBe(429)
      expect(after.headers.get('ratelimit')).toMatch(/^"50-per-60s";r=0;t=(59|60)$/)
      expect(['59', '60']).toContain(after.headers.get('retry-after'))
    }

    // Without an x-api-key there is nothing to count against: 400, not a shared "undefined" key.
    expect((await request(server.url)).status).toBe(400)

    expect(await server.stop()).toBe(0)
    for (const pid of pids) expect(isRunning(pid)).toBe(false)
  })

  it('main.mjs starts its own redis-server and the workers, shows the burst, and stops them all', async () => {
    const main = run('examples/many-processes/main.mjs', [], {
      REDIS_URL: undefined,
      REQUESTS: '120',
      LIMIT: '30',
    })
    expect(await main.exited).toBe(0)
    const output = main.output()
    expect(output).toMatch(/^total +30 +90$/m)
    expect(output).toContain('4 processes admitted exactly the limit, 30, between them.')
    const redisPid = Number(/started redis-server \(pid (\d+)\)/.exec(output)?.[1])
    const workerPids = /pids ([\d ]+)\)/.exec(output)![1]!.split(' ').map(Number)
    expect(workerPids).toHaveLength(4)
    for (const pid of [redisPid, ...workerPids]) expect(isRunning(pid)).toBe(false)
  })
})
