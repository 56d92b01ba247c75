/**
 * A payment gateway that limits its calls to each outside payment channel, per bizType + channel, from
 * a table of limits (limits.json: a missing entry or -1 means not limited). With Redis the table lives in
 * Redis, where an operator changes a channel's limit while the gateways run: `sluice limits set`. `POST /pay` takes
 * `{ "requestId", "bizType", "channel", "amount" }`, asks the limiter, and calls the (simulated) channel
 * only when the limit admits it: 200 with the channel's receipt, or 429 with `Retry-After` and the
 * `RateLimit` headers. A channel whose entry is a leaky bucket gets its calls evenly spaced: a payment
 * waits its turn (up to the entry's `maxQueueMs`) instead of being refused.
 * `GET /channels` shows what each channel was sent.
 *
 * Run: node examples/payment-gateway/server.mjs
 * Environment:
 * - PORT: default 3002.
 * - REDIS_URL (e.g. redis://127.0.0.1:6379): keep the counts in Redis, so every gateway process shares
 *   one limit per channel, and read the limits from the limit table `payment-gateway` in Redis (seeded
 *   from limits.json when it is empty), which every gateway follows. Without it the counts and the table
 *   live in this process's memory.
 * - LIMITS_TABLE: the name of that table (default payment-gateway).
 * - GATEWAY_PROCESSES: how many gateways share that Redis (default 1). While Redis is unreachable each
 *   one falls back to its share of every limit, held in memory.
 * - LIMITS: path of a JSON table of limits to use instead of limits.json.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createLimitTable, RateLimitedError } from '@sluice/core'
import {
  JSON_TYPE,
  limitedBody,
  PROBLEM_JSON,
  rateLimitHeaders,
  resolveHeaderOptions,
} from '@sluice/core/http'
import { createChannels } from './channels.mjs'
import { createGateway, entriesFromLimits, insuranceLimiter, NAME } from './gateway.mjs'

const limits = entriesFromLimits(
  JSON.parse(readFileSync(process.env.LIMITS ?? new URL('./limits.json', import.meta.url), 'utf8')),
)
const tableName = process.env.LIMITS_TABLE ?? 'payment-gateway'
const channels = createChannels()
const redis = process.env.REDIS_URL ? await connectRedis(process.env.REDIS_URL) : undefined
const table = redis ? await openRedisTable(redis.client) : createLimitTable(limits)
const gateway = createGateway({
  table,
  channels,
  ...(redis && {
    store: redis.store,
    onStoreError: insuranceLimiter(table, Number(process.env.GATEWAY_PROCESSES ?? 1)),
  }),
})
/** The current draft's `RateLimit` and `RateLimit-Policy` headers, and `Retry-After` on a 429. */
const headerOptions = resolveHeaderOptions(true)

async function connectRedis(url) {
  // Loaded only when asked for: the in-memory gateway needs neither ioredis nor @sluice/redis.
  const [{ Redis }, { RedisStore }] = await Promise.all([import('ioredis'), import('@sluice/redis')])
  // No offline queue and one retry: while Redis is away, calls fail fast and the insurance limiter answers.
  const client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  await new Promise((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', (error) => reject(new Error(`Cannot reach Redis at ${url}: ${error.message}`)))
  })
  // From here on the client reconnects by itself, and the store reports each failed call to the limiter.
  client.on('error', () => {})
  return { client, store: new RedisStore({ client }) }
}

/** The limit table in Redis, followed live; seeded from limits.json the first time. */
async function openRedisTable(client) {
  const { RedisLimitTable } = await import('@sluice/redis')
  const shared = await RedisLimitTable.open({ client, name: tableName })
  if (shared.version === 0) {
    for (const [entry, specs] of Object.entries(limits)) {
      await shared.set(entry, specs, { actor: 'seeded from limits.json' })
    }
  }
  return shared
}

