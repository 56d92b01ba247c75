/**
 * A Koa server limited by sluice, state in memory (one process):
 * - every request: 100 per minute per client IP (`app.use`);
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a table, where a missing
 *   entry or -1 means not limited;
 * - GET /users/:id: 5 a minute per route template, however many ids are asked for (`key: 'route'`);
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn
 *   (queue-and-wait), one that would wait longer gets 429.
 * Run: node examples/koa/server.mjs (PORT, default 3000).
 */
import Router from '@koa/router'
import { leakyBucket, slidingLog, slidingWindow } from '@sluice/core'
import { rateLimit } from '@sluice/koa'
import Koa from 'koa'

// sluice keys by ctx.ip. Behind your own proxy: new Koa({ proxy: true, maxIpsCount: 1 }).
const app = new Koa()
const router = new Router()

// A prefix names each limit (and keeps limits apart when they share a store).
app.use(rateLimit({ prefix: 'per-ip', rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] }))

/** Calls per second to each outside payment channel; -1 or a missing pair: not limited. */
const channels = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

router.post(
  '/pay',
  rateLimit({
    prefix: 'pay',
    key: { header: ['x-biz-type', 'x-channel'] },
    rules: (key) => (key in channels ? [slidingLog({ limit: channels[key], windowMs: 1000 })] : null),
  }),
  (ctx) => {
    const { rule, rules } = ctx.state.rateLimit
    ctx.body = { paid: true, limitedBy: rules.length > 0 ? rule : null }
  },
)

router.get(
  '/users/:id',
  rateLimit({ prefix: 'users', key: 'route', rules: [slidingLog({ limit: 5, windowMs: 60_000 })] }),
  (ctx) => {
    ctx.body = { id: ctx.params.id, remaining: ctx.state.rateLimit.remaining }
  },
)

router.get(
  '/report',
  rateLimit({ prefix: 'report', rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })] }),
  (ctx) => {
    ctx.body = { report: 'ready', waitedMs: ctx.state.rateLimit.waitMs }
  },
)

app.use(router.routes()).use(router.allowedMethods())

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port)
server.on('error', (error) => {
  console.error(`Cannot listen on port ${port}: ${error.code ?? error.message}. Set PORT to a free port.`)
  process.exit(1)
})
server.on('listening', () => {
  const url = `http://localhost:${server.address().port}`
  console.log(`sluice koa example on ${url}

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'

  # one limit for the route, whatever the id: the sixth call in a minute gets 429
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' ${url}/users/$i; done

  # queue-and-wait: 6 at once pass 500 ms apart; the one past a 2 s wait gets 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait`)
})
