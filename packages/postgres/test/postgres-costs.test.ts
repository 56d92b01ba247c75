/**
 * Per-rule costs and settle on PostgreSQL (docs/design/postgres.md): a call with one cost per rule is one
 * function call, all or none; a settle changes each rule by its own signed amount in one function call and
 * answers as a peek right after; `migrate()` on a database of the earlier version adds this version's function.
 * The memory store and this one agree on random traces of both in test/postgres-conformance.test.ts.
 */
import {
  createLimiter,
  type Decision,
  ErrorCode,
  fixedWindow,
  type Rule,
  type RuleDecision,
  type StoreAnswer,
  slidingWindow,
} from '@sluice/core'
import { refundMark } from '@sluice/core/store'
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

/** A whole hour: every window and bucket below starts at T. */
const T = 1_800_000_000_000
let run = 0

/** 10 requests and 100 tokens a minute, as an AI gateway limits a key. */
const RULES = [
  fixedWindow({ limit: 10, windowMs: 60_000, name: 'requests' }),
  slidingWindow({ limit: 100, windowMs: 60_000, name: 'tokens' }),
] as Rule[]

/** Per rule: allowed, remaining, resetMs, retryAfterMs. */
const brief = (answer: StoreAnswer | undefined) =>
  answer?.map((d: RuleDecision) => [d.allowed, d.remaining, d.resetMs, d.retryAfterMs])

describe.each(['pg', 'postgres.js'])('per-rule costs and settle on PostgreSQL (%s)', (client) => {
  async function rig() {
    const clock = { now: T }
    const table = `costs${run++}`
    const store = new PostgresStore({
      client: client === 'pg' ? pool : sql,
      table,
      sweepIntervalMs: 0,
      clock: () => clock.now,
      timeoutMs: 5000,
    })
    await store.migrate()
    return { store, clock, prefix: 'p', table }
  }

  it('decides a call of one cost per rule in one function call, all or none', async () => {
    const { store, prefix } = await rig()
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 60], 'consume'))).toEqual([
      [true, 9, 60_000, 0],
      [true, 40, 60_000, 0],
    ])
    // The tokens deny: nothing is counted, and the requests answer as of cost 0.
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 50], 'consume'))).toEqual([
      [true, 9, 60_000, 0],
      [false, 40, 60_000, 60_000],
    ])
    expect(brief(await store.apply(prefix, 'k', RULES, [2, 40], 'peek'))).toEqual([
      [true, 7, 60_000, 0],
      [true, 0, 60_000, 0],
    ])
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 40], 'consume'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 0, 60_000, 0],
    ])
    await store.close()
  })

  it('settles each rule by its signed amount in one function call, and answers as a peek of cost 1 right after', async () => {
    const { store, prefix } = await rig()
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    // 40 of the 60 tokens reserved go back; the request stays counted.
    expect(brief(await store.adjust(prefix, 'k', RULES, [0, -40], 'settle', undefined, marks))).toEqual([
      [true, 8, 60_000, 0],
      [true, 79, 60_000, 0],
    ])
    // More than reserved: counted whatever the rule says, past the limit if need be; the tokens now deny a
    // peek, so the requests answer as of cost 0.
    expect(brief(await store.adjust(prefix, 'k', RULES, [3, 90], 'settle', undefined, marks))).toEqual([
      [true, 6, 60_000, 0],
      [false, 0, 60_000, 60_000],
    ])
    expect(brief(await store.apply(prefix, 'k', RULES, 1, 'peek'))).toEqual([
      [true, 6, 60_000, 0],
      [false, 0, 60_000, 60_000],
    ])
    await store.close()
  })

  it('a settle gives back only under a mark, and only while the units still count', async () => {
    const { store, clock, prefix } = await rig()
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    expect(brief(await store.adjust(prefix, 'k', RULES, [-1, -60], 'settle'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 39, 60_000, 0],
    ])
    clock.now = T + 60_000
    expect(brief(await store.adjust(prefix, 'k', RULES, [-1, -60], 'settle', undefined, marks))).toEqual([
      [true, 9, 60_000, 0],
      [true, 99, 60_000, 0],
    ])
    await store.close()
  })

  it('refuses a settle whose amounts are not one per rule, and changes nothing', async () => {
    const { store, prefix, table } = await rig()
    await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    const rows = () => sql.unsafe(`SELECT * FROM "${table}" ORDER BY k, r`)
    const before = await rows()
    for (const amounts of [[-1], [1, 2, 3]]) {
      const error = await store.adjust(prefix, 'k', RULES, amounts, 'settle').catch((e: unknown) => e)
      expect(error).toMatchObject({ code: ErrorCode.INVALID_COST })
    }
    expect(await rows()).toEqual(before)
    await store.close()
  })

  it('a settle on a blocked key changes its rules and answers the block', async () => {
    const { store, prefix } = await rig()
    const block = { ms: 5000, factor: 1, maxMs: 5000, forgetMs: 5000, keep: 1 }
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume', block)
    const denied = await store.apply(prefix, 'k', RULES, [1, 50], 'consume', block)
    expect(denied.every((d) => d.allowed)).toBe(false)
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    const settled = await store.adjust(prefix, 'k', RULES, [0, -60], 'settle', block, marks)
    expect(settled?.reason).toBe('blocked')
    expect(brief(await store.apply(prefix, 'k', RULES, 1, 'peek'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 99, 60_000, 0],
    ])
    await store.close()
  })

  it("migrate on a database of the earlier version adds this version's apply function and keeps the earlier one for its processes", async () => {
    const { store, prefix, table } = await rig()
    // The earlier version's apply function took no per-rule costs (11 arguments): here, a stand-in.
    await sql.unsafe(`DROP FUNCTION "${table}_apply"`)
    await sql.unsafe(`CREATE FUNCTION "${table}_apply"(
      text, text[], int[], float8[], float8, int, float8, float8, float8[], text[], float8
    ) RETURNS float8[] LANGUAGE sql AS 'SELECT ARRAY[7]::float8[]'`)
    const before = await store.apply(prefix, 'k', RULES, [1, 60], 'consume').catch((e: unknown) => e)
    expect((before as Error).message).toContain('store.migrate()')
    await store.migrate()
    const functions = await sql.unsafe(
      `SELECT pronargs FROM pg_proc WHERE proname = '${table}_apply' ORDER BY pronargs`,
    )
    expect(functions.map((f) => f.pronargs)).toEqual([11, 12])
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 60], 'consume'))).toEqual([
      [true, 9, 60_000, 0],
      [true, 40, 60_000, 0],
    ])
    const earlier = await sql.unsafe(
      `SELECT "${table}_apply"('k', '{r}', '{1}', '{1,1}', 1, 1, NULL, NULL, NULL, NULL, NULL) AS r`,
    )
    expect(earlier[0]!.r).toEqual([7])
    await store.close()
  })
})

