import { InvalidOptionError, leakyBucket } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { admitted, catchError, denied, harness } from './support.ts'

const rule = (ratePerSecond: number, maxQueueMs?: number) => leakyBucket({ ratePerSecond, maxQueueMs })

/** A realistic `Date.now()`, where a double keeps only about 1/4096 ms of precision. */
const EPOCH = 1_700_000_000_000

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
    expect(rule(5, 600)).toEqual({
      kind: 'leakyBucket',
      id: 'leakyBucket:5:600',
      name: '5-per-s-queue-600ms',
      policyWindowSeconds: 1,
      ratePerSecond: 5,
      maxQueueMs: 600,
      intervalMs: 200,
      limit: 4,
    })
    expect(rule(2)).toMatchObject({
      maxQueueMs: 0,
      limit: 1,
      id: 'leakyBucket:2:0',
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
})
