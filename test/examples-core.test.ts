/**
 * examples/core runs as `node examples/core/main.mjs` and prints the decisions docs/design/ promises for its
 * trace: a table of limits per bizType + channel (sliding log, 1 s), unlimited pairs, and a leaky-bucket
 * queue. Its clock is a manual one, so the output is the same on every run, to the character.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { run, stopExamples } from './examples-harness.ts'

afterAll(stopExamples)

const EXPECTED = `t=1000000  PAYMENT:ALIPAY  admitted  rule=3-per-1s    remaining=2        retryAfterMs=0
t=1000100  PAYMENT:ALIPAY  admitted  rule=3-per-1s    remaining=1        retryAfterMs=0
t=1000200  PAYMENT:WECHAT  admitted  rule=2-per-1s    remaining=1        retryAfterMs=0
t=1000400  PAYMENT:ALIPAY  admitted  rule=3-per-1s    remaining=0        retryAfterMs=0
t=1000500  PAYMENT:ALIPAY  denied    rule=3-per-1s    remaining=0        retryAfterMs=500
t=1000500  REFUND:ALIPAY   admitted  rule=unlimited   remaining=Infinity retryAfterMs=0
t=1000500  QUERY:UNIONPAY  admitted  rule=unlimited   remaining=Infinity retryAfterMs=0
t=1001100  PAYMENT:ALIPAY  admitted  rule=3-per-1s    remaining=1        retryAfterMs=0

leaky bucket, 5 calls arriving at once:
  call 1: admitted, waits 0 ms
  call 2: admitted, waits 200 ms
  call 3: admitted, waits 400 ms
  call 4: admitted, waits 600 ms
  call 5: denied, retry in 200 ms
`

describe('examples/core', () => {
  it('prints the decisions of its trace, exactly', async () => {
    const main = run('examples/core/main.mjs')
    expect(await main.exited).toBe(0)
    // 3 a second on ALIPAY: the 4th call within the second is denied until the first one's entry
    // expires (t=1001000, so 500 ms after t=1000500); at t=1001100 the entries of t=1000000 and
    // t=1000100 have expired, so one of the 3 is in use. Pairs at -1 or not in the table are unlimited.
    // The queue passes one call every 200 ms and holds a call at most 600 ms: 4 pass, the 5th would
    // need 800 ms and may retry once 200 ms have drained.
    expect(main.output()).toBe(EXPECTED)
  })
})
