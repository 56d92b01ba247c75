/**
 * A child process for the multi-process Redis suites. It runs the built packages (@sluice/core and
 * @sluice/redis resolve to their dist through test/node_modules), so `pnpm build` must have run.
 *
 * Protocol over IPC: the parent sends { setup }, the child answers { ready }; the parent sends { go },
 * the child makes `calls` calls to one limiter with `inFlight` of them outstanding at a time and answers
 * { done, results }, where each result is [sentAtMs, allowed ? 1 : 0, waitMs, retryAfterMs, answeredAtMs].
 */
import { createLimiter, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

const factories = { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket }

let limiter
let setup
let close = async () => {}

async function prepare(s) {
  setup = s
  let client
  if (s.client === 'ioredis') {
    client = new Redis({ host: s.host, port: s.port, lazyConnect: true, enableOfflineQueue: false })
    client.on('error', () => {})
    await client.connect()
    close = async () => client.disconnect()
  } else {
    client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
    client.on('error', () => {})
    await client.connect()
    close = async () => client.destroy()
  }
  const store = new RedisStore({ client, timeoutMs: s.timeoutMs ?? 5000 })
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
