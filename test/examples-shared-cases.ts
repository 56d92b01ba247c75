/**
 * @module The cases examples/koa, examples/node and examples/nestjs share: the three keep the same limits
 * (a payment table per bizType + channel, a route template, a queue), so each asserts them through here.
 */
import { expect } from 'vitest'
import { many, request, statuses } from './examples-harness.ts'

const pay = (bizType: string, channel?: string): RequestInit => ({
  method: 'POST',
  headers: { 'x-biz-type': bizType, ...(channel === undefined ? {} : { 'x-channel': channel }) },
})

/**
 * POST /pay: 3 a second for PAYMENT + ALIPAY, 2 for PAYMENT + WECHAT, -1 and missing pairs not limited, a
 * missing channel answered 400. `policy` is the `RateLimit-Policy` an admitted payment carries.
 */
export async function expectPaymentTable(base: string, policy: string): Promise<void> {
  const url = `${base}/pay`
  const alipay = await many(10, url, pay('PAYMENT', 'ALIPAY'))
  expect(statuses(alipay)).toEqual({ 200: 3, 429: 7 })
  for (const r of alipay.filter((r) => r.status === 200)) {
    expect(r.body).toEqual({ paid: true, limitedBy: '3-per-1s' })
    expect(r.headers.get('ratelimit-policy')).toBe(policy)
  }
  for (const r of alipay.filter((r) => r.status === 429)) {
    expect(r.headers.get('retry-after')).toBe('1')
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json(;|$)/)
    expect(r.body.detail).toBe('Rate limit 3-per-1s exceeded; retry in 1 s.')
  }
  expect(statuses(await many(10, url, pay('PAYMENT', 'WECHAT')))).toEqual({ 200: 2, 429: 8 })
  for (const bizType of ['REFUND', 'QUERY']) {
    const free = await many(10, url, pay(bizType, 'ALIPAY'))
    expect(statuses(free)).toEqual({ 200: 10 })
    for (const r of free) expect(r.body).toEqual({ paid: true, limitedBy: null })
  }
  const missing = await request(url, pay('PAYMENT'))
  expect(missing.status).toBe(400)
  expect(missing.body.detail).toBe('This request needs the x-channel header.')
}

/** GET /users/:id counts by its route template: five a minute whatever the ids. */
export async function expectRouteTemplate(base: string): Promise<void> {
  const replies = []
  for (let id = 1; id <= 6; id++) replies.push(await request(`${base}/users/${id}`))
  expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429])
  expect(replies[0]!.body).toEqual({ id: '1', remaining: 4 })
  expect(replies[4]!.body).toEqual({ id: '5', remaining: 0 })
}

/** GET /report queues at 2 a second and refuses the request that would wait past 2 s. */
export async function expectReportQueue(base: string): Promise<void> {
  const replies = await many(6, `${base}/report`)
  expect(statuses(replies)).toEqual({ 200: 5, 429: 1 })
  const waits = replies
    .filter((r) => r.status === 200)
    .map((r) => r.body.waitedMs as number)
    .sort((a, b) => a - b)
  waits.forEach((waitedMs, i) => {
    expect(waitedMs).toBeLessThanOrEqual(i * 500)
    expect(waitedMs).toBeGreaterThan(i * 500 - 500)
  })
  const refused = replies.find((r) => r.status === 429)!
  expect(refused.body.detail).toBe('Rate limit 2-per-s-queue-2000ms exceeded; retry in 1 s.')
}
