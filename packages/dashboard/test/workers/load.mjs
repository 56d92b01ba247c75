/**
 * One application process for the dashboard's browser test: an Express server limited by sluice on a
 * shared Redis store, publishing its live statistics to Redis, and a bounded load loop against itself on
 * loopback. It runs the built packages (`pnpm build` first).
 *
 * Limiters (their prefixes are what the dashboard shows): `api` (per user, some users well over their
 * limit, one named like markup), `report` (a leaky bucket: requests queue), `search` (shadow mode),
 * `login` (never denies), and `pay`, whose rules come from the `channels` limit table.
 *
 * The table: this process holds a copy that the parent keeps in step over IPC ({ table: { entry, rules } }
 * for each change the dashboard made). With a table in Redis (`RedisLimitTable.open`) each process opens
 * it itself instead, and the IPC step goes away.
 *
 * IPC: the parent sends { setup: { redisPort, instance, entries } }; this answers { ready, port }. Then
 * { go } starts the load (it stops by itself after `maxMs`), { stop } stops it, { table } changes an entry
 * and is answered { applied, version }.
 */
import { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { liveStats, publishStats } from '@sluice/metrics'
import { RedisStore } from '@sluice/redis'
import express from 'express'
import { Redis } from 'ioredis'

const factories = { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket }

/** The `channels` table as this process sees it: entry -> rules (null: not limited). */
function tableOf(entries) {
  const rules = new Map()
  let version = 0
  const build = (specs) =>
    specs === null ? null : specs.map(({ kind, ...options }) => factories[kind](options))
  for (const [entry, specs] of Object.entries(entries)) rules.set(entry, build(specs))
  return {
    get: (entry) => (rules.has(entry) ? rules.get(entry) : (rules.get('*') ?? null)),
    get version() {
      return version
    },
    apply(entry, specs) {
      if (specs === undefined) rules.delete(entry)
      else rules.set(entry, build(specs))
      version++
    },
  }
}

let server
let publisher
let client
let table
let loop
let base

async function setup({ redisPort, instance, entries }) {
  client = new Redis({ host: '127.0.0.1', port: redisPort })
  const store = new RedisStore({ client })
  table = tableOf(entries)
  const stats = liveStats({ seconds: 900 })
  const app = express()
  app.use(
    '/api',
    rateLimit({
      prefix: 'api',
      store,
      key: { header: 'x-user' },
      rules: [fixedWindow({ limit: 15, windowMs: 1000 })],
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
  app.use((_req, res) => res.json({ ok: true }))
  await new Promise((resolve) => {
    server = app.listen(0, '127.0.0.1', resolve)
  })
  base = `http://127.0.0.1:${server.address().port}`
  publisher = publishStats({
    stats,
    client,
    instance,
    meta: () => ({ tableVersion: table.version }),
    intervalMs: 500,
  })
  return server.address().port
}

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
      (port) => process.send({ ready: true, port }),
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  } else if (message.go) {
    go(message.maxMs)
  } else if (message.stop) {
    clearTimeout(loop)
  } else if (message.table) {
    table.apply(message.table.entry, message.table.rules)
    process.send({ applied: message.table.entry, version: table.version })
  } else if (message.exit) {
    clearTimeout(loop)
    Promise.resolve(publisher?.close())
      .then(() => client?.quit())
      .finally(() => {
        server?.close()
        process.exit(0)
      })
  }
})
