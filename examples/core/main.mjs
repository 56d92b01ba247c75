/**
 * The core limiter on its own: a payment gateway limiting calls to each outside payment channel,
 * keyed by `bizType:channel`, from a table of limits. Time is a manual clock so the run is repeatable.
 * Run: node examples/core/main.mjs
 */
import { createLimiter, leakyBucket, MemoryStore, slidingLog } from '@sluice/core'

// Limits per `bizType:channel`; a missing entry or -1 means not limited.
const table = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

let now = 1_000_000
const limiter = createLimiter({
  store: new MemoryStore({ clock: () => now }),
  rules: (key) => {
    const limit = table[key]
    return limit === undefined ? null : [slidingLog({ limit, windowMs: 1000 })]
  },
})

const show = (key, d) =>
  console.log(
    `t=${String(now).padStart(7)}  ${key.padEnd(15)} ${d.allowed ? 'admitted' : 'denied  '}` +
      `  rule=${d.rule.padEnd(11)} remaining=${String(d.remaining).padEnd(8)} retryAfterMs=${d.retryAfterMs}`,
  )

for (const [dt, key] of [
  [0, 'PAYMENT:ALIPAY'],
  [100, 'PAYMENT:ALIPAY'],
  [100, 'PAYMENT:WECHAT'],
  [200, 'PAYMENT:ALIPAY'],
  [100, 'PAYMENT:ALIPAY'],
  [0, 'REFUND:ALIPAY'],
  [0, 'QUERY:UNIONPAY'],
  [600, 'PAYMENT:ALIPAY'],
]) {
  now += dt
  show(key, await limiter.consume(key))
}

// Queue-and-wait: a leaky bucket passes 5 calls per second and lets a call wait up to 600 ms for its turn.
const queue = createLimiter({
  store: new MemoryStore({ clock: () => now }),
  rules: [leakyBucket({ ratePerSecond: 5, maxQueueMs: 600 })],
})
console.log('\nleaky bucket, 5 calls arriving at once:')
for (let i = 0; i < 5; i++) {
  const d = await queue.consume('outbound')
  console.log(
    `  call ${i + 1}: ${d.allowed ? `admitted, waits ${d.waitMs} ms` : `denied, retry in ${d.retryAfterMs} ms`}`,
  )
}
