/**
 * An Express server limited by sluice, state in memory (one process):
 * - every request: 100 per minute per client IP (`app.use`);
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a limit table, where a
 *   missing entry or -1 means not limited;
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn
 *   (queue-and-wait), one that would wait longer gets 429.
 * - GET /metrics: every decision as Prometheus metrics (@sluice/metrics).
 * - /sluice/: the live dashboard (this process's decisions per second, the most denied keys, and the
 *   table, editable) on an admin listener of its own, bound to 127.0.0.1 (ADMIN_PORT, default 3001):
 *   only this machine reaches it, and the public port serves no dashboard at all. Write access follows
 *   from the listener reached, never from the peer address: behind a reverse proxy on the same host every
 *   client connects from loopback, so a check on req.socket.remoteAddress would let every client write,
 *   while a proxy forwarding to PORT does not reach ADMIN_PORT (never point one at it).
 * Run: node examples/express/server.mjs (PORT, default 3000; ADMIN_PORT, default 3001, 0 for any free one).
 */
import { createLimitTable, leakyBucket, slidingWindow } from '@sluice/core'
import { dashboard } from '@sluice/dashboard'
import { rateLimit } from '@sluice/express'
import { liveStats, prometheusMetrics } from '@sluice/metrics'
import express from 'express'
import { Registry } from 'prom-client'

const app = express()
// sluice keys by req.ip. Behind a proxy, trust only its address, e.g. app.set('trust proxy', '10.0.0.0/8').

// Decisions counted for Prometheus; served before the limit, so scraping is never limited.
const registry = new Registry()
prometheusMetrics({ registry })
app.get('/metrics', async (_req, res) => {
  res.type(registry.contentType).send(await registry.metrics())
})

/**
 * Calls per second to each outside payment channel, in a limit table in this process's memory; edit them
 * live on the dashboard (an edit that keeps a rule's kind and window keeps its counts). With several
 * processes, `RedisLimitTable.open({ client, name })` from @sluice/redis keeps one table in Redis instead.
 */
const channels = createLimitTable({
  'PAYMENT:ALIPAY': [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }],
  'PAYMENT:WECHAT': [{ kind: 'slidingLog', limit: 2, windowMs: 1000 }],
  'REFUND:ALIPAY': null,
})

// The dashboard lives on an admin app of its own, listening on loopback only (below): whoever reaches that
// listener is on this machine, whatever a proxy in front of the public port does. It answers only for the
// loopback names with its port (127.0.0.1, localhost, [::1]), so a DNS-rebound name gets nothing.
const admin = express()
admin.use(
  '/sluice',
  dashboard({ stats: liveStats({ seconds: 900 }), tables: { channels }, access: () => 'write' }),
)

// A prefix names each limit on the dashboard (and keeps limits apart when they share a store).
app.use(rateLimit({ prefix: 'per-ip', rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] }))

app.post(
  '/pay',
  rateLimit({
    prefix: 'pay',
    key: { header: ['x-biz-type', 'x-channel'] },
    rules: (key) => channels.get(key),
  }),
  (req, res) => {
    const { rule, rules } = req.rateLimit
    res.json({ paid: true, limitedBy: rules.length > 0 ? rule : null })
  },
)

app.get(
  '/report',
  rateLimit({ prefix: 'report', rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })] }),
  (req, res) => {
    res.json({ report: 'ready', waitedMs: req.rateLimit.waitMs })
  },
)

const port = Number(process.env.PORT ?? 3000)
const adminPort = Number(process.env.ADMIN_PORT ?? 3001)
const adminServer = admin.listen(adminPort, '127.0.0.1', (error) => {
  if (error) {
    console.error(
      `Cannot listen on port ${adminPort}: ${error.code ?? error.message}. Set ADMIN_PORT to a free port.`,
    )
    process.exit(1)
  }
  const server = app.listen(port, (error) => {
    if (error) {
      console.error(`Cannot listen on port ${port}: ${error.code ?? error.message}. Set PORT to a free port.`)
      process.exit(1)
    }
    started(server.address().port, adminServer.address().port)
  })
})

function started(port, adminPort) {
  const url = `http://localhost:${port}`
  console.log(`sluice express example on ${url}
  live dashboard (this machine only, on its own listener): http://localhost:${adminPort}/sluice/

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code}\\n' -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: WECHAT'; done

  # no x-channel header: 400, never counted as "undefined"
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT'

  # queue-and-wait: 6 at once pass 500 ms apart; those past a 2 s wait get 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait

  # what sluice decided, for Prometheus
  curl -s ${url}/metrics | grep sluice_`)
}
