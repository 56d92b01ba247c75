/**
 * A child process for the multi-process PostgreSQL suite. It runs the built packages (@sluice/core and
 * @sluice/postgres resolve to their dist through test/node_modules), so `pnpm build` must have run.
 *
 * Protocol over IPC: the parent sends { setup }, the child answers { ready }; the parent sends { go },
 * the child makes `calls` calls to one limiter with `inFlight` of them outstanding at a time and answers
 * { done, results }, where each result is [sentAtMs, allowed ? 1 : 0, waitMs, retryAfterMs, answeredAtMs].
 */
import {
  concurrency,
  createLimiter,
  fixedWindow,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { PostgresStore } from '@sluice/postgres'
import pg from 'pg'
import postgres from 'postgres'

const factories = { concurrency, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket, warmUp }

let limiter
let setup
let close = async () => {}

async function prepare(s) {
  setup = s
  let client
  if (s.client === 'pg') {
    client = new pg.Pool({ connectionString: s.url, max: 8 })
    close = () => client.end()
  } else {
    client = postgres(s.url, { max: 8, onnotice: () => {} })
    close = () => client.end()
  }
  const store = new PostgresStore({ client, timeoutMs: 10_000, sweepIntervalMs: 0 })
  limiter = createLimiter({
    rules: s.rules.map(([kind, options]) => factories[kind](options)),
    store,
    prefix: s.prefix,
    onStoreError: 'throw',
  })
}

async function go() {
  const results = []
  let next = 0
  async function lane() {
    while (next < setup.calls) {
      next++
      const sentAt = Date.now()
      const d = await limiter.consume(setup.key)
      results.push([sentAt, d.allowed ? 1 : 0, d.waitMs, d.retryAfterMs, Date.now()])
    }
  }
  await Promise.all(Array.from({ length: setup.inFlight }, lane))
  return results
}

process.on('message', (message) => {
  if (message.setup) {
    prepare(message.setup).then(
      () => process.send({ ready: true }),
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  } else if (message.go) {
    go().then(
      async (results) => {
        await close()
        process.send({ done: true, results }, () => process.exit(0))
      },
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  }
})
