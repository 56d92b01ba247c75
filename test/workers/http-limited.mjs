/**
 * An HTTP server limited by sluice on a real Redis, in a child process of its own, for the reliability
 * suite. It runs the built packages (`pnpm build` first), so what it proves holds for what users install.
 *
 * Protocol over IPC, one reply per message:
 * - `{ setup }` → `{ ready, url }`: builds an Express or Fastify app (setup.adapter) on an ioredis or
 *   node-redis client (setup.client) and listens on 127.0.0.1.
 * - `{ report }` → `{ durations, unhandled, uncaught, store }`: what happened since the last report.
 *   `durations` are server-side ms per answered request (arrival to the last byte written), `store`
 *   counts the RedisStore's answers by outcome (ok, timeout, refused at the in-flight cap, other error).
 *
 * Every request is keyed by its `x-user` header. Keys starting `exact-` get a small limit (the rule named
 * `redis-exact`), every other key a limit load never reaches (`redis`). Both allowed and denied
 * responses are JSON `{ rule, allowed, remaining }`; an error (onStoreError 'throw') is a 500 `{ code }`.
 * With `onStoreError: 'insurance'` the fallback is a memory-store limiter whose rule is named `insurance`.
 */
import { performance } from 'node:perf_hooks'
import { createLimiter, fixedWindow, MemoryStore, slidingLog } from '@sluice/core'
import { RedisStore } from '@sluice/redis'

const unhandled = []
const uncaught = []
process.on('unhandledRejection', (reason) => unhandled.push(String(reason?.stack ?? reason)))
process.on('uncaughtException', (error) => uncaught.push(String(error?.stack ?? error)))

let durations = []
let storeOutcomes = { ok: 0, timeout: 0, refused: 0, error: 0 }

/** Times one request on the server, from its arrival until its response is written. */
function timed(res) {
  const started = performance.now()
  res.once('finish', () => durations.push(performance.now() - started))
}

async function connect(s) {
  if (s.client === 'ioredis') {
    const { Redis } = await import('ioredis')
    // The settings the @sluice/redis README recommends: fail fast while Redis is away.
    const client = new Redis({
      host: s.host,
      port: s.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
    })
    client.on('error', () => {})
    await client.connect()
    return client
  }
  const { createClient } = await import('redis')
  const client = createClient({ socket: { host: s.host, port: s.port }, disableOfflineQueue: true })
  client.on('error', () => {})
  await client.connect()
  return client
}

/** The store, wrapped only to count how each of its calls ended. */
function counted(store) {
  return {
    apply(prefix, key, rules, cost, mode) {
      return store.apply(prefix, key, rules, cost, mode).then(
        (decisions) => {
          storeOutcomes.ok++
          return decisions
        },
        (error) => {
          if (error?.code === 'ERR_SLUICE_STORE_TIMEOUT') storeOutcomes.timeout++
          else if (/maxInFlight/.test(error?.message)) storeOutcomes.refused++
          else storeOutcomes.error++
          throw error
        },
      )
    },
    reset: (prefix, key, rules) => store.reset(prefix, key, rules),
  }
}

function limitOptions(s, client) {
  const store = counted(
    new RedisStore({
      client,
      timeoutMs: s.timeoutMs,
      ...(s.maxInFlight === undefined ? {} : { maxInFlight: s.maxInFlight }),
      ...(s.deniedCache === undefined ? {} : { deniedCache: s.deniedCache }),
    }),
  )
  const load = [fixedWindow({ limit: 1_000_000, windowMs: 600_000, name: 'redis' })]
  const exact = [slidingLog({ limit: s.exactLimit ?? 5, windowMs: 600_000, name: 'redis-exact' })]
  const onStoreError =
    s.onStoreError === 'insurance'
      ? createLimiter({
          rules: [slidingLog({ limit: s.insuranceLimit ?? 5, windowMs: 600_000, name: 'insurance' })],
          store: new MemoryStore(),
          prefix: 'insurance',
        })
      : s.onStoreError
  return {
    store,
    prefix: s.prefix ?? 'http',
    onStoreError,
    key: { header: 'x-user' },
    rules: (key) => (key.startsWith('exact-') ? exact : load),
    message: (_req, d) => ({ rule: d.rule, reason: d.reason, allowed: false, remaining: d.remaining }),
  }
}

async function expressApp(s, client) {
  const { default: express } = await import('express')
  const { rateLimit } = await import('@sluice/express')
  const app = express()
  app.use((_req, res, next) => {
    timed(res)
    next()
  })
  app.use(rateLimit(limitOptions(s, client)))
  app.get('/r', (req, res) => {
    const d = req.rateLimit
    res.json({ rule: d.rule, reason: d.reason, allowed: true, remaining: d.remaining })
  })
  app.use((error, _req, res, _next) => {
    res.status(500).json({ code: error?.code ?? String(error) })
  })
  const { createServer } = await import('node:http')
  const server = createServer(app)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${server.address().port}`
}

async function fastifyApp(s, client) {
  const { default: Fastify } = await import('fastify')
  const { sluice } = await import('@sluice/fastify')
  const app = Fastify()
  app.addHook('onRequest', (_request, reply, done) => {
    timed(reply.raw)
    done()
  })
  await app.register(sluice, limitOptions(s, client))
  app.get('/r', async (request) => {
    const d = request.rateLimit
    return { rule: d.rule, reason: d.reason, allowed: true, remaining: d.remaining }
  })
  return app.listen({ port: 0, host: '127.0.0.1' })
}

process.on('message', (message) => {
  if (message.setup) {
    const s = message.setup
    connect(s)
      .then((client) => (s.adapter === 'express' ? expressApp(s, client) : fastifyApp(s, client)))
      .then(
        (url) => process.send({ ready: true, url }),
        (error) => process.send({ error: String(error?.stack ?? error) }),
      )
  } else if (message.report) {
    process.send({ durations, unhandled, uncaught, store: storeOutcomes })
    durations = []
    storeOutcomes = { ok: 0, timeout: 0, refused: 0, error: 0 }
  }
})
