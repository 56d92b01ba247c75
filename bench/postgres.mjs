#!/usr/bin/env node
/**
 * @module PostgresStore's rate beside a minimal single-statement counter on the same pool (issue 49: with 64
 * calls in flight, fixedWindow at least 0.7× the counter's rate and slidingWindow at least 0.5×, in the same
 * run), with rate-limiter-flexible's RateLimiterPostgres beside them; then the table's size after a million
 * keys have expired and the store's sweep has run.
 *
 *   node bench/postgres.mjs [--rounds 5] [--ms 3000] [--keys 10000] [--pool 16] [--expired 1000000]
 *
 * Each round runs every subject for `--ms` in turn (the order rotates by round), on one pg Pool against a
 * server of the bench's own; the figure is the median of the rounds' ratios to the counter's rate in the
 * same round. Keys are drawn from `--keys` at random, so calls rarely wait on one key's lock.
 */
import { cpus, loadavg } from 'node:os'
import { createLimiter, fixedWindow, slidingWindow } from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import { RateLimiterPostgres } from 'rate-limiter-flexible'
import { numberOption } from './lib/options.mjs'
import { startPostgres } from './lib/postgres-server.mjs'
import { median } from './lib/stats.mjs'

const rounds = numberOption('rounds', 5)
const measureMs = numberOption('ms', 3000)
const keys = numberOption('keys', 10_000)
const poolSize = numberOption('pool', 16)
const expired = numberOption('expired', 1_000_000)
const IN_FLIGHT = 64

const server = await startPostgres(['max_connections=200'])
const pool = new pg.Pool({ connectionString: server.url, max: poolSize })
const store = new PostgresStore({ client: pool, timeoutMs: 5000, sweepIntervalMs: 0 })
await store.migrate()
await pool.query('CREATE TABLE counter (k text PRIMARY KEY, n bigint NOT NULL)')
const rlf = await new Promise((resolve, reject) => {
  const limiter = new RateLimiterPostgres(
    {
      storeClient: pool,
      storeType: 'pool',
      tableName: 'rlf',
      points: 1e9,
      duration: 60,
      clearExpiredByTimeout: false,
    },
    (error) => (error ? reject(error) : resolve(limiter)),
  )
})

const limiterOf = (rule, prefix) => createLimiter({ rules: [rule], store, prefix, onStoreError: 'throw' })
const fixed = limiterOf(fixedWindow({ limit: 1e9, windowMs: 60_000 }), 'fw')
const sliding = limiterOf(slidingWindow({ limit: 1e9, windowMs: 60_000, buckets: 10 }), 'sw')
const COUNTER =
  'INSERT INTO counter (k, n) VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET n = counter.n + 1 RETURNING n'

const SUBJECTS = {
  counter: (key) => pool.query({ name: 'counter', text: COUNTER, values: [key] }),
  fixedWindow: (key) => fixed.consume(key),
  slidingWindow: (key) => sliding.consume(key),
  RateLimiterPostgres: (key) => rlf.consume(key),
}

/** Calls per second of `call` with 64 in flight for `measureMs`. */
async function rate(call) {
  let done = 0
  const until = performance.now() + measureMs
  const started = performance.now()
  async function lane() {
    while (performance.now() < until) {
      await call(`k${Math.floor(Math.random() * keys)}`)
      done++
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  return (done * 1000) / (performance.now() - started)
}

console.log(
  `PostgreSQL ${server.version}; node ${process.version}; ${cpus().length} CPUs (shared with other work: load ${loadavg()[0].toFixed(1)}); ` +
    `pg Pool of ${poolSize}, ${IN_FLIGHT} in flight, ${keys} keys; ${rounds} rounds of ${measureMs} ms per subject`,
)
const names = Object.keys(SUBJECTS)
for (const name of names) await rate(SUBJECTS[name]) // warm up: plans, connections, the JIT
const rates = Object.fromEntries(names.map((n) => [n, []]))
for (let round = 0; round < rounds; round++) {
  for (let i = 0; i < names.length; i++) {
    const name = names[(i + round) % names.length]
    rates[name].push(await rate(SUBJECTS[name]))
  }
}
const ratios = (name) => rates[name].map((r, i) => r / rates.counter[i])
console.log('subject               calls/s (median)   × counter (median of rounds; min–max)')
for (const name of names) {
  const r = ratios(name)
  console.log(
    `${name.padEnd(22)}${median(rates[name]).toFixed(0).padStart(15)}   ${median(r).toFixed(2)} (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})`,
  )
}

// The table after a million keys have expired: rows written with expiries in the past, then swept.
const size = async () => {
  const { rows } = await pool.query(
    "SELECT count(*)::int AS rows, pg_total_relation_size('sluice_state') AS bytes FROM sluice_state",
  )
  return rows[0]
}
await pool.query(
  `INSERT INTO sluice_state (k, r, a, b, expires)
   SELECT 'expired:' || i, 'fixedWindow:60000', 0, 1, floor(extract(epoch FROM clock_timestamp()) * 1000) - 1000
   FROM generate_series(1, $1) AS i`,
  [expired],
)
const before = await size()
const sweeper = new PostgresStore({ client: pool, sweepIntervalMs: 0, sweepBatch: 1000 })
const started = performance.now()
let deleted = 0
for (;;) {
  const n = await sweeper.sweep()
  deleted += n
  if (n === 0) break
}
const sweptMs = performance.now() - started
await pool.query('VACUUM sluice_state')
const after = await size()
const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`
console.log(
  `expired keys: ${expired}; rows before the sweep ${before.rows} (${mb(before.bytes)}), deleted ${deleted} in ` +
    `${(sweptMs / 1000).toFixed(1)} s (batches of 1000); after it and a VACUUM: ${after.rows} rows, ` +
    `${mb(after.bytes)} on disk (the space is reused by new rows; VACUUM FULL returns it)`,
)
await sweeper.close()
await store.close()
await pool.end()
server.stop()
