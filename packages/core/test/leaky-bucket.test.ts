import { InvalidOptionError, leakyBucket } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { admitted, catchError, denied, harness } from './support.ts'

const rule = (ratePerSecond: number, maxQueueMs?: number) => leakyBucket({ ratePerSecond, maxQueueMs })

/** A realistic `Date.now()`, where a double keeps only about 1/4096 ms of precision. */
const EPOCH = 1_700_000_000_000
const MAX_TIMER = 2 ** 31 - 1

describe('leakyBucket', () => {
  it('with maxQueueMs 0 is a strict meter: one call per interval, never a wait', async () => {
    const h = harness([rule(10)])
    expect(await h.at(0)).toEqual(admitted(0, 100))
    expect(await h.at(50)).toEqual(denied(0, 50, 50))
    expect(await h.at(99)).toEqual(denied(0, 1, 1))
    expect(await h.at(100)).toEqual(admitted(0, 100))
    expect(await h.at(201)).toEqual(admitted(0, 100))
    expect(await h.at(300)).toEqual(denied(0, 1, 1))
  })

  it('queues calls in slots one interval apart, each waiting until its slot', async () => {
    const h = harness([rule(10, 300)])
    expect(await h.at(1000)).toEqual(admitted(3, 100, 0))
    expect(await h.at(1000)).toEqual(admitted(2, 200, 100))
    expect(await h.at(1000)).toEqual(admitted(1, 300, 200))
    expect(await h.at(1000)).toEqual(admitted(0, 400, 300))
    // The next slot, 1400, is more than maxQueueMs ahead: retry at 1400 - 300.
    expect(await h.at(1000)).toEqual(denied(0, 400, 100))
    expect(await h.at(1000)).toEqual(denied(0, 400, 100))
    expect(await h.at(1099)).toEqual(denied(0, 301, 1))
    expect(await h.at(1100)).toEqual(admitted(0, 400, 300))
  })

  it('charges a call cost intervals after the previous one; a call finding the bucket drained passes now', async () => {
    const h = harness([rule(10, 500)])
    expect(await h.at(0, { cost: 3 })).toEqual(admitted(5, 100, 0))
    expect(await h.at(0, { cost: 3 })).toEqual(admitted(2, 400, 300))
    expect(await h.at(0, { cost: 3 })).toEqual(denied(2, 400, 100))
    expect(await h.at(0, { cost: 2 })).toEqual(admitted(0, 600, 500))
  })

  it('gives exact slots for an interval that is not a whole number of ms (3 per second)', async () => {
    for (const start of [0, EPOCH]) {
      const h = harness([rule(3, 1000)])
      expect(await h.at(start)).toEqual(admitted(3, 334, 0))
      expect(await h.at(start)).toEqual(admitted(2, 667, 334))
      expect(await h.at(start)).toEqual(admitted(1, 1000, 667))
      expect(await h.at(start)).toEqual(admitted(0, 1334, 1000))
      expect(await h.at(start)).toEqual(denied(0, 1334, 334))
      expect(await h.at(start + 333)).toEqual(denied(0, 1001, 1))
      expect(await h.at(start + 334)).toEqual(admitted(0, 1333, 1000))
    }
  })

  it('gives exact slots at 7 per second, where 7 intervals make exactly one second', async () => {
    for (const start of [0, EPOCH]) {
      const h = harness([rule(7, 1000)])
      for (let k = 0; k < 8; k++) {
        expect(await h.at(start)).toEqual(
          admitted(7 - k, Math.ceil(((k + 1) * 1000) / 7), Math.ceil((k * 1000) / 7)),
        )
      }
      expect(await h.at(start)).toEqual(denied(0, 1143, 143))
      expect(await h.at(start + 142)).toEqual(denied(0, 1001, 1))
      expect(await h.at(start + 143)).toEqual(admitted(0, 1143, 1000))
    }
  })

  it('drains over time: 1 ms, exactly the queue, and 10^9 ms later', async () => {
    const h = harness([rule(10, 200)])
    expect(await h.at(0)).toEqual(admitted(2, 100, 0))
    expect(await h.at(0)).toEqual(admitted(1, 200, 100))
    expect(await h.at(0)).toEqual(admitted(0, 300, 200))
    expect(await h.at(1)).toEqual(denied(0, 299, 99))
    expect(await h.at(300)).toEqual(admitted(2, 100, 0))
    expect(await h.at(1_000_000_300)).toEqual(admitted(2, 100, 0))
  })

  it('a denied call changes nothing, and peek never does', async () => {
    const h = harness([rule(5, 200)])
    expect(await h.peekAt(0)).toEqual(admitted(1, 200, 0))
    expect(await h.peekAt(0)).toEqual(admitted(1, 200, 0))
    expect(await h.at(0)).toEqual(admitted(1, 200, 0))
    expect(await h.peekAt(0)).toEqual(admitted(0, 400, 200))
    expect(await h.at(0)).toEqual(admitted(0, 400, 200))
    expect(await h.at(0)).toEqual(denied(0, 400, 200))
    expect(await h.peekAt(0)).toEqual(denied(0, 400, 200))
    expect(await h.at(0)).toEqual(denied(0, 400, 200))
  })

  it('derives limit, interval, name, id and policy window from its numbers', () => {
    const r = rule(5, 600)
    expect(r).toEqual({ kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 600 })
    expect(r).toMatchObject({
      id: 'leakyBucket',
      name: '5-per-s-queue-600ms',
      policyWindowSeconds: 1,
      intervalMs: 200,
      limit: 4,
    })
    expect(JSON.stringify(r)).toBe('{"kind":"leakyBucket","ratePerSecond":5,"maxQueueMs":600}')
    expect(rule(2)).toMatchObject({
      maxQueueMs: 0,
      limit: 1,
      id: 'leakyBucket',
      name: '2-per-s-queue-0ms',
    })
    expect(rule(0.5, 10_000)).toMatchObject({ intervalMs: 2000, limit: 6, policyWindowSeconds: 12 })
    expect(rule(7, 1000).limit).toBe(8)
    expect(leakyBucket({ ratePerSecond: 1, name: 'outbound' }).name).toBe('outbound')
    expect(Object.isFrozen(rule(1))).toBe(true)
  })

  it.each([
    [{ ratePerSecond: 0 }, 'leakyBucket.ratePerSecond'],
    [{ ratePerSecond: -1 }, 'leakyBucket.ratePerSecond'],
    [{ ratePerSecond: Number.NaN }, 'leakyBucket.ratePerSecond'],
    [{ ratePerSecond: Number.POSITIVE_INFINITY }, 'leakyBucket.ratePerSecond'],
    [{}, 'leakyBucket.ratePerSecond'],
    [{ ratePerSecond: 5, maxQueueMs: -1 }, 'leakyBucket.maxQueueMs'],
    [{ ratePerSecond: 5, maxQueueMs: 1.5 }, 'leakyBucket.maxQueueMs'],
    [{ ratePerSecond: 5, maxQueueMs: '100' }, 'leakyBucket.maxQueueMs'],
    [{ ratePerSecond: 5, maxQueueMs: null }, 'leakyBucket.maxQueueMs'],
    [{ ratePerSecond: 5, name: '' }, 'leakyBucket.name'],
    [{ ratePerSecond: 5, capacity: 10 }, 'leakyBucket.capacity'],
    [null, 'leakyBucket'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => leakyBucket(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })

  it('rejects a queue of more than 2^50 units (1e16 a second over 1000 ms hung the factory)', () => {
    const error = catchError(() => leakyBucket({ ratePerSecond: 1e16, maxQueueMs: 1000 }))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({
      code: 'ERR_SLUICE_INVALID_OPTION',
      option: 'leakyBucket.ratePerSecond',
      value: 1e16,
    })
    expect(rule(2 ** 50, 1000).limit).toBe(2 ** 50 + 1)
    expect(() => rule(2 ** 50 * 1.001, 1000)).toThrowError(InvalidOptionError)
  })

  it('rejects a rate so slow that one interval passes 2^50 ms', () => {
    const error = catchError(() => leakyBucket({ ratePerSecond: 1e-13 }))
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option: 'leakyBucket.ratePerSecond' })
    expect(rule(1000 / 2 ** 50).intervalMs).toBe(2 ** 50)
  })

  it.each([
    [2 ** 50, 1000],
    [1e12, 1000],
    [5e8, MAX_TIMER],
    [1000 / 2 ** 50, 0],
    [1000 / 2 ** 50, MAX_TIMER],
  ])('at the edge of its range (rate %d, maxQueueMs %d) tells the exact retry', async (rate, maxQueueMs) => {
    const r = rule(rate, maxQueueMs)
    const h = harness([r])
    // The first call finds the bucket drained and passes at once; the rest fill the queue to the brim.
    expect((await h.at(EPOCH)).allowed).toBe(true)
    if (r.limit > 1) expect((await h.at(EPOCH, { cost: r.limit - 1 })).allowed).toBe(true)
    for (const cost of [1, r.limit]) {
      const d = await h.peekAt(EPOCH, { cost })
      expect(d.allowed).toBe(false)
      expect((await h.peekAt(EPOCH + d.retryAfterMs - 1, { cost })).allowed).toBe(false)
      expect((await h.peekAt(EPOCH + d.retryAfterMs, { cost })).allowed).toBe(true)
    }
  })

  it('rejects a strict meter (maxQueueMs 0) faster than 1000 a second, which passed only 1000 a second', () => {
    const error = catchError(() => leakyBucket({ ratePerSecond: 10_000 }))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({
      code: 'ERR_SLUICE_INVALID_OPTION',
      option: 'leakyBucket.ratePerSecond',
      value: 10_000,
    })
    expect((error as Error).message).toMatch(/maxQueueMs 0/)
    expect(rule(1000).limit).toBe(1)
  })

  it('meters a rate above 1000 a second exactly once it may queue 1 ms: 10 calls in each ms', async () => {
    const h = harness([rule(10_000, 1)], EPOCH)
    let admitted = 0
    for (let t = EPOCH; t < EPOCH + 1000; t++) {
      let d = await h.at(t)
      while (d.allowed) {
        admitted++
        d = await h.at(t)
      }
    }
    // One every 0.1 ms: slots EPOCH, EPOCH + 0.1, ..., up to the last ms plus its 1 ms of queue.
    expect(admitted).toBe(10_001)
  })

  it('at 1000 a second with maxQueueMs 0 passes exactly one call in each ms', async () => {
    const h = harness([rule(1000)], EPOCH)
    let admitted = 0
    for (let t = EPOCH; t < EPOCH + 1000; t++) {
      if ((await h.at(t)).allowed) admitted++
      expect((await h.at(t)).allowed).toBe(false)
    }
    expect(admitted).toBe(1000)
  })
})
