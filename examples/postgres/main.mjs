/**
 * Limits kept in PostgreSQL, for a stack with a database and no Redis: an API's calls per user (a sliding
 * window and an hourly cap, all or none), its report exports (at most 2 running at once per user, released
 * when done) and a login's failures (blocked for 15 minutes after 3 in a minute). Every process that runs this against the
 * same database shares the counts.
 * Run: DATABASE_URL=postgres://user@host:5432/db node examples/postgres/main.mjs
 */
import { concurrency, createLimiter, fixedWindow, slidingWindow } from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'

const url = process.env.DATABASE_URL
if (url === undefined) {
  console.error('Set DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/postgres')
  process.exit(1)
}

// A pool sized for the calls in flight: each decision holds a connection for one statement.
const pool = new pg.Pool({ connectionString: url, max: 10 })
const store = new PostgresStore({ client: pool, timeoutMs: 100 })
await store.migrate() // idempotent: a deploy step (or `sluice postgres migrate --url …`) does it once

const api = createLimiter({
  prefix: 'api',
  store,
  rules: [slidingWindow({ limit: 5, windowMs: 60_000 }), fixedWindow({ limit: 100, windowMs: 3_600_000 })],
})
const exports = createLimiter({
  prefix: 'exports',
  store,
  rules: [concurrency({ limit: 2, leaseMs: 60_000 })],
})
const login = createLimiter({
  prefix: 'login',
  store,
  rules: [fixedWindow({ limit: 3, windowMs: 60_000 })],
  block: { ms: 15 * 60_000 },
})

const line = (what, d) =>
  console.log(
    `${what.padEnd(22)} ${d.allowed ? 'admitted' : 'denied  '}  remaining=${d.remaining}` +
      `${d.allowed ? '' : `  reason=${d.reason}  retry in ${Math.ceil(d.retryAfterMs / 60_000)} min`}`,
  )

for (let i = 1; i <= 6; i++) line(`api call ${i}`, await api.consume('user:42'))

const first = await exports.consume('user:42')
line('export 1 starts', first)
line('export 2 starts', await exports.consume('user:42'))
line('export 3 starts', await exports.consume('user:42'))
await exports.release('user:42', first)
line('export 1 done, 3 again', await exports.consume('user:42'))

for (let i = 1; i <= 5; i++) line(`failed login ${i}`, await login.consume('alice@example.com'))

await store.close()
await pool.end()
