/**
 * `sluice postgres migrate` as a user runs it (the built CLI, `pnpm build` first), against a server of the
 * test's own: it refuses without a URL, migrates (twice: idempotent), names its table, and exits 2 when
 * PostgreSQL cannot be reached.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sluice } from '../../../test/harness/cli.ts'
import { type PostgresServer, startPostgres, stopAll } from '../../../test/harness/postgres.ts'

let server: PostgresServer

beforeAll(async () => {
  server = await startPostgres()
})

afterAll(stopAll)

describe('sluice postgres migrate', () => {
  it('refuses without --url: there is no default database', async () => {
    const r = await sluice('postgres', 'migrate')
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('ERR_SLUICE_INVALID_OPTION')
    expect(r.stderr).toContain('--url')
  })

  it('creates the table and functions, idempotently, under the table named', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await sluice('postgres', 'migrate', '--url', server.url, '--table', 'limits_state')
      expect(r.stderr).toBe('')
      expect(r).toMatchObject({ code: 0, stdout: 'migrated limits_state\n' })
    }
    const functions = await server.query<{ proname: string }>(
      "SELECT proname FROM pg_proc WHERE proname IN ('limits_state_apply', 'limits_state_sweep') ORDER BY proname",
    )
    expect(functions.map((f) => f.proname)).toEqual(['limits_state_apply', 'limits_state_sweep'])
  })

  it('exits 2 with a coded error when PostgreSQL cannot be reached', async () => {
    const r = await sluice('postgres', 'migrate', '--url', 'postgres://postgres@127.0.0.1:1/postgres')
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('ERR_SLUICE_STORE')
  })
})
