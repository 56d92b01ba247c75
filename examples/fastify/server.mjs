/**
 * A Fastify server limited by sluice, state in memory (one process):
 * - every route: 100 per minute per client IP (the plugin, global);
 * - GET /search: its own limit, 5 per 10 s per IP (route config);
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a table, where a
 *   missing entry or -1 means not limited (route config keyed by headers);
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn
 *   (queue-and-wait), one that would wait longer gets 429 (the `app.rateLimit()` hook);
 * - GET /health: not limited; GET /metrics: every decision as Prometheus metrics (@sluice/metrics).
 * Denials go through Fastify's error path: a `setErrorHandler` sees them (`error.statusCode === 429`).
 * Run: node examples/fastify/server.mjs (PORT, default 3001).
 */
import { leakyBucket, slidingLog, slidingWindow } from '@sluice/core'
import { sluice } from '@sluice/fastify'
import { prometheusMetrics } from '@sluice/metrics'
import Fastify from 'fastify'
import { Registry } from 'prom-client'

// sluice keys by request.ip. Behind a proxy, trust only its address, e.g. Fastify({ trustProxy: '10.0.0.0/8' }).
const app = Fastify({ logger: { level: 'warn' } })
const registry = new Registry()
prometheusMetrics({ registry })

await app.register(sluice, { rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] })

app.get(
  '/search',
  { config: { rateLimit: { rules: [slidingLog({ limit: 5, windowMs: 10_000 })] } } },
  async (request) => ({
    results: [],
    remaining: request.rateLimit.remaining,
  }),
)

/** Calls per second to each outside payment channel. */
const channelLimits = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

app.post(
  '/pay',
  {
    config: {
      rateLimit: {
        key: { header: ['x-biz-type', 'x-channel'] },
        rules: (key) => {
          const limit = channelLimits[key]
          return limit === undefined ? null : [slidingLog({ limit, windowMs: 1000 })]
        },
      },
    },
  },
  async (request) => {
    const { rule, rules } = request.rateLimit
    return { paid: true, limitedBy: rules.length > 0 ? rule : null }
  },
)

app.get(
  '/report',
  { onRequest: app.rateLimit({ rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })] }) },
  async (request) => ({ report: 'ready', waitedMs: request.rateLimit.waitMs }),
)

app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))
app.get('/metrics', { config: { rateLimit: false } }, async (_request, reply) =>
  reply.type(registry.contentType).send(await registry.metrics()),
)

const port = Number(process.env.PORT ?? 3001)
try {
  await app.listen({ port, host: '127.0.0.1' })
} catch (error) {
  console.error(`Cannot listen on port ${port}: ${error.code ?? error.message}. Set PORT to a free port.`)
  process.exit(1)
}
const url = `http://localhost:${app.server.address().port}`
console.log(`sluice fastify example on ${url}

  # its own limit: 5 per 10 s; the 6th gets 429 with Retry-After and a problem-details body
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' ${url}/search; done; curl -i ${url}/search

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code}\\n' -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: WECHAT'; done

  # no x-channel header: 400, never counted as "undefined"
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT'

  # queue-and-wait: 6 at once pass 500 ms apart; those past a 2 s wait get 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait`)
