/**
 * quota on PostgreSQL (docs/design/postgres.md, "Quota periods"), on a server of the test's own: the memory
 * store's decisions, field by field, on walks across calendar edges (test/quota-walks.ts), with a `pg` Pool
 * and with postgres.js; and the period handshake: a call sent for a period that does not hold the
 * database's now changes nothing and goes once more for the period that does; a second miss fails it.
 */
import { MemoryStore, type QuotaRule, quota, quotaPeriod, StoreError } from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type PostgresServer, startPostgres, stopAll } from '../../../test/harness/postgres.ts'
import { RULE_SETS, SPRING, walksAcrossEdges } from '../../../test/quota-walks.ts'

let server: PostgresServer
let pool: pg.Pool
let sql: postgres.Sql

beforeAll(async () => {
  server = await startPostgres()
  pool = new pg.Pool({ connectionString: server.url, max: 4 })
  sql = postgres(server.url, { max: 4, onnotice: () => {} })
  await new PostgresStore({ client: pool, sweepIntervalMs: 0 }).migrate()
})

afterAll(async () => {
  await pool?.end()
  await sql?.end()
  await stopAll()
})

const HOUR = 3_600_000
let run = 0

describe.each(['pg', 'postgres.js'] as const)('quota on PostgreSQL (%s)', (kind) => {
  it.each(RULE_SETS)(
    '%s: answers every step of a walk across calendar edges as the memory store, field by field',
    async (_, rules, longest) => {
      const client = kind === 'pg' ? pool : sql
      await walksAcrossEdges(
        (clock) => new PostgresStore({ client, clock, timeoutMs: 2000, sweepIntervalMs: 0 }),
        rules,
        longest,
      )
    },
  )
})

/** A pg client that keeps every apply call's params (its 4th argument), and answers with `forged` when given. */
function recordingClient(
  sent: number[][],
  forged?: (values: unknown[]) => unknown[],
): { query(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: unknown[] }> } {
  return {
    query: (config) => {
      if (config.values !== undefined && config.text.includes('_apply"(')) {
        sent.push([...(config.values[3] as number[])])
        if (forged !== undefined) return Promise.resolve({ rows: [{ r: forged(config.values) }] })
      }
      return pool.query(config)
    },
  }
}

describe('quota: the period handshake', () => {
  const rule = quota({ limit: 3, per: 'day', timeZone: 'Europe/Berlin' }) as QuotaRule
  // Berlin's midnight at the end of its 23-hour day.
  const edge = SPRING + 23 * HOUR

  it.each([
    ['behind: sent for the period before the edge, the database reads a time after it', edge + 2, edge - 3],
    ['ahead: sent for the period after the edge, the database reads a time before it', edge - 2, edge + 3],
  ])(
    'a stale estimate of the database clock at an edge (%s): it answers its now and counts nothing, the call goes once more, and its units land in that period',
    async (_, callNow, estimate) => {
      const sent: number[][] = []
      // The store reads its clock twice for a call: when encoding it (the call's now, sent), then when
      // writing its quota periods (the estimate). Here the second read is stale.
      const reads = [callNow, estimate]
      const store = new PostgresStore({
        client: recordingClient(sent),
        clock: () => reads.shift() ?? callNow,
        timeoutMs: 2000,
        sweepIntervalMs: 0,
      })
      const memory = new MemoryStore({ clock: () => callNow, sweepIntervalMs: 0 })
      const prefix = `edge${run++}`
      const expected = memory.apply(prefix, 'k', [rule], 2, 'consume')
      expect(await store.apply(prefix, 'k', [rule], 2, 'consume')).toEqual(expected)
      const stale = quotaPeriod(rule, estimate)
      const right = quotaPeriod(rule, callNow)
      expect(stale).not.toEqual(right)
      expect(sent.map((p) => p.slice(0, 3))).toEqual([
        [3, stale.start, stale.end],
        [3, right.start, right.end],
      ])
      expect(expected[0]).toMatchObject({ allowed: true, used: 0, remaining: 1, resetsAt: right.end })
      const rows = await pool.query('SELECT a, b, expires FROM sluice_state WHERE k = $1 AND r = $2', [
        `${prefix.length}:${prefix}:k`,
        rule.id,
      ])
      expect(rows.rows).toEqual([{ a: right.start, b: 2, expires: right.end }])
      // A penalty checks its period the same way.
      reads.push(callNow, estimate)
      expect(await store.adjust(prefix, 'k', [rule], 1, 'penalize')).toEqual(
        memory.adjust(prefix, 'k', [rule], 1, 'penalize'),
      )
      expect(sent).toHaveLength(4)
      memory.close()
      await store.close()
    },
  )

  it('a second miss (an edge passed between the two calls) fails the call, ERR_SLUICE_STORE, and counts nothing', async () => {
    const sent: number[][] = []
    const prefix = `twice${run++}`
    // Both calls are answered as a database whose now lay outside their period answers: [period, server, now].
    const store = new PostgresStore({
      client: recordingClient(sent, (values) => [3, Date.now(), (values[3] as number[])[2]!]),
      timeoutMs: 2000,
      sweepIntervalMs: 0,
    })
    const error = await store.apply(prefix, 'k', [rule], 1, 'consume').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(StoreError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_STORE' })
    expect((error as Error).message).toMatch(/outside the quota period .* twice/)
    expect(sent).toHaveLength(2)
    const second = quotaPeriod(rule, sent[0]![2]!)
    expect(sent[1]!.slice(1, 3)).toEqual([second.start, second.end])
    const rows = await pool.query('SELECT 1 FROM sluice_state WHERE k = $1', [`${prefix.length}:${prefix}:k`])
    expect(rows.rows).toEqual([])
    await store.close()
  })

  it("a reset forgets the period's count: the next call is admitted as on a key never seen", async () => {
    const now = edge - 5000
    const store = new PostgresStore({ client: pool, clock: () => now, timeoutMs: 2000, sweepIntervalMs: 0 })
    const memory = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
    const prefix = `reset${run++}`
    for (let i = 0; i < 4; i++) {
      expect(await store.apply(prefix, 'k', [rule], 1, 'consume')).toEqual(
        memory.apply(prefix, 'k', [rule], 1, 'consume'),
      )
    }
    await store.reset(prefix, 'k')
    memory.reset(prefix, 'k')
    const after = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(after).toEqual(memory.apply(prefix, 'k', [rule], 1, 'consume'))
    expect(after[0]).toMatchObject({ allowed: true, used: 0, remaining: 2 })
    memory.close()
    await store.close()
  })

  it("on the database's own clock: a fresh store's calls count in the period holding the database's now", async () => {
    const prefix = `fresh${run++}`
    const store = new PostgresStore({ client: pool, timeoutMs: 2000, sweepIntervalMs: 0 })
    const first = await store.apply(prefix, 'k', [rule], 1, 'consume')
    const second = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(first[0]).toMatchObject({ allowed: true, used: 0, remaining: 2 })
    expect(second[0]).toMatchObject({ allowed: true, used: 1, remaining: 1 })
    const period = quotaPeriod(rule, second.countedAt!)
    expect(second[0]!.resetsAt).toBe(period.end)
    const rows = await pool.query('SELECT a, b FROM sluice_state WHERE k = $1', [
      `${prefix.length}:${prefix}:k`,
    ])
    expect(rows.rows).toEqual([{ a: period.start, b: 2 }])
    await store.close()
  })
})
