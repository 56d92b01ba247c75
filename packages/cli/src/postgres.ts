/**
 * @module `sluice postgres migrate --url postgres://… [--table NAME]`: creates the PostgresStore's table and
 * functions (or replaces the functions with this version's), as `store.migrate()` does, for a deploy step
 * that runs before the application starts. There is no default URL: a migration goes where it is told.
 */
import { InvalidOptionError } from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import { readArgs } from './args.ts'
import type { Io } from './io.ts'

export const POSTGRES_USAGE = `Usage: sluice postgres migrate --url URL [--table NAME]

Creates the table and functions @sluice/postgres keeps its state in, or replaces the functions with this
version's. Idempotent, and safe when several run at once.

Options:
  --url URL       the database, e.g. postgres://user:password@db.example:5432/app (required)
  --table NAME    the state table, name or schema.name (default sluice_state)

Exit codes: 0 done, 1 invalid input, 2 PostgreSQL could not be reached or refused.`

export async function postgresCommand(argv: readonly string[], io: Io): Promise<number> {
  const { positionals, options } = readArgs(argv, ['url', 'table'], ['help'])
  if (options.has('help')) {
    io.out(POSTGRES_USAGE)
    return 0
  }
  if (positionals.length !== 1 || positionals[0] !== 'migrate') {
    throw new InvalidOptionError('postgres', positionals.join(' '), 'the subcommand migrate')
  }
  const url = options.get('url')
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//.test(url)) {
    throw new InvalidOptionError('--url', url, 'a PostgreSQL URL such as postgres://user@host:5432/db')
  }
  const table = options.get('table')
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 5000 })
  pool.on('error', () => {})
  try {
    const store = new PostgresStore({
      client: pool,
      table: typeof table === 'string' ? table : undefined,
      sweepIntervalMs: 0,
    })
    await store.migrate()
    io.out(`migrated ${typeof table === 'string' ? table : 'sluice_state'}`)
    return 0
  } finally {
    await pool.end()
  }
}
