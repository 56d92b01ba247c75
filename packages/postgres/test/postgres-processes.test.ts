/**
 * Many processes, one PostgreSQL: 4 processes call one key at once, each with 64 calls in flight, and
 * every rule kind admits exactly what it would admit one call after another (the memory store, at one
 * instant, says how many); two rules in one call too (their rows are locked in one order: no deadlock).
 * The workers run the built packages (`pnpm build` first).
 */
import {
  concurrency,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type PostgresServer, startPostgres, stopAll } from '../../../test/harness/postgres.ts'
import { startWorker, stopWorkers } from '../../../test/harness/workers.ts'

let server: PostgresServer

beforeAll(async () => {
  server = await startPostgres()
  const pool = new pg.Pool({ connectionString: server.url, max: 1 })
  await new PostgresStore({ client: pool, sweepIntervalMs: 0 }).migrate()
  await pool.end()
})

afterAll(async () => {
  stopWorkers()
  await stopAll()
})

type Result = [sentAt: number, allowed: 0 | 1, waitMs: number, retryAfterMs: number, answeredAt: number]
type Spec = [string, Record<string, number>]

let run = 0

const factories: Record<string, (o: never) => RuleInput> = {
  concurrency,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
}

/** Runs `processes` workers with the same setup, started together; resolves with every result. */
async function together(
  client: 'pg' | 'postgres.js',
  setup: { rules: Spec[]; calls: number; inFlight: number },
): Promise<Result[]> {
  const prefix = `procs${run++}`
  const workers = Array.from({ length: 4 }, () => startWorker('postgres-caller.mjs'))
  await Promise.all(
    workers.map((w) => w.ask({ setup: { ...setup, client, url: server.url, prefix, key: 'shared' } })),
  )
  const replies = await Promise.all(workers.map((w) => w.ask<{ results: Result[] }>({ go: true })))
  return replies.flatMap((r) => r.results)
}

/** How many of `calls` calls of cost 1 the rules admit one after another at one instant. */
function admittedAtOnce(rules: Spec[], calls: number): number {
  const store = new MemoryStore({ clock: () => 1_800_000_000_000, sweepIntervalMs: 0 })
  const built = rules.map(([kind, o]) => factories[kind]!(o as never) as Rule)
  let admitted = 0
  for (let i = 0; i < calls; i++) {
    const answer = store.apply('p', 'k', built, 1, 'consume')
    if (answer.every((d) => d.allowed)) admitted++
  }
  return admitted
}

/** Waits, if needed, until the database's current aligned window of `windowMs` has more than `marginMs` left. */
async function awayFromWindowEdge(windowMs: number, marginMs: number): Promise<void> {
  const [row] = await server.query<{ now: number }>(
    'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now',
  )
  const now = row!.now
  const left = windowMs - (now % windowMs)
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 5))
}

const CALLS = 300
const LIMIT = 200

/** Rules whose count does not move while the calls run (windows of an hour, no refill to speak of). */
const COUNTING: [string, Spec[]][] = [
  ['fixedWindow', [['fixedWindow', { limit: LIMIT, windowMs: 3_600_000 }]]],
  ['slidingLog', [['slidingLog', { limit: LIMIT, windowMs: 3_600_000 }]]],
  ['slidingWindow', [['slidingWindow', { limit: LIMIT, windowMs: 3_600_000, buckets: 10 }]]],
  ['tokenBucket', [['tokenBucket', { capacity: LIMIT, refillPerSecond: 0.0001 }]]],
  ['concurrency', [['concurrency', { limit: LIMIT, leaseMs: 3_600_000 }]]],
  [
    'fixedWindow and slidingLog in one call',
    [
      ['fixedWindow', { limit: LIMIT + 50, windowMs: 3_600_000 }],
      ['slidingLog', { limit: LIMIT, windowMs: 3_600_000 }],
    ],
  ],
]

/** Meters slow enough that the calls' spread (a loaded machine: a second or two) moves no slot. */
const METERS: [string, Spec[]][] = [
  ['leakyBucket', [['leakyBucket', { ratePerSecond: 0.2, maxQueueMs: 60_000 }]]],
  ['warmUp', [['warmUp', { ratePerSecond: 0.2, warmUpMs: 20_000, coldFactor: 3, maxQueueMs: 120_000 }]]],
]

describe.each(['pg', 'postgres.js'] as const)(
  'exact across 4 processes x 64 in flight on one key (%s)',
  (client) => {
    it.each(COUNTING)('%s admits exactly its limit', async (_, rules) => {
      await awayFromWindowEdge(3_600_000, 60_000)
      const results = await together(client, { rules, calls: CALLS, inFlight: 64 })
      expect(results).toHaveLength(4 * CALLS)
      expect(results.filter((r) => r[1] === 1).length).toBe(LIMIT)
    })

    it.each(METERS)('%s admits exactly what its queue holds', async (_, rules) => {
      const results = await together(client, { rules, calls: 20, inFlight: 4 })
      const expected = admittedAtOnce(rules, 80)
      expect(expected).toBeGreaterThan(5)
      expect(expected).toBeLessThan(80)
      expect(results.filter((r) => r[1] === 1).length).toBe(expected)
    })
  },
)