describe.each(['pg', 'postgres.js'])('a limiter settling on PostgreSQL (%s)', (client) => {
  async function rig() {
    const clock = { now: T }
    const table = `settle${run++}`
    const store = new PostgresStore({
      client: client === 'pg' ? pool : sql,
      table,
      sweepIntervalMs: 0,
      clock: () => clock.now,
      timeoutMs: 5000,
    })
    await store.migrate()
    const limiter = createLimiter({ rules: RULES, store })
    const left = async () => (await limiter.peek('k')).rules.map((d) => d.remaining)
    const rows = () => sql.unsafe(`SELECT * FROM "${table}" ORDER BY k, r`)
    return { store, limiter, left, rows }
  }

  it('reserves per rule, then settles to the true cost', async () => {
    const { store, limiter, left } = await rig()
    const ok = await limiter.consume('k', { cost: { tokens: 90 } })
    expect([ok.allowed, ok.rules.map((r) => r.remaining)]).toEqual([true, [9, 10]])
    expect((await limiter.consume('k', { cost: { tokens: 20 } })).allowed).toBe(false)
    const after = await limiter.settle('k', { decision: ok, cost: { tokens: 30 } })
    expect(after.rules.map((r) => r.remaining)).toEqual([8, 69])
    expect(await left()).toEqual([8, 69])
    await store.close()
  })

  it('bad input to settle never reaches PostgreSQL, and changes nothing', async () => {
    const { store, limiter, left, rows } = await rig()
    const ok = await limiter.consume('k', { cost: { tokens: 90 } })
    const denied = await limiter.consume('k', { cost: { tokens: 20 } })
    expect(denied.allowed).toBe(false)
    const settled = await limiter.consume('k', { cost: { tokens: 5 } })
    await limiter.settle('k', { decision: settled, cost: { tokens: 5 } })
    const before = { left: await left(), rows: await rows() }
    const bad: [Decision, unknown, string][] = [
      [denied, 1, ErrorCode.INVALID_SETTLE],
      [settled, 1, ErrorCode.INVALID_SETTLE],
      [await limiter.peek('k'), 1, ErrorCode.INVALID_SETTLE],
      [{} as Decision, 1, ErrorCode.INVALID_SETTLE],
      [ok, -1, ErrorCode.INVALID_COST],
      [ok, 2.5, ErrorCode.INVALID_COST],
      [ok, 2 ** 50 + 1, ErrorCode.INVALID_COST],
      [ok, { tokens: -5 }, ErrorCode.INVALID_COST],
      [ok, { token: 5 }, ErrorCode.INVALID_COST],
    ]
    for (const [decision, cost, code] of bad) {
      const error = await limiter.settle('k', { decision, cost: cost as never }).catch((e: unknown) => e)
      expect(error).toMatchObject({ code })
    }
    expect({ left: await left(), rows: await rows() }).toEqual(before)
    // The call refused a bad cost may still settle.
    const after = await limiter.settle('k', { decision: ok, cost: { tokens: 0 } })
    expect(after.rules.map((r) => r.remaining)).toEqual([before.left[0], before.left[1]! + 90])
    await store.close()
  })
})
