/**
 * The PostgreSQL store on a server of the test's own: migrate (idempotent, and safe when two stores run it
 * at once), the coded error of a store used before it, bad options, and the table's rows: one per key and
 * rule, deleted by the sweep once expired.
 */
import { createLimiter, ErrorCode, fixedWindow, StoreError, slidingWindow } from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type PostgresServer, startPostgres, stopAll } from '../../../test/harness/postgres.ts'

let server: PostgresServer
let pool: pg.Pool
let sql: postgres.Sql

beforeAll(async () => {
  server = await startPostgres()
  pool = new pg.Pool({ connectionString: server.url, max: 4 })
  sql = postgres(server.url, { max: 4, onnotice: () => {} })
})

afterAll(async () => {
  await pool?.end()
  await sql?.end()
  await stopAll()
})

describe('PostgresStore', () => {
  it('fails every call before migrate with a coded error that says to run it, then works once it has run', async () => {
    const store = new PostgresStore({ client: pool, table: 'before_migrate', sweepIntervalMs: 0 })
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 2, windowMs: 60_000 })],
      store,
      onStoreError: 'throw',
    })
    const error = await limiter.consume('k').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(StoreError)
    expect(error).toMatchObject({ code: ErrorCode.STORE_ERROR })
    expect((error as Error).message).toContain('store.migrate()')
    await store.migrate()
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 1 })
    await store.close()
  })

  it('migrates idempotently, and two stores migrating at once both succeed (pg and postgres.js)', async () => {
    const a = new PostgresStore({ client: pool, table: 'twice', sweepIntervalMs: 0 })
    const b = new PostgresStore({ client: sql, table: 'twice', sweepIntervalMs: 0 })
    await Promise.all([a.migrate(), b.migrate(), a.migrate(), b.migrate()])
    const limiter = createLimiter({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store: a })
    await limiter.consume('k')
    await b.migrate()
    // Migrating again keeps the state.
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 })
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, remaining: 0 })
    await a.close()
    await b.close()
  })

  it('keeps a table in another schema when told so', async () => {
    await server.query('CREATE SCHEMA IF NOT EXISTS limits')
    const store = new PostgresStore({ client: sql, table: 'limits.state', sweepIntervalMs: 0 })
    await store.migrate()
    const limiter = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store })
    expect((await limiter.consume('k')).allowed).toBe(true)
    expect((await limiter.consume('k')).allowed).toBe(false)
    const rows = await server.query<{ n: string }>('SELECT count(*) AS n FROM limits.state')
    expect(rows[0]!.n).toBe('1')
    await store.close()
  })

  it('refuses bad options with coded errors naming them', () => {
    const bad = (options: object, option: string) =>
      expect(() => new PostgresStore(options as never)).toThrow(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option }),
      )
    bad({}, 'PostgresStore.client')
    bad({ client: {} }, 'PostgresStore.client')
    bad({ client: pool, table: 'Robert"); DROP TABLE students;--' }, 'PostgresStore.table')
    bad({ client: pool, timeoutMs: 0 }, 'PostgresStore.timeoutMs')
    bad({ client: pool, sweepIntervalMs: -1 }, 'PostgresStore.sweepIntervalMs')
    bad({ client: pool, tabel: 'x' }, 'PostgresStore.tabel')
  })

  it('keeps one row per key and rule, and the sweep deletes the expired ones in batches', async () => {
    // Rows written by a clock a minute behind the database's have expired by its clock; a minute ahead, not.
    let now = Date.now() - 60_000
    const store = new PostgresStore({
      client: pool,
      table: 'swept',
      clock: () => now,
      sweepIntervalMs: 0,
      sweepBatch: 7,
    })
    await store.migrate()
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 5, windowMs: 1000 }), slidingWindow({ limit: 5, windowMs: 1000 })],
      store,
    })
    for (let i = 0; i < 20; i++) await limiter.consume(`k${i}`)
    const count = async () =>
      Number((await server.query<{ n: string }>('SELECT count(*) AS n FROM swept'))[0]!.n)
    expect(await count()).toBe(40)
    now = Date.now() + 60_000
    for (let i = 0; i < 3; i++) await limiter.consume(`fresh${i}`)
    expect(await count()).toBe(46)
    expect(await store.sweep()).toBe(40)
    expect(await count()).toBe(6)
    await store.close()
  })
})