const server = createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/pay') return await pay(req, res)
    if (req.method === 'GET' && req.url === '/channels') return send(res, 200, JSON_TYPE, channels.stats())
    if (req.method === 'GET' && req.url === '/limits') {
      // The limits this gateway applies now, as the table's version and entries (each rule as its spec).
      const entries = Object.fromEntries(table.entries())
      return send(res, 200, JSON_TYPE, { table: tableName, version: table.version, entries })
    }
    send(res, 404, PROBLEM_JSON, problem(404, 'Not Found', `No route ${req.method} ${req.url}.`))
  } catch (error) {
    console.error(error)
    if (!res.headersSent)
      send(res, 500, PROBLEM_JSON, problem(500, 'Internal Server Error', 'Payment failed.'))
  }
})

async function pay(req, res) {
  const payment = await readJson(req)
  if (!named(payment?.bizType) || !named(payment?.channel)) {
    const detail = 'A payment needs a bizType and a channel in capitals, such as "PAYMENT" and "ALIPAY".'
    return send(res, 400, PROBLEM_JSON, problem(400, 'Bad Request', detail))
  }
  // A caller who hangs up while queued stops waiting, and the channel is never called for it.
  const gone = new AbortController()
  res.once('close', () => gone.abort())
  try {
    const { decision, receipt } = await gateway.pay(payment, { signal: gone.signal })
    const { requestId = null, bizType, channel } = payment
    const limitedBy = decision.rules.length > 0 ? decision.rule : null
    const body = { requestId, bizType, channel, ...receipt, waitedMs: decision.waitMs, limitedBy }
    send(res, 200, JSON_TYPE, body, rateLimitHeaders(decision, headerOptions))
  } catch (error) {
    if (error instanceof RateLimitedError) {
      const { decision } = error
      return send(res, 429, PROBLEM_JSON, limitedBody(decision), rateLimitHeaders(decision, headerOptions))
    }
    if (gone.signal.aborted) return
    throw error
  }
}

function named(value) {
  return typeof value === 'string' && NAME.test(value)
}

function problem(status, title, detail) {
  return { type: 'about:blank', title, status, detail }
}

function send(res, status, contentType, body, headers = {}) {
  const json = JSON.stringify(body)
  res.writeHead(status, {
    ...headers,
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(json),
  })
  res.end(json)
}

/** The request's JSON body, or undefined when it is not JSON or larger than 16 KiB. */
async function readJson(req) {
  let text = ''
  for await (const chunk of req) {
    text += chunk
    if (text.length > 16_384) return undefined
  }
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function shutdown() {
  server.close()
  server.closeAllConnections()
  table.close()
  redis?.client.disconnect()
}
process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)

server.listen(Number(process.env.PORT ?? 3002), () => {
  const url = `http://localhost:${server.address().port}`
  const where = redis ? `in Redis at ${process.env.REDIS_URL}` : 'in memory'
  const pay = (bizType, channel) =>
    `curl -s -X POST ${url}/pay -d '{"requestId":"r1","bizType":"${bizType}","channel":"${channel}","amount":100}'`
  console.log(`sluice payment gateway on ${url}, limits ${where}

  # PAYMENT via ALIPAY: 5 a second; the 6th within the second gets 429
  for i in 1 2 3 4 5 6; do ${pay('PAYMENT', 'ALIPAY')} -o /dev/null -w '%{http_code}\\n'; done

  # PAYMENT via UNIONPAY: a queue passing 5 a second; 8 at once are spaced 200 ms apart, the last ones refused
  for i in 1 2 3 4 5 6 7 8; do ${pay('PAYMENT', 'UNIONPAY')} & done; wait

  # REFUND via ALIPAY (-1) and pairs not in the table are not limited
  ${pay('REFUND', 'ALIPAY')}

  # what the channels were sent, and the limits in force
  curl -s ${url}/channels
  curl -s ${url}/limits${
    redis
      ? `

  # change ALIPAY's limit while the gateways run (every gateway follows within a second; counts are kept)
  pnpm exec sluice limits set PAYMENT:ALIPAY slidingLog:10/1s --table ${tableName} --redis ${process.env.REDIS_URL}`
      : ''
  }`)
})
