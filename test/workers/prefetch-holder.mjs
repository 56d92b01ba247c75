/**
 * A child process holding prefetched units for one key, for the reset suite. It runs the built packages
 * (`pnpm build` first), on a clock fixed at `at` (so windows and buckets never turn during a run).
 *
 * Protocol over IPC: { setup: { client, host, port, prefix, rule: [kind, options], at } } -> { ready };
 * { consume: n } -> { admitted, reasons } after n calls one by one; { close: true } -> { closed } once the
 * store has given back what it holds.
 */
import { createLimiter, fixedWindow, slidingWindow, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

const factories = { fixedWindow, slidingWindow, tokenBucket }

let store
let limiter

async function prepare(s) {
  let client
  if (s.client === 'ioredis') {
    client = new Redis({ host: s.host, port: s.port, lazyConnect: true, enableOfflineQueue: false })
    client.on('error', () => {})
    await client.connect()
  } else {
    client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
    client.on('error', () => {})
    await client.connect()
  }
  store = new RedisStore({
    client,
    clock: () => s.at,
    timeoutMs: 10_000,
    deniedCache: false,
    prefetch: { units: 64, ms: 60_000 },
  })
  const [kind, options] = s.rule
  limiter = createLimiter({
    rules: [factories[kind](options)],
    store,
    prefix: s.prefix,
    onStoreError: 'throw',
  })
}

async function consume(n) {
  let admitted = 0
  const reasons = {}
  for (let i = 0; i < n; i++) {
    const d = await limiter.consume('shared')
    if (!d.allowed) continue
    admitted++
    reasons[d.reason] = (reasons[d.reason] ?? 0) + 1
  }
  return { admitted, reasons }
}

function reply(promise) {
  promise.then(
    (value) => process.send(value),
    (error) => process.send({ error: String(error?.stack ?? error) }),
  )
}

process.on('message', (message) => {
  if (message.setup) reply(prepare(message.setup).then(() => ({ ready: true })))
  else if (message.consume !== undefined) reply(consume(message.consume))
  else if (message.close) reply(store.close().then(() => ({ closed: true })))
})
