import { InvalidOptionError, slidingLog } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { UNLIMITED } from '../src/rules/unlimited.ts'
import { admitted, catchError, denied, harness } from './support.ts'

const rule = (limit: number, windowMs: number) => slidingLog({ limit, windowMs })

describe('slidingLog', () => {
  it('counts an entry admitted at t while now < t + windowMs: edge - 1, edge, edge + 1', async () => {
    const h = harness([rule(1, 1000)])
    expect(await h.at(0)).toEqual(admitted(0, 1000))
    expect(await h.at(999)).toEqual(denied(0, 1, 1))
    expect(await h.at(1000)).toEqual(admitted(0, 1000))
    expect(await h.at(1001)).toEqual(denied(0, 999, 999))
  })

  it('tells a denied call when enough of the oldest units expire for its cost', async () => {
    const h = harness([rule(3, 1000)])
    expect(await h.at(0, { cost: 2 })).toEqual(admitted(1, 1000))
    expect(await h.at(500)).toEqual(admitted(0, 1000))
    expect(await h.at(999)).toEqual(denied(0, 501, 1))
    expect(await h.at(1000)).toEqual(admitted(1, 1000))
    expect(await h.at(1000, { cost: 3 })).toEqual(denied(1, 1000, 1000))
    expect(await h.at(1000, { cost: 2 })).toEqual(denied(1, 1000, 500))
    expect(await h.at(1499, { cost: 2 })).toEqual(denied(1, 501, 1))
    expect(await h.at(1500, { cost: 2 })).toEqual(admitted(0, 1000))
  })

  it('counts several calls in the same millisecond, and their units expire together', async () => {
    const h = harness([rule(5, 100)])
    expect(await h.at(7)).toEqual(admitted(4, 100))
    expect(await h.at(7, { cost: 2 })).toEqual(admitted(2, 100))
    expect(await h.at(7, { cost: 2 })).toEqual(admitted(0, 100))
    expect(await h.at(50)).toEqual(denied(0, 57, 57))
    expect(await h.at(50, { cost: 5 })).toEqual(denied(0, 57, 57))
    expect(await h.at(107, { cost: 5 })).toEqual(admitted(0, 100))
  })

  it('a denied call changes nothing: the same call again gets the same answer', async () => {
    const h = harness([rule(2, 1000)])
    await h.at(100)
    await h.at(400)
    const first = await h.at(500)
    expect(first).toEqual(denied(0, 900, 600))
    expect(await h.at(500)).toEqual(first)
    expect(await h.peekAt(500)).toEqual(first)
    expect(await h.at(1100)).toEqual(admitted(0, 1000))
  })

  it('peek answers what consume would, and changes nothing', async () => {
    const h = harness([rule(2, 1000)])
    expect(await h.peekAt(0, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.peekAt(0, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(0)).toEqual(admitted(1, 1000))
    expect(await h.peekAt(10, { cost: 2 })).toEqual(denied(1, 990, 990))
    expect(await h.peekAt(10)).toEqual(admitted(0, 1000))
    expect(await h.at(10)).toEqual(admitted(0, 1000))
  })

  it('survives time jumps of 1 ms, exactly one window and 10^9 ms', async () => {
    const h = harness([rule(2, 1000)])
    expect(await h.at(0, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(1)).toEqual(denied(0, 999, 999))
    expect(await h.at(1000, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(1_000_001_000, { cost: 2 })).toEqual(admitted(0, 1000))
    expect(await h.at(1_000_001_999)).toEqual(denied(0, 1, 1))
  })

  it('stays exact over a long trace that keeps compacting the log', async () => {
    // Every 10 ms for 3 s against 50 per second: the log fills in 500 ms, then each half second
    // alternates between all denied and all admitted as the entries of a second ago expire.
    const h = harness([rule(50, 1000)])
    let admittedCount = 0
    for (let t = 0; t < 3000; t += 10) {
      const d = await h.at(t)
      const expected = Math.floor(t / 500) % 2 === 0
      expect(d.allowed).toBe(expected)
      if (d.allowed) admittedCount++
      else expect(d.retryAfterMs).toBe(500 - (t % 500))
    }
    expect(admittedCount).toBe(150)
  })

  it('has a name, an id and a policy window derived from its numbers', () => {
    const r = rule(100, 60_000)
    expect(r).toEqual({ kind: 'slidingLog', limit: 100, windowMs: 60_000 })
    expect(r).toMatchObject({ id: 'slidingLog:60000', name: '100-per-60s', policyWindowSeconds: 60 })
    expect(JSON.stringify(r)).toBe('{"kind":"slidingLog","limit":100,"windowMs":60000}')
    expect(rule(2, 250)).toMatchObject({ name: '2-per-250ms', policyWindowSeconds: 1 })
    expect(slidingLog({ limit: 2, windowMs: 250, name: 'login' }).name).toBe('login')
    expect(Object.isFrozen(rule(1, 1))).toBe(true)
  })

  it('returns the unlimited marker for limit -1', () => {
    expect(slidingLog({ limit: -1, windowMs: 1000 })).toBe(UNLIMITED)
  })

  it.each([
    [{ limit: 0, windowMs: 1000 }, 'slidingLog.limit'],
    [{ limit: Number.NaN, windowMs: 1000 }, 'slidingLog.limit'],
    [{ limit: 2 ** 53, windowMs: 1000 }, 'slidingLog.limit'],
    [{ limit: 2 ** 50 + 1, windowMs: 1000 }, 'slidingLog.limit'],
    [{ limit: 1, windowMs: -5 }, 'slidingLog.windowMs'],
    [{ limit: 1, windowMs: '1000' }, 'slidingLog.windowMs'],
    [{ limit: 1, windowMs: 1000, name: 'x'.repeat(129) }, 'slidingLog.name'],
    [{ limit: 1, windowMs: 1000, name: ' padded' }, 'slidingLog.name'],
    [{ limit: 1, windowMs: 1000, max: 5 }, 'slidingLog.max'],
    ['100/s', 'slidingLog'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => slidingLog(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })
})
