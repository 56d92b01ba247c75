/**
 * A child process for the prefetch suite. It runs the built packages (`pnpm build` first).
 *
 * Protocol over IPC: { setup: { client, host, port, prefix, rules, prefetch } } -> { ready };
 * { go: { calls?, ms?, inFlight } } -> { admitted, reasons, offset } where `admitted` holds the time of each
 * admitted call (local epoch ms, taken when its decision arrived), `reasons` counts the admitted calls by
 * `reason`, and `offset` is Redis's clock minus this process's, as an upper bound learnt from `TIME`
 * round trips (so local times plus it are never early in Redis's clock), with the bound's width in
 * `uncertainty`, and `late` is the longest round trip of an admitted call decided in Redis (it was counted
 * that long, at most, before its time here). A run makes `calls` calls in all, or calls until `ms` have passed; the store is then
 * closed, giving back units still held, and the reply waits for that.
 */
import { createLimiter, fixedWindow, slidingLog, slidingWindow, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

const factories = { fixedWindow, slidingLog, slidingWindow, tokenBucket }
const now = () => performance.timeOrigin + performance.now()

let client
let store
let limiter
let time

async function prepare(s) {
  if (s.client === 'ioredis') {
    client = new Redis({ host: s.host, port: s.port, lazyConnect: true, enableOfflineQueue: false })
    client.on('error', () => {})
    await client.connect()
    time = () => client.call('TIME')
  } else {
    client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
    client.on('error', () => {})
    await client.connect()
    time = () => client.sendCommand(['TIME'])
  }
  store = new RedisStore({ client, timeoutMs: 5000, prefetch: s.prefetch })
  limiter = createLimiter({
    rules: s.rules.map(([kind, options]) => factories[kind](options)),
    store,
    prefix: s.prefix,
    onStoreError: 'throw',
  })
}

/** Redis's ms minus local epoch ms, upper bound from the tightest of `n` round trips, and its width. */
async function offsetOf(n) {
  let best = { offset: Number.POSITIVE_INFINITY, uncertainty: Number.POSITIVE_INFINITY }
  for (let i = 0; i < n; i++) {
    const sent = now()
    const [seconds, micros] = await time()
    const received = now()
    const server = Number(seconds) * 1000 + Number(micros) / 1000
    if (received - sent < best.uncertainty) best = { offset: server - sent, uncertainty: received - sent }
  }
  return best
}

async function go({ calls, ms, inFlight }) {
  const before = await offsetOf(20)
  const admitted = []
  const reasons = {}
  let late = 0
  const end = ms === undefined ? Number.POSITIVE_INFINITY : now() + ms
  let left = calls ?? Number.POSITIVE_INFINITY
  async function lane() {
    while (left > 0 && now() < end) {
      left--
      const sent = now()
      const d = await limiter.consume('shared')
      if (!d.allowed) continue
      const at = now()
      admitted.push(at)
      reasons[d.reason] = (reasons[d.reason] ?? 0) + 1
      // A call decided in Redis was counted somewhere between its send and now.
      if (d.reason !== 'prefetch' && at - sent > late) late = at - sent
    }
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  const after = await offsetOf(20)
  store.close()
  // Let the units given back on close reach Redis before the parent reads it.
  await time()
  const best = before.uncertainty <= after.uncertainty ? before : after
  return { admitted, reasons, late, offset: best.offset, uncertainty: best.uncertainty }
}

function reply(promise) {
  promise.then(
    (value) => process.send(value),
    (error) => process.send({ error: String(error?.stack ?? error) }),
  )
}

process.on('message', (message) => {
  if (message.setup) reply(prepare(message.setup).then(() => ({ ready: true })))
  else if (message.go) reply(go(message.go))
})
