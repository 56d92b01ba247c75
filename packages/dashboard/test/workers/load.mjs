/**
 * One application process for the dashboard's browser test: an Express server limited by sluice on a
 * shared Redis store, publishing its live statistics to Redis, and a bounded load loop against itself on
 * loopback. It runs the built packages (`pnpm build` first).
 *
 * Limiters (their prefixes are what the dashboard shows): `api` (per user, some users well over their
 * limit, one named like markup), `report` (a leaky bucket: requests queue), `search` (shadow mode),
 * `login` (never denies), `pay`, whose rules come from the `channels` limit table, and `busy`, behind an
 * overload guard that sheds every request but critical ones: its signals always read overloaded, and one
 * request it admitted never ends, so the room (one request: the estimate's floor) stays full; a critical
 * request (half as much room again) is admitted and completes, which keeps the guard's evidence fresh.
 *
 * The table: each process opens the `channels` table in Redis itself (`RedisLimitTable.open`) and follows
 * it, so an edit made anywhere (the dashboard) reaches it through Redis; it publishes the version it holds
 * as `tableVersion` in its stats' meta.
 *
 * IPC: the parent sends { setup: { redisPort, instance, table } }; this answers { ready, port, version }.
 * Then { go } starts the load (it stops by itself after `maxMs`), { stop } stops it, { exit } ends it.
 */
import { fixedWindow, leakyBucket, overload, slidingWindow, tokenBucket } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { liveStats, publishStats } from '@sluice/metrics'
import { RedisLimitTable, RedisStore } from '@sluice/redis'
import express from 'express'
import { Redis } from 'ioredis'

let server
let publisher
let client
let table
let loop
let base
let guard
/** Ends the one `busy` request the guard admitted and the server holds. */
let releaseHeld = () => {}

async function setup({ redisPort, instance, table: name }) {
  client = new Redis({ host: '127.0.0.1', port: redisPort })
  const store = new RedisStore({ client })
  table = await RedisLimitTable.open({ client, name })
  const stats = liveStats({ seconds: 900 })
  const app = express()
  app.use(
    '/api',
    rateLimit({
      prefix: 'api',
      store,
      key: { header: 'x-user' },
      rules: [fixedWindow({ limit: 5, windowMs: 1000 })],
    }),
  )
  app.use(
    '/report',
    rateLimit({ prefix: 'report', store, rules: [leakyBucket({ ratePerSecond: 8, maxQueueMs: 400 })] }),
  )
  app.use(
    '/search',
    rateLimit({
      prefix: 'search',
      store,
      shadow: true,
      rules: [slidingWindow({ limit: 5, windowMs: 1000 })],
    }),
  )
  app.use(
    '/login',
    rateLimit({ prefix: 'login', store, rules: [tokenBucket({ capacity: 100, refillPerSecond: 50 })] }),
  )
  app.use(
    '/pay',
    rateLimit({ prefix: 'pay', store, key: { header: 'x-channel' }, rules: (key) => table.get(key) }),
  )
  guard = overload({
    maxEventLoopDelayMs: 100,
    signals: () => ({ eventLoopDelayMs: 1000, utilization: 1 }),
    critical: (req) => req.headers['x-critical'] === '1',
  })
  app.use(
    '/busy',
    rateLimit({
      prefix: 'busy',
      store,
      rules: [fixedWindow({ limit: 1000, windowMs: 1000 })],
      overload: guard,
    }),
  )
  app.get('/busy/held', (_req, res) => {
    releaseHeld = () => res.json({ ok: true })
  })
  app.use((_req, res) => res.json({ ok: true }))
  await new Promise((resolve) => {
    server = app.listen(0, '127.0.0.1', resolve)
  })
  base = `http://127.0.0.1:${server.address().port}`
  // Evidence first (completed requests), then the one request that fills the guard's room and stays.
  for (let i = 0; i < 3; i++) await (await fetch(`${base}/busy`)).arrayBuffer()
  const held = fetch(`${base}/busy/held`).then((r) => r.arrayBuffer())
  held.catch(() => {})
  while (guard.state().inFlight === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  publisher = publishStats({
    stats,
    client,
    instance,
    meta: () => ({ tableVersion: table.version }),
    intervalMs: 500,
  })
  return { port: server.address().port, version: table.version }
}

/**
 * Requests per 200 ms tick, per process. Both processes share Redis, so each user sends twice this times 5
 * a second against `api`'s 5: every user is over it, some well over, and `api` denies about 60 a second to
 * `busy`'s 10, which keeps it the busiest denier whenever the page is read.
 */
const USERS = [
  ['alice', 2],
  ['bob', 1],
  ['<img src=x onerror=alert(1)>', 3],
  ['mallory', 2],
]

/** Every 200 ms, a batch of requests to this process's own server, until stopped or `maxMs` passed. */
function go(maxMs = 60_000) {
  const until = Date.now() + maxMs
  const tick = () => {
    if (Date.now() > until) return
    const batch = [fetch(`${base}/report`), fetch(`${base}/search`), fetch(`${base}/login`)]
    batch.push(fetch(`${base}/busy`, { headers: { 'x-critical': '1' } }), fetch(`${base}/busy`))
    for (const [user, n] of USERS) {
      for (let i = 0; i < n; i++) batch.push(fetch(`${base}/api`, { headers: { 'x-user': user } }))
    }
    Promise.allSettled(batch.map((p) => p.then((r) => r.arrayBuffer()))).then(() => {})
    loop = setTimeout(tick, 200)
  }
  tick()
}

process.on('message', (message) => {
  if (message.setup) {
    setup(message.setup).then(
      ({ port, version }) => process.send({ ready: true, port, version }),
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  } else if (message.go) {
    go(message.maxMs)
  } else if (message.stop) {
    clearTimeout(loop)
  } else if (message.exit) {
    clearTimeout(loop)
    releaseHeld()
    guard?.close()
    Promise.resolve(publisher?.close())
      .then(() => table?.close())
      .then(() => client?.quit())
      .finally(() => {
        server?.close()
        process.exit(0)
      })
  }
})
