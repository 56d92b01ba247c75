/**
 * A process whose wall clock is wrong: `Date.now` is shifted by SLUICE_TEST_CLOCK_SHIFT_MS before sluice
 * (the built packages) is loaded, as on a machine whose clock has drifted. It calls one RedisStore limiter.
 *
 * Protocol over IPC, one reply per message:
 * - `{ setup: { client, host, port } }` → `{ ready, now }` (`now`: this process's Date.now(), to show the shift)
 * - `{ run: { rules, prefix, key, calls, inFlight } }` → `{ admitted }`: `calls` consumes of `key`,
 *   `inFlight` at a time, through a limiter with `onStoreError: 'throw'` (a failure fails the run).
 */
const shift = Number(process.env.SLUICE_TEST_CLOCK_SHIFT_MS ?? '0')
const realNow = Date.now
Date.now = () => realNow() + shift

const { createLimiter, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } = await import(
  '@sluice/core'
)
const { RedisStore } = await import('@sluice/redis')

const factories = { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket }
let store

async function setup(s) {
  let client
  if (s.client === 'ioredis') {
    const { Redis } = await import('ioredis')
    client = new Redis({ host: s.host, port: s.port, lazyConnect: true, enableOfflineQueue: false })
    client.on('error', () => {})
    await client.connect()
  } else {
    const { createClient } = await import('redis')
    client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
    client.on('error', () => {})
    await client.connect()
  }
  store = new RedisStore({ client, timeoutMs: 5000 })
}

async function run(r) {
  const limiter = createLimiter({
    rules: r.rules.map(([kind, options]) => factories[kind](options)),
    store,
    prefix: r.prefix,
    onStoreError: 'throw',
  })
  let admitted = 0
  let next = 0
  const lane = async () => {
    while (next < r.calls) {
      next++
      if ((await limiter.consume(r.key)).allowed) admitted++
    }
  }
  await Promise.all(Array.from({ length: r.inFlight }, lane))
  return { admitted }
}

process.on('message', (message) => {
  const reply = (work) =>
    work.then(
      (result) => process.send(result),
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  if (message.setup) reply(setup(message.setup).then(() => ({ ready: true, now: Date.now() })))
  else if (message.run) reply(run(message.run))
})
