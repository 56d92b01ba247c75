/**
 * A child process for the concurrency suite. It runs the built packages (`pnpm build` first).
 *
 * Protocol over IPC: { setup: { client, host, port, prefix, limit, leaseMs } } -> { ready };
 * { run: { calls, inFlight, holdMs } } -> { held: [[admittedAt, releasedAt], ...], denied } where each
 *   admitted call is held `holdMs` (wall clock, ms) and then released; times are Date.now() here, taken
 *   after the admission was answered and before the release was sent, so each lies within the lease;
 * { take: n } -> { taken } consumes n units and never releases them (the parent then kills this process);
 * { consume: true } -> { allowed, retryAfterMs }.
 */
import { concurrency, createLimiter } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

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
  // The denied-key cache would answer repeated denials locally; every call asks Redis here.
  const store = new RedisStore({ client, timeoutMs: 5000, deniedCache: false })
  limiter = createLimiter({
    rules: [concurrency({ limit: s.limit, leaseMs: s.leaseMs })],
    store,
    prefix: s.prefix,
    onStoreError: 'throw',
  })
}

async function run({ calls, inFlight, holdMs }) {
  const held = []
  let denied = 0
  let next = 0
  async function lane() {
    while (next < calls) {
      next++
      const d = await limiter.consume('shared')
      if (!d.allowed) {
        denied++
        continue
      }
      const admittedAt = Date.now()
      await new Promise((resolve) => setTimeout(resolve, holdMs))
      const releasedAt = Date.now()
      await limiter.release('shared', d)
      held.push([admittedAt, releasedAt])
    }
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  return { held, denied }
}

function reply(promise) {
  promise.then(
    (value) => process.send(value),
    (error) => process.send({ error: String(error?.stack ?? error) }),
  )
}

process.on('message', (message) => {
  if (message.setup) reply(prepare(message.setup).then(() => ({ ready: true })))
  else if (message.run) reply(run(message.run))
  else if (message.take) {
    reply(
      (async () => {
        let taken = 0
        for (let i = 0; i < message.take; i++) if ((await limiter.consume('shared')).allowed) taken++
        return { taken }
      })(),
    )
  } else if (message.consume) {
    reply(limiter.consume('shared').then((d) => ({ allowed: d.allowed, retryAfterMs: d.retryAfterMs })))
  }
})
