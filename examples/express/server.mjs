/**
 * An Express server limited by sluice, state in memory (one process):
 * - every request: 100 per minute per client IP (`app.use`);
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a table, where a
 *   missing entry or -1 means not limited;
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn
 *   (queue-and-wait), one that would wait longer gets 429.
 * Run: node examples/express/server.mjs (PORT, default 3000).
 */
import { leakyBucket, slidingLog, slidingWindow } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import express from 'express'

const app = express()
// Behind a proxy, tell Express which one to trust, e.g. app.set('trust proxy', 1): sluice keys by req.ip.

app.use(rateLimit({ rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] }))

/** Calls per second to each outside payment channel. */
const channelLimits = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

app.post(
  '/pay',
  rateLimit({
    key: { header: ['x-biz-type', 'x-channel'] },
    rules: (key) => {
      const limit = channelLimits[key]
      return limit === undefined ? null : [slidingLog({ limit, windowMs: 1000 })]
    },
  }),
  (req, res) => {
    const { rule, rules } = req.rateLimit
    res.json({ paid: true, limitedBy: rules.length > 0 ? rule : null })
  },
)

app.get(
  '/report',
  rateLimit({ rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })] }),
  (req, res) => {
    res.json({ report: 'ready', waitedMs: req.rateLimit.waitMs })
  },
)

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port, () => {
  const url = `http://localhost:${server.address().port}`
  console.log(`sluice express example on ${url}

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code}\\n' -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: WECHAT'; done

  # no x-channel header: 400, never counted as "undefined"
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT'

  # queue-and-wait: 6 at once pass 500 ms apart; those past a 2 s wait get 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait`)
})
