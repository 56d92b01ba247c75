/**
 * Protecting a login with sluice: an Express server whose POST /login allows 5 failed attempts per
 * username and client IP in 15 minutes, then blocks that pair for 15 minutes, twice as long each time it
 * comes back within a day (at most 24 hours). A successful login is not counted (`countWhen`), so a user
 * who types their password right is never held back by their own success.
 *
 * State is in memory (one process) unless REDIS_URL is set, e.g. REDIS_URL=redis://127.0.0.1:6379: then
 * every process on that Redis shares the counts and the blocks.
 * Run: node examples/login/server.mjs (PORT, default 3000). LOGIN_WINDOW_MS, LOGIN_BLOCK_MS,
 * LOGIN_MAX_BLOCK_MS and LOGIN_FORGET_MS shorten the figures (the tests run them in seconds).
 */
import { createLimiter, MemoryStore, slidingLog } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { RedisStore } from '@sluice/redis'
import express from 'express'
import { Redis } from 'ioredis'

const MINUTE = 60_000
const windowMs = Number(process.env.LOGIN_WINDOW_MS ?? 15 * MINUTE)
const blockMs = Number(process.env.LOGIN_BLOCK_MS ?? 15 * MINUTE)
const maxBlockMs = Number(process.env.LOGIN_MAX_BLOCK_MS ?? 24 * 60 * MINUTE)
const forgetMs = Number(process.env.LOGIN_FORGET_MS ?? 24 * 60 * MINUTE)

let store = new MemoryStore()
let redis
if (process.env.REDIS_URL) {
  redis = new Redis(process.env.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  await new Promise((resolve, reject) => {
    redis.once('ready', resolve)
    redis.once('error', reject)
  })
  store = new RedisStore({ client: redis })
}

// 5 failed attempts per username + IP in any 15 minutes; the 6th begins a block of 15 minutes, doubling
// for each block begun within a day of the last ones, at most 24 hours.
const logins = createLimiter({
  rules: [slidingLog({ limit: 5, windowMs })],
  block: { ms: blockMs, factor: 2, maxMs: maxBlockMs, forgetMs },
  store,
  prefix: 'login',
})

/** Who may log in: a real app checks a password hash. */
const users = { alice: 'correct horse battery staple', bob: 'hunter2' }

const app = express()
// Behind a proxy, tell Express which one to trust, e.g. app.set('trust proxy', 1): sluice keys by req.ip.
app.use(express.json())

app.post(
  '/login',
  rateLimit({
    limiter: logins,
    // The username as typed (case-folded) and the client's address; no username is a 400, never a key.
    key: [
      (req) => (typeof req.body?.username === 'string' ? req.body.username.toLowerCase() : undefined),
      'ip',
    ],
    // Only failures count: a 200 gives its unit back when the response has been sent.
    countWhen: (_req, res) => res.statusCode !== 200,
  }),
  (req, res) => {
    const { username, password } = req.body
    if (users[String(username).toLowerCase()] === password) res.json({ ok: true, user: username })
    else res.status(401).json({ ok: false, remaining: req.rateLimit.remaining })
  },
)

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port, () => {
  const url = `http://localhost:${server.address().port}`
  console.log(`sluice login example on ${url} (${redis ? 'Redis' : 'memory'})

  # a wrong password, six times: five 401s, then 429 with Retry-After (blocked for 15 minutes)
  for i in 1 2 3 4 5 6; do curl -s -w ' %{http_code}\\n' -X POST ${url}/login -H 'content-type: application/json' -d '{"username":"alice","password":"guess"}'; done`)
})

process.on('SIGTERM', () => {
  server.close()
  redis?.disconnect()
})
