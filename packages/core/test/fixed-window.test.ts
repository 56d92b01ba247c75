import { fixedWindow, InvalidOptionError } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { alignedStart } from '../src/rules/algorithm.ts'
import { isUnlimited, UNLIMITED } from '../src/rules/unlimited.ts'
import { admitted, catchError, denied, harness } from './support.ts'

const rule = (limit: number, windowMs: number) => fixedWindow({ limit, windowMs })

describe('fixedWindow', () => {
  it('counts per window aligned to multiples of windowMs since the epoch', async () => {
    const h = harness([rule(3, 1000)])
    expect(await h.at(1500)).toEqual(admitted(2, 500))
    expect(await h.at(1999, { cost: 2 })).toEqual(admitted(0, 1))
    expect(await h.at(1999)).toEqual(denied(0, 1, 1))
    expect(await h.at(2000)).toEqual(admitted(2, 1000))
  })

  it('switches windows exactly at the edge: edge - 1 is the old window, edge and edge + 1 the new', async () => {
    const h = harness([rule(2, 1000)])
    expect(await h.at(0, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(999)).toEqual(denied(0, 1, 1))
    expect(await h.at(1000)).toEqual(admitted(1, 1000))
    expect(await h.at(1001)).toEqual(admitted(0, 999))
    expect(await h.at(1001)).toEqual(denied(0, 999, 999))
  })

  it('admits up to twice the limit across a window edge, as documented', async () => {
    const h = harness([rule(5, 1000)])
    expect(await h.at(999, { cost: 5 })).toEqual(admitted(0, 1))
    expect(await h.at(1000, { cost: 5 })).toEqual(admitted(0, 1000))
  })

  it('weighs cost against what is left, and a denied cost leaves the rest usable', async () => {
    const h = harness([rule(5, 1000)])
    expect(await h.at(10, { cost: 4 })).toEqual(admitted(1, 990))
    expect(await h.at(20, { cost: 2 })).toEqual(denied(1, 980, 980))
    expect(await h.at(20, { cost: 2 })).toEqual(denied(1, 980, 980))
    expect(await h.at(30, { cost: 1 })).toEqual(admitted(0, 970))
  })

  it('starts a fresh window after a 1 ms, a one-window and a 10^9 ms jump', async () => {
    const h = harness([rule(1, 100)])
    expect(await h.at(99)).toEqual(admitted(0, 1))
    expect(await h.at(100)).toEqual(admitted(0, 100))
    expect(await h.at(200)).toEqual(admitted(0, 100))
    expect(await h.at(200)).toEqual(denied(0, 100, 100))
    expect(await h.at(1_000_000_200)).toEqual(admitted(0, 100))
    expect(await h.at(1_000_000_250)).toEqual(denied(0, 50, 50))
  })

  it('keeps keys apart', async () => {
    const h = harness([rule(1, 1000)])
    expect(await h.at(0, { key: 'a' })).toEqual(admitted(0, 1000))
    expect(await h.at(0, { key: 'b' })).toEqual(admitted(0, 1000))
    expect(await h.at(0, { key: 'a' })).toEqual(denied(0, 1000, 1000))
  })

  it('peek answers what consume would, and changes nothing', async () => {
    const h = harness([rule(2, 1000)])
    expect(await h.peekAt(0)).toEqual(admitted(1, 1000))
    expect(await h.peekAt(0)).toEqual(admitted(1, 1000))
    expect(await h.at(0)).toEqual(admitted(1, 1000))
    expect(await h.peekAt(5, { cost: 2 })).toEqual(denied(1, 995, 995))
    expect(await h.at(5)).toEqual(admitted(0, 995))
    expect(await h.peekAt(6)).toEqual(denied(0, 994, 994))
  })

  it('has a name, an id and a policy window derived from its numbers', () => {
    const r = rule(100, 60_000)
    expect(r).toEqual({ kind: 'fixedWindow', limit: 100, windowMs: 60_000 })
    expect(r).toMatchObject({ id: 'fixedWindow:60000', name: '100-per-60s', policyWindowSeconds: 60 })
    expect(JSON.stringify(r)).toBe('{"kind":"fixedWindow","limit":100,"windowMs":60000}')
    const odd = rule(5, 1500)
    expect(odd).toMatchObject({ name: '5-per-1500ms', policyWindowSeconds: 2 })
    expect(Object.isFrozen(odd)).toBe(true)
    expect(fixedWindow({ limit: 5, windowMs: 1500, name: 'burst' })).toMatchObject({
      name: 'burst',
      id: 'fixedWindow:1500@burst',
    })
    expect(fixedWindow({ limit: 5, windowMs: 1500, name: undefined }).name).toBe('5-per-1500ms')
  })

  it('returns the unlimited marker for limit -1', () => {
    const r = fixedWindow({ limit: -1, windowMs: 1000 })
    expect(r).toBe(UNLIMITED)
    expect(isUnlimited(r)).toBe(true)
  })

  it.each([
    [{ limit: 0, windowMs: 1000 }, 'fixedWindow.limit'],
    [{ limit: 1.5, windowMs: 1000 }, 'fixedWindow.limit'],
    [{ limit: -2, windowMs: 1000 }, 'fixedWindow.limit'],
    [{ limit: '5', windowMs: 1000 }, 'fixedWindow.limit'],
    [{ windowMs: 1000 }, 'fixedWindow.limit'],
    [{ limit: 5, windowMs: 0 }, 'fixedWindow.windowMs'],
    [{ limit: 5, windowMs: 10.5 }, 'fixedWindow.windowMs'],
    [{ limit: 5, windowMs: Number.POSITIVE_INFINITY }, 'fixedWindow.windowMs'],
    [{ limit: -1, windowMs: -1 }, 'fixedWindow.windowMs'],
    [{ limit: 5, windowMs: 1000, name: '' }, 'fixedWindow.name'],
    [{ limit: 5, windowMs: 1000, name: 'a"b' }, 'fixedWindow.name'],
    [{ limit: 5, windowMs: 1000, windowMS: 10 }, 'fixedWindow.windowMS'],
    [null, 'fixedWindow'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => fixedWindow(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })
})

describe('alignedStart', () => {
  const byRemainder = (now: number, size: number) => now - (now % size)

  it('is now - now % size to the last bit, for whole and fractional clock readings and the ms before a boundary', () => {
    const sizes = [1, 7, 1000, 60_000, 3_600_000, 86_400_000]
    let seed = 1
    const random = () => {
      seed = (seed * 48_271) % 2_147_483_647
      return seed / 2_147_483_647
    }
    for (const size of sizes) {
      for (let i = 0; i < 2000; i++) {
        const whole = Math.floor(random() * 2 ** 42)
        expect(alignedStart(whole, size)).toBe(byRemainder(whole, size))
        const fraction = whole + random()
        expect(alignedStart(fraction, size)).toBe(byRemainder(fraction, size))
        // Just below a boundary: the closest reading below a multiple of size, and a whole ms below.
        const boundary = Math.ceil(whole / size) * size
        for (const below of [boundary - 1, boundary - boundary * Number.EPSILON]) {
          expect(alignedStart(below, size)).toBe(byRemainder(below, size))
        }
      }
    }
  })
})
