/**
 * @module A flood from one client key: `calls` calls, `inFlight` at a time, against a limit of `limit`
 * per minute, so all but `limit` are denied. Counts the Redis commands the flood cost (`INFO
 * commandstats` deltas, commands run inside scripts included, this case's own INFO left out) and the
 * script calls among them (EVALSHA/EVAL: round trips), per denied call.
 * params: { subject, port, calls, inFlight, limit }
 * Subjects: `sluice` (RedisStore, denied-key cache on, its default), `sluice-nocache` (deniedCache: false),
 * `rlf` (RateLimiterRedis), `rlf-block` (RateLimiterRedis with inMemoryBlockOnConsumed: its own local
 * block of keys over the limit), `rlr` (rate-limit-redis).
 */
import { createRequire } from 'node:module'
import { params, report } from '../lib/child.mjs'
import { connectIoredis } from '../lib/redis-server.mjs'
import { sluice } from '../lib/sluice.mjs'

const require = createRequire(import.meta.url)
const p = params()
const { createLimiter, fixedWindow } = await sluice('core')
const { RedisStore } = await sluice('redis')

const connect = () => connectIoredis(p.port)

const admin = await connect()
const client = await connect()
const key = `flood:${process.pid}`

async function subject() {
  switch (p.subject) {
    case 'sluice':
    case 'sluice-nocache': {
      const store = new RedisStore({ client, deniedCache: p.subject === 'sluice', timeoutMs: 1000 })
      const limiter = createLimiter({
        rules: [fixedWindow({ limit: p.limit, windowMs: 60_000 })],
        store,
        onStoreError: 'throw',
      })
      return async () => (await limiter.consume(key)).allowed
    }
    case 'rlf':
    case 'rlf-block': {
      const { RateLimiterRedis } = require('rate-limiter-flexible')
      const rl = new RateLimiterRedis({
        storeClient: client,
        points: p.limit,
        duration: 60,
        ...(p.subject === 'rlf-block' ? { inMemoryBlockOnConsumed: p.limit } : {}),
      })
      return () =>
        rl.consume(key).then(
          () => true,
          (rejection) => {
            if (rejection instanceof Error) throw rejection
            return false
          },
        )
    }
    case 'rlr': {
      const { RedisStore: RlrStore } = require('rate-limit-redis')
      const store = new RlrStore({ sendCommand: (command, ...args) => client.call(command, ...args) })
      store.init({ windowMs: 60_000 })
      await new Promise((resolve) => setTimeout(resolve, 100)) // its SCRIPT LOAD
      // express-rate-limit's middleware increments, then compares the hits with its limit.
      return async () => (await store.increment(key)).totalHits <= p.limit
    }
  }
  throw new Error(`unknown flood subject ${p.subject}`)
}

/** Commands Redis has run so far, by name, from INFO commandstats. */
async function commandCounts() {
  const info = await admin.info('commandstats')
  const counts = {}
  for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) counts[m[1]] = Number(m[2])
  return counts
}

const consume = await subject()
const before = await commandCounts()
let denied = 0
let sent = 0
async function worker() {
  while (sent < p.calls) {
    sent++
    if (!(await consume())) denied++
  }
}
await Promise.all(Array.from({ length: p.inFlight }, worker))
const after = await commandCounts()
let commands = 0
let scripts = 0
for (const [name, calls] of Object.entries(after)) {
  const delta = calls - (before[name] ?? 0)
  if (name !== 'info') commands += delta
  if (name === 'evalsha' || name === 'eval') scripts += delta
}
admin.disconnect()
client.disconnect()
report({
  calls: p.calls,
  denied,
  commands,
  scripts,
  commandsPerDenied: commands / denied,
  roundTripsPerDenied: scripts / denied,
})
