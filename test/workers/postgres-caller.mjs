/**
 * A child process for the multi-process PostgreSQL suite (the protocol: caller.mjs). It runs the built
 * packages (@sluice/core and @sluice/postgres resolve to their dist through test/node_modules), so
 * `pnpm build` must have run.
 */
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'
import { serveCalls } from './caller.mjs'

serveCalls(async (s) => {
  const client =
    s.client === 'pg'
      ? new pg.Pool({ connectionString: s.url, max: 8 })
      : postgres(s.url, { max: 8, onnotice: () => {} })
  return {
    store: new PostgresStore({ client, timeoutMs: 10_000, sweepIntervalMs: 0 }),
    close: () => client.end(),
  }
})
