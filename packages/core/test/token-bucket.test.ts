import { InvalidOptionError, tokenBucket } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { UNLIMITED } from '../src/rules/unlimited.ts'
import { admitted, catchError, denied, harness } from './support.ts'

const rule = (capacity: number, refillPerSecond: number) => tokenBucket({ capacity, refillPerSecond })

/** A realistic `Date.now()`. */
const EPOCH = 1_700_000_000_000

describe('tokenBucket', () => {
  it('starts full: a new key may spend the whole capacity at once', async () => {
    const h = harness([rule(5, 2)])
    expect(await h.at(123_456, { cost: 5 })).toEqual(admitted(0, 2500))
    expect(await h.at(123_456)).toEqual(denied(0, 2500, 500))
  })

  it('refills continuously; a retry exactly retryAfterMs later is admitted, 1 ms earlier is not', async () => {
    const h = harness([rule(5, 2)])
    expect(await h.at(0)).toEqual(admitted(4, 500))
    expect(await h.at(0, { cost: 4 })).toEqual(admitted(0, 2500))
    expect(await h.at(0)).toEqual(denied(0, 2500, 500))
    expect(await h.at(499)).toEqual(denied(0, 2001, 1))
    expect(await h.at(500)).toEqual(admitted(0, 2500))
    expect(await h.at(500, { cost: 2 })).toEqual(denied(0, 2500, 1000))
    expect(await h.at(1499, { cost: 2 })).toEqual(denied(1, 1501, 1))
    expect(await h.at(1500, { cost: 2 })).toEqual(admitted(0, 2500))
  })

  it('never holds more than capacity, however long the key was idle', async () => {
    const h = harness([rule(3, 1)])
    expect(await h.at(0, { cost: 3 })).toEqual(admitted(0, 3000))
    expect(await h.at(1_000_000_000)).toEqual(admitted(2, 1000))
    expect(await h.at(1_000_000_000, { cost: 2 })).toEqual(admitted(0, 3000))
    expect(await h.at(1_000_000_000)).toEqual(denied(0, 3000, 1000))
  })

  it('handles refill rates whose token interval is not a whole number of ms', async () => {
    // 3 tokens per second: one every 333.33 ms.
    const h = harness([rule(2, 3)])
    expect(await h.at(0, { cost: 2 })).toEqual(admitted(0, 667))
    expect(await h.at(0)).toEqual(denied(0, 667, 334))
    expect(await h.at(333)).toEqual(denied(0, 334, 1))
    expect(await h.at(334)).toEqual(admitted(0, 666))
    expect(await h.at(1000, { cost: 2 })).toEqual(admitted(0, 667))
  })

  it('handles refill rates below one per second', async () => {
    const h = harness([rule(1, 0.5)])
    expect(await h.at(10)).toEqual(admitted(0, 2000))
    expect(await h.at(2009)).toEqual(denied(0, 1, 1))
    expect(await h.at(2010)).toEqual(admitted(0, 2000))
  })

  it('a denied call changes nothing, and peek never does', async () => {
    const h = harness([rule(4, 1)])
    expect(await h.peekAt(0, { cost: 4 })).toEqual(admitted(0, 4000))
    expect(await h.at(0, { cost: 3 })).toEqual(admitted(1, 3000))
    expect(await h.at(100, { cost: 3 })).toEqual(denied(1, 2900, 1900))
    expect(await h.at(100, { cost: 3 })).toEqual(denied(1, 2900, 1900))
    expect(await h.peekAt(100)).toEqual(admitted(0, 3900))
    expect(await h.peekAt(100)).toEqual(admitted(0, 3900))
    expect(await h.at(2000, { cost: 3 })).toEqual(admitted(0, 4000))
  })

  it('has a name, an id and a policy window derived from its numbers', () => {
    const r = rule(10, 2)
    expect(r).toEqual({ kind: 'tokenBucket', capacity: 10, refillPerSecond: 2 })
    expect(r).toMatchObject({ id: 'tokenBucket', name: '10-burst-2-per-s', policyWindowSeconds: 5 })
    expect(JSON.stringify(r)).toBe('{"kind":"tokenBucket","capacity":10,"refillPerSecond":2}')
    expect(rule(1, 0.3)).toMatchObject({ name: '1-burst-0.3-per-s', policyWindowSeconds: 4 })
    expect(tokenBucket({ capacity: 1, refillPerSecond: 1, name: 'tb' }).name).toBe('tb')
    expect(Object.isFrozen(rule(1, 1))).toBe(true)
  })

  it('returns the unlimited marker for capacity -1', () => {
    expect(tokenBucket({ capacity: -1, refillPerSecond: 1 })).toBe(UNLIMITED)
  })

  it.each([
    [{ capacity: 0, refillPerSecond: 1 }, 'tokenBucket.capacity'],
    [{ capacity: 1.5, refillPerSecond: 1 }, 'tokenBucket.capacity'],
    [{ refillPerSecond: 1 }, 'tokenBucket.capacity'],
    [{ capacity: 5, refillPerSecond: 0 }, 'tokenBucket.refillPerSecond'],
    [{ capacity: 5, refillPerSecond: -1 }, 'tokenBucket.refillPerSecond'],
    [{ capacity: 5, refillPerSecond: Number.NaN }, 'tokenBucket.refillPerSecond'],
    [{ capacity: 5, refillPerSecond: Number.POSITIVE_INFINITY }, 'tokenBucket.refillPerSecond'],
    [{ capacity: -1 }, 'tokenBucket.refillPerSecond'],
    [{ capacity: 5, refillPerSecond: 1, name: 'a\\b' }, 'tokenBucket.name'],
    [{ capacity: 5, refillPerSecond: 1, limit: 5 }, 'tokenBucket.limit'],
    [7, 'tokenBucket'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => tokenBucket(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })

  it('rejects a refill so slow that a wait passes 2^50 ms (1e-13 a second hung the first consume)', () => {
    const error = catchError(() => tokenBucket({ capacity: 10, refillPerSecond: 1e-13 }))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({
      code: 'ERR_SLUICE_INVALID_OPTION',
      option: 'tokenBucket.refillPerSecond',
      value: 1e-13,
    })
    expect((error as Error).message).toMatch(/a refill so slow that a wait passes 2\^50 ms/)
    // Just inside the range: an empty bucket of 10 fills in exactly 2^50 ms.
    expect(tokenBucket({ capacity: 10, refillPerSecond: 10_000 / 2 ** 50 })).toMatchObject({ capacity: 10 })
    expect(() => tokenBucket({ capacity: 10, refillPerSecond: 9_999 / 2 ** 50 })).toThrowError(
      InvalidOptionError,
    )
  })

  it('rejects a capacity whose thousandths would not be exact doubles', () => {
    const largest = Math.floor(Number.MAX_SAFE_INTEGER / 1000)
    expect(tokenBucket({ capacity: largest, refillPerSecond: 1e9 })).toMatchObject({ capacity: largest })
    const error = catchError(() => tokenBucket({ capacity: largest + 1, refillPerSecond: 1e9 }))
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option: 'tokenBucket.capacity' })
  })

  it.each([
    [10, 10_000 / 2 ** 50],
    [3, 3000 / 2 ** 50],
    [7, 0.1],
    [Math.floor(Number.MAX_SAFE_INTEGER / 1000), 1e9],
    [Math.floor(Number.MAX_SAFE_INTEGER / 1000), (9007199254740 / 2 ** 50) * 1000],
  ])('at the edge of its range (capacity %d, refill %d) tells the exact retry', async (capacity, refill) => {
    const h = harness([rule(capacity, refill)])
    const full = await h.at(EPOCH, { cost: capacity })
    expect(full.allowed).toBe(true)
    expect(full.resetMs).toBeLessThanOrEqual(2 ** 50)
    for (const cost of [1, capacity]) {
      const d = await h.peekAt(EPOCH, { cost })
      expect(d.allowed).toBe(false)
      expect((await h.peekAt(EPOCH + d.retryAfterMs - 1, { cost })).allowed).toBe(false)
      expect((await h.peekAt(EPOCH + d.retryAfterMs, { cost })).allowed).toBe(true)
    }
  })
})
