/**
 * One limit, many processes. The primary forks WORKERS workers (default 4); each runs its own Express app
 * with its own Redis connection and its own RedisStore, all listening on one port (node:cluster hands
 * the connections out in turn). `GET /` is limited to LIMIT requests (default 50) a minute per API key
 * (the x-api-key header), and the limit holds exactly however the requests fall across the workers,
 * because every decision is one atomic script in Redis, on Redis's clock.
 * Every response says which worker answered it (X-Worker).
 *
 * Run: REDIS_URL=redis://127.0.0.1:6379 node examples/many-processes/server.mjs
 * Environment: REDIS_URL (required), PORT (default 3003), WORKERS (default 4), LIMIT (default 50).
 * To start Redis, the workers and a burst in one go: node examples/many-processes/main.mjs
 */
import cluster from 'node:cluster'
import { slidingLog } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { RedisStore } from '@sluice/redis'
import express from 'express'
import { Redis } from 'ioredis'

const port = Number(process.env.PORT ?? 3003)
const workers = Number(process.env.WORKERS ?? 4)
const limit = Number(process.env.LIMIT ?? 50)
const redisUrl = process.env.REDIS_URL

if (!redisUrl) {
  console.error('Set REDIS_URL (e.g. redis://127.0.0.1:6379), or run main.mjs, which starts a redis-server.')
  process.exit(2)
}

if (cluster.isPrimary) {
  const pids = []
  cluster.on('listening', (worker) => {
    pids.push(worker.process.pid)
    if (pids.length === workers) {
      console.log(
        `sluice many-processes: ${workers} workers (pids ${pids.join(' ')}) on http://localhost:${port}, ` +
          `${limit} requests a minute per x-api-key, shared through Redis at ${redisUrl}`,
      )
    }
  })
  let stopping = false
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) console.error(`worker ${worker.id} exited (${signal ?? code})`)
    if (Object.keys(cluster.workers).length === 0) process.exit(stopping ? 0 : 1)
  })
  const stop = () => {
    stopping = true
    for (const worker of Object.values(cluster.workers)) worker.process.kill('SIGTERM')
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  for (let i = 0; i < workers; i++) cluster.fork()
} else {
  await serve(cluster.worker.id)
}

async function serve(id) {
  // No offline queue and one retry: while Redis is away, calls fail fast instead of piling up.
  const client = new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  client.on('error', (error) => console.error(`worker ${id}: redis: ${error.message}`))
  await new Promise((resolve) => client.once('ready', resolve))

  const app = express()
  app.use((_req, res, next) => {
    res.setHeader('X-Worker', String(id))
    next()
  })
  app.get(
    '/',
    rateLimit({
      // 100 ms is the default; one machine running every worker, Redis and a burst of 200 connections
      // at once can keep an answer waiting longer than that, so this demonstration allows a second.
      store: new RedisStore({ client, timeoutMs: 1000 }),
      prefix: 'many-processes',
      key: { header: 'x-api-key' },
      rules: [slidingLog({ limit, windowMs: 60_000 })],
      // Here a failing Redis shows as a 500, so that nothing passes unnoticed. A service would pick
      // 'allow', 'deny' or an insurance limiter instead.
      onStoreError: 'throw',
    }),
    (req, res) => res.json({ worker: id, pid: process.pid, remaining: req.rateLimit.remaining }),
  )
  // No signal handler here: a worker ends on SIGTERM, or by itself when the primary is gone.
  app.listen(port)
}
