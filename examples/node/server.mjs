/**
 * A plain node:http server limited by sluice, state in memory (one process), with no framework:
 * - every request: 100 per minute per client IP (`withRateLimit` around the server's listener);
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a table, where a missing
 *   entry or -1 means not limited, as connect-style middleware (`rateLimit(o)(req, res, next)`);
 * - GET /users/:id: 5 a minute per route template, named by the `route` option (`key: 'route'`);
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn
 *   (queue-and-wait), one that would wait longer gets 429.
 * Run: node examples/node/server.mjs (PORT, default 3000).
 */
import { createServer } from 'node:http'
import { leakyBucket, slidingLog, slidingWindow } from '@sluice/core'
import { rateLimit, withRateLimit } from '@sluice/node'

/** Calls per second to each outside payment channel; -1 or a missing pair: not limited. */
const channels = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

/** This server's routes, as templates: what `key: 'route'` counts by, never the raw URL with its ids. */
function routeOf(req) {
  const path = req.url.split('?', 1)[0]
  return /^\/users\/[^/]+$/.test(path) ? '/users/:id' : path
}

const limits = {
  'POST /pay': rateLimit({
    prefix: 'pay',
    key: { header: ['x-biz-type', 'x-channel'] },
    rules: (key) => (key in channels ? [slidingLog({ limit: channels[key], windowMs: 1000 })] : null),
  }),
  'GET /users/:id': rateLimit({
    prefix: 'users',
    key: 'route',
    route: routeOf,
    rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
  }),
  'GET /report': rateLimit({
    prefix: 'report',
    rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })],
  }),
}

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

/** The routes' handlers, run once their route's limit has let the request through. */
function route(req, res) {
  const decision = req.rateLimit
  switch (`${req.method} ${routeOf(req)}`) {
    case 'POST /pay':
      return json(res, 200, { paid: true, limitedBy: decision.rules.length > 0 ? decision.rule : null })
    case 'GET /users/:id':
      return json(res, 200, { id: req.url.split('/')[2], remaining: decision.remaining })
    case 'GET /report':
      return json(res, 200, { report: 'ready', waitedMs: decision.waitMs })
    default:
      return json(res, 404, { error: 'not found' })
  }
}

// behind your own proxy, add trustProxy: ['10.0.0.0/8'] (its addresses or CIDRs; true is refused).
const perIp = { prefix: 'per-ip', rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] }

const server = createServer(
  withRateLimit(perIp, (req, res) => {
    const limit = limits[`${req.method} ${routeOf(req)}`]
    if (limit === undefined) return route(req, res)
    limit(req, res, (error) => (error === undefined ? route(req, res) : json(res, 500, { error: 'failed' })))
  }),
)

const port = Number(process.env.PORT ?? 3000)
server.on('error', (error) => {
  console.error(`Cannot listen on port ${port}: ${error.code ?? error.message}. Set PORT to a free port.`)
  process.exit(1)
})
server.listen(port, () => {
  const url = `http://localhost:${server.address().port}`
  console.log(`sluice node example on ${url}

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'

  # one limit for the route, whatever the id: the sixth call in a minute gets 429
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' ${url}/users/$i; done

  # queue-and-wait: 6 at once pass 500 ms apart; the one past a 2 s wait gets 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait`)
})
