/** Rules written as text in the middleware's options, through a real Express server. */
import { ErrorCode } from '@sluice/core'
import { rateLimit } from '@sluice/express'
import { describe, expect, it } from 'vitest'
import { clocked, flavours, handler, listen } from './support.ts'

describe.each(flavours)('rules as text on $name', ({ express }) => {
  it("limits by rules: ['slidingLog:2/1s', 'fixedWindow:1000/1d'] with exact headers", async () => {
    const { store } = clocked()
    const app = express()
    app.use(rateLimit({ rules: ['slidingLog:2/1s', 'fixedWindow:1000/1d'], store }))
    app.get('/', handler().handle)
    const server = await listen(app)
    try {
      const statuses: number[] = []
      let last: Response | undefined
      for (let i = 0; i < 3; i++) {
        last = await fetch(server.url)
        statuses.push(last.status)
      }
      expect(statuses).toEqual([200, 200, 429])
      expect(last!.headers.get('retry-after')).toBe('1')
      expect(last!.headers.get('ratelimit-policy')).toBe(
        '"2-per-1s";q=2;w=1, "1000-per-86400s";q=1000;w=86400',
      )
    } finally {
      await server.close()
    }
  })

  it('refuses text outside the grammar when the middleware is built, naming the option', () => {
    expect(() => rateLimit({ rules: ['tokenBucket:50/s'] })).toThrow(
      expect.objectContaining({
        code: ErrorCode.INVALID_OPTION,
        option: 'rateLimit.rules[0]',
        value: 'tokenBucket:50/s',
      }),
    )
  })
})
