/**
 * A child process for the shared-block suite. It runs the built packages (`pnpm build` first).
 *
 * Protocol over IPC: { setup: { client, host, port, prefix, deniedCache, rules, block } } -> { ready };
 * { consume: key } -> { allowed, reason, retryAfterMs }; { reset: key } -> { done }.
 */
import { createLimiter, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

const factories = { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket }

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
  const store = new RedisStore({ client, timeoutMs: 5000, deniedCache: s.deniedCache })
  limiter = createLimiter({
    rules: s.rules.map(([kind, options]) => factories[kind](options)),
    store,
    prefix: s.prefix,
    block: s.block,
    onStoreError: 'throw',
  })
}

function reply(promise) {
  promise.then(
    (value) => process.send(value),
    (error) => process.send({ error: String(error?.stack ?? error) }),
  )
}

process.on('message', (message) => {
  if (message.setup) reply(prepare(message.setup).then(() => ({ ready: true })))
  else if (message.consume) {
    reply(
      limiter.consume(message.consume).then((d) => ({
        allowed: d.allowed,
        reason: d.reason,
        retryAfterMs: d.retryAfterMs,
      })),
    )
  } else if (message.reset) reply(limiter.reset(message.reset).then(() => ({ done: true })))
})
