/**
 * PostgreSQL away, back, and slow, on a server of the test's own: every call is answered by `onStoreError`
 * (its decision says `store-error`), the pool's clients all come back, the store recovers by itself when the
 * server returns, and a call stuck behind a lock another connection holds is ended by the server (it leaves
 * pg_stat_activity while the lock is still held) and counts nothing. With a `pg` Pool and with postgres.js.
 */
import {
  createLimiter,
  type Decision,
  fixedWindow,
  type Rule,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type PostgresServer, startPostgres, stopAll } from '../../../test/harness/postgres.ts'

let server: PostgresServer

beforeAll(async () => {
  server = await startPostgres()
  const pool = new pg.Pool({ connectionString: server.url, max: 1 })
  await new PostgresStore({ client: pool, sweepIntervalMs: 0 }).migrate()
  await pool.end()
})

afterAll(async () => {
  await stopAll()
})

/** Polls `check` every 20 ms until it holds; fails after 10 s (a bound on the test, not on the store). */
async function eventually(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`never: ${what}`)
}

/** The statements of sluice's store running now (its apply function or its one-statement fixedWindow). */
async function sluiceStatements(): Promise<number> {
  const rows = await server.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND (query LIKE '%sluice_state_apply%' OR query LIKE 'WITH t AS MATERIALIZED%')",
  )
  return rows[0]!.n
}

const CLIENTS = ['pg', 'postgres.js'] as const

describe.each(CLIENTS)('PostgreSQL faults (%s)', (kind) => {
  let pool: pg.Pool | undefined
  let client: pg.Pool | postgres.Sql
  let run = 0

  beforeAll(() => {
    if (kind === 'pg') {
      pool = new pg.Pool({ connectionString: server.url, max: 4, connectionTimeoutMillis: 1000 })
      pool.on('error', () => {})
      client = pool
    } else {
      client = postgres(server.url, { max: 4, onnotice: () => {}, connect_timeout: 1 })
    }
  })

  afterAll(async () => {
    if (kind === 'pg') await pool!.end()
    else await (client as postgres.Sql).end({ timeout: 1 })
  })

  /** Every client of the pool is back and idle, and nobody waits for one. */
  const poolIsWhole = () =>
    pool === undefined || (pool.waitingCount === 0 && pool.idleCount === pool.totalCount)

  let prefix = ''
  const limiterOf = (rules: Parameters<typeof createLimiter>[0]['rules']) => {
    prefix = `faults-${kind}-${run++}`
    return createLimiter({
      rules,
      store: new PostgresStore({ client, timeoutMs: 200, sweepIntervalMs: 0 }),
      prefix,
      onStoreError: 'allow',
    })
  }

  it('answers every call by onStoreError while PostgreSQL is stopped, and counts again once it is back', async () => {
    const limiter = limiterOf([fixedWindow({ limit: 100, windowMs: 3_600_000 })])
    const sliding = limiterOf([slidingWindow({ limit: 100, windowMs: 3_600_000 })])
    expect(await limiter.consume('k')).toMatchObject({ reason: 'rules', remaining: 99 })
    expect(await sliding.consume('k')).toMatchObject({ reason: 'rules', remaining: 99 })
    await server.stop()
    const down = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? limiter : sliding).consume('k')),
    )
    for (const d of down) expect(d).toMatchObject({ allowed: true, reason: 'store-error' })
    await eventually('the pool is whole while PostgreSQL is down', poolIsWhole)
    await server.start()
    let back: Decision | undefined
    await eventually('a call is decided by the rules again', async () => {
      back = await limiter.consume('k')
      return back.reason === 'rules'
    })
    // What was counted before the stop is still counted; the calls answered by onStoreError are not.
    expect(back).toMatchObject({ allowed: true, remaining: 98 })
    expect(await sliding.consume('k')).toMatchObject({ reason: 'rules', remaining: 98 })
    await eventually('the pool is whole once PostgreSQL is back', poolIsWhole)
  })

  it('ends a call stuck behind a row lock server-side, within its deadline, and counts nothing', async () => {
    // Each window alone is one statement; two rules go through the apply function.
    for (const rules of [
      [fixedWindow({ limit: 100, windowMs: 3_600_000 })],
      [slidingWindow({ limit: 100, windowMs: 3_600_000 })],
      [
        fixedWindow({ limit: 100, windowMs: 3_600_000 }),
        tokenBucket({ capacity: 100, refillPerSecond: 0.001 }),
      ],
    ]) {
      const limiter = limiterOf(rules)
      expect(await limiter.consume('held')).toMatchObject({ reason: 'rules', remaining: 99 })
      // Another connection holds the key's row.
      const holder = new pg.Client({ connectionString: server.url })
      await holder.connect()
      await holder.query('BEGIN')
      const locked = await holder.query('SELECT 1 FROM sluice_state WHERE k = $1 AND r = $2 FOR UPDATE', [
        `${prefix.length}:${prefix}:held`,
        (rules[0] as Rule).id,
      ])
      expect(locked.rowCount).toBe(1)
      const slow = await Promise.all(Array.from({ length: 12 }, () => limiter.consume('held')))
      for (const d of slow) expect(d).toMatchObject({ allowed: true, reason: 'store-error' })
      // The lock is still held: the server itself has ended the waiting statements (their lock_timeout).
      await eventually('no sluice statement is left running', async () => (await sluiceStatements()) === 0)
      await eventually('the pool is whole while the lock is held', poolIsWhole)
      await holder.query('ROLLBACK')
      await holder.end()
      // None of the 12 calls was counted.
      expect(await limiter.consume('held')).toMatchObject({ reason: 'rules', remaining: 98 })
    }
  })
})
