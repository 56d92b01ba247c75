/**
 * Store conformance on PostgreSQL: the shared cases (store-conformance.ts) run MemoryStore and
 * PostgresStore through the same random traces (driven by one clock) and ask for identical per-rule
 * decisions, field by field, for every rule kind, blocks, refunds, penalties, queued slots and leases; with
 * a `pg` Pool and with postgres.js, on a server of the test's own.
 */
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { type PostgresServer, startPostgres, stopAll } from './harness/postgres.ts'
import {
  agreesAtEdges,
  agreesOnLongLogs,
  answersRandomTraces,
  givesQueuedSlotsBack,
  holdsWorkedExample,
} from './store-conformance.ts'

let server: PostgresServer
const ends: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  server = await startPostgres()
  const pool = new pg.Pool({ connectionString: server.url, max: 2 })
  ends.push(() => pool.end())
  await new PostgresStore({ client: pool, sweepIntervalMs: 0 }).migrate()
})

afterAll(async () => {
  for (const end of ends) await end()
  await stopAll()
})

/** A client of each library, on the test's server. */
function clientOf(kind: 'pg' | 'postgres.js'): pg.Pool | postgres.Sql {
  if (kind === 'pg') {
    const pool = new pg.Pool({ connectionString: server.url, max: 2 })
    ends.push(() => pool.end())
    return pool
  }
  const sql = postgres(server.url, { max: 2, onnotice: () => {} })
  ends.push(() => sql.end())
  return sql
}

/** The stores' sweeps are off: rows expire by the trace's ms alone, so the trace need not follow real time. */
const REPLAY = { followsRealTime: false }

describe.each(['pg', 'postgres.js'] as const)('PostgresStore conformance with MemoryStore (%s)', (kind) => {
  const storeOf = () => {
    const client = clientOf(kind)
    return (clock: () => number) => new PostgresStore({ client, clock, timeoutMs: 2000, sweepIntervalMs: 0 })
  }

  it('answers every random trace exactly as the memory store does', async () => {
    await answersRandomTraces(storeOf(), REPLAY)
  })

  it('answers every random trace of per-rule costs and settles exactly as the memory store does', async () => {
    await answersRandomTraces(storeOf(), REPLAY, { perRuleCosts: true })
  }, 120_000)

  it('gives queued slots back exactly as the memory store does (leaky buckets, abandoned waits)', async () => {
    await givesQueuedSlotsBack(storeOf(), REPLAY)
  })

  it('agrees with the memory store on long logs: many entries, large costs, expiries of many at once', async () => {
    await agreesOnLongLogs(storeOf(), REPLAY)
  })

  it('decides like the memory store at the edges of the figures the factories accept', async () => {
    await agreesAtEdges(storeOf())
  })

  it('holds the worked example (slidingLog, limit 2 per 1000 ms)', async () => {
    await holdsWorkedExample(storeOf())
  })
})
