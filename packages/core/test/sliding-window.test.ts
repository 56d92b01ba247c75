import { InvalidOptionError, slidingWindow } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { MAX_BUCKETS } from '../src/rules/sliding-window.ts'
import { UNLIMITED } from '../src/rules/unlimited.ts'
import { admitted, catchError, denied, harness } from './support.ts'

/** limit 4 per 1000 ms in 4 buckets of 250 ms. */
const rule = (limit = 4, windowMs = 1000, buckets = 4) => slidingWindow({ limit, windowMs, buckets })

describe('slidingWindow', () => {
  it('sums the current bucket and the buckets - 1 before it', async () => {
    const h = harness([rule()])
    expect(await h.at(0)).toEqual(admitted(3, 1000))
    expect(await h.at(260, { cost: 2 })).toEqual(admitted(1, 990))
    expect(await h.at(999)).toEqual(admitted(0, 751))
    // Full: the bucket at 0 expires first, at 1000.
    expect(await h.at(999)).toEqual(denied(0, 751, 1))
    // At 1000 the bucket starting at 0 is gone: edge - 1 above, edge here.
    expect(await h.at(1000)).toEqual(admitted(0, 1000))
    // Cost 2 needs the 2 units of the bucket starting at 250, gone at 1250.
    expect(await h.at(1000, { cost: 2 })).toEqual(denied(0, 1000, 250))
    expect(await h.at(1249, { cost: 2 })).toEqual(denied(0, 751, 1))
    expect(await h.at(1250, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(1251)).toEqual(denied(0, 999, 499))
  })

  it('lives a bucket starting at s until s + windowMs exactly: edge - 1, edge, edge + 1', async () => {
    const h = harness([rule(1, 1000, 4)])
    expect(await h.at(300)).toEqual(admitted(0, 950))
    expect(await h.at(1249)).toEqual(denied(0, 1, 1))
    expect(await h.at(1250)).toEqual(admitted(0, 1000))
    expect(await h.at(1251)).toEqual(denied(0, 999, 999))
  })

  it('walks as many buckets as a large cost needs, skipping empty ones', async () => {
    const h = harness([slidingWindow({ limit: 10, windowMs: 1000, buckets: 10 })])
    expect(await h.at(0, { cost: 3 })).toEqual(admitted(7, 1000))
    expect(await h.at(350, { cost: 3 })).toEqual(admitted(4, 950))
    expect(await h.at(720, { cost: 4 })).toEqual(admitted(0, 980))
    // 10 live units; cost 7 needs 7 to expire: buckets 0 (3) and 300 (3) are not enough, 700 (4) is.
    expect(await h.at(800, { cost: 7 })).toEqual(denied(0, 900, 900))
    expect(await h.at(800, { cost: 6 })).toEqual(denied(0, 900, 500))
    expect(await h.at(800, { cost: 3 })).toEqual(denied(0, 900, 200))
    expect(await h.at(1299, { cost: 6 })).toEqual(denied(3, 401, 1))
    expect(await h.at(1300, { cost: 6 })).toEqual(admitted(0, 1000))
  })

  it('resets stale buckets however far time jumps, including exactly one window', async () => {
    const h = harness([rule(2, 1000, 4)])
    expect(await h.at(100, { cost: 2 })).toEqual(admitted(0, 900))
    // One window later the same ring slot holds a new bucket: the old count must not leak into it.
    expect(await h.at(1100)).toEqual(admitted(1, 900))
    expect(await h.at(1101)).toEqual(admitted(0, 899))
    expect(await h.at(1102)).toEqual(denied(0, 898, 898))
    expect(await h.at(1_000_001_100, { cost: 2 })).toEqual(admitted(0, 900))
    expect(await h.at(1_000_001_101)).toEqual(denied(0, 899, 899))
  })

  it('a denied call changes nothing, and peek never does', async () => {
    const h = harness([rule(2, 1000, 4)])
    expect(await h.peekAt(0, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(0)).toEqual(admitted(1, 1000))
    expect(await h.at(600, { cost: 2 })).toEqual(denied(1, 400, 400))
    expect(await h.at(600, { cost: 2 })).toEqual(denied(1, 400, 400))
    expect(await h.peekAt(600)).toEqual(admitted(0, 900))
    expect(await h.peekAt(600)).toEqual(admitted(0, 900))
    expect(await h.at(600)).toEqual(admitted(0, 900))
    expect(await h.peekAt(999)).toEqual(denied(0, 501, 1))
  })

  it('defaults to 10 buckets and derives name, id and policy window from its numbers', () => {
    const r = slidingWindow({ limit: 1000, windowMs: 60_000 })
    expect(r).toEqual({ kind: 'slidingWindow', limit: 1000, windowMs: 60_000, buckets: 10 })
    expect(r).toMatchObject({
      id: 'slidingWindow:60000:10',
      name: '1000-per-60s',
      policyWindowSeconds: 60,
      bucketMs: 6000,
    })
    expect(JSON.stringify(r)).toBe('{"kind":"slidingWindow","limit":1000,"windowMs":60000,"buckets":10}')
    expect(rule(4, 1000, 4)).toMatchObject({ id: 'slidingWindow:1000:4', bucketMs: 250 })
    expect(slidingWindow({ limit: 4, windowMs: 1000, buckets: undefined })).toMatchObject({ buckets: 10 })
    expect(slidingWindow({ limit: 4, windowMs: 1000, name: 'api' }).name).toBe('api')
    expect(slidingWindow({ limit: 4, windowMs: 1000, buckets: MAX_BUCKETS })).toMatchObject({ bucketMs: 1 })
  })

  it('returns the unlimited marker for limit -1', () => {
    expect(slidingWindow({ limit: -1, windowMs: 1000 })).toBe(UNLIMITED)
  })

  it.each([
    [{ limit: 0, windowMs: 1000 }, 'slidingWindow.limit'],
    [{ limit: 4, windowMs: 0 }, 'slidingWindow.windowMs'],
    [{ limit: 4, windowMs: 1000, buckets: 0 }, 'slidingWindow.buckets'],
    [{ limit: 4, windowMs: 1000, buckets: 3 }, 'slidingWindow.buckets'],
    [{ limit: 4, windowMs: 1000, buckets: 2.5 }, 'slidingWindow.buckets'],
    [{ limit: 4, windowMs: 1000, buckets: null }, 'slidingWindow.buckets'],
    [{ limit: 4, windowMs: 2000, buckets: 2000 }, 'slidingWindow.buckets'],
    [{ limit: -1, windowMs: 1000, buckets: 7 }, 'slidingWindow.buckets'],
    [{ limit: 4, windowMs: 1000, name: 7 }, 'slidingWindow.name'],
    [{ limit: 4, windowMs: 1000, bucket: 10 }, 'slidingWindow.bucket'],
    [undefined, 'slidingWindow'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => slidingWindow(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })
})
