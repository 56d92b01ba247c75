import { ErrorCode, InvalidOptionError } from '@sluice/core'
import { type LiveStatsOptions, liveStats, type SecondCounts } from '@sluice/metrics'
import { afterEach, describe, expect, it } from 'vitest'
import { SpaceSaving } from '../src/live-stats.ts'
import { publishDecision, publishHttp } from './trace.ts'

let now = 0
const clock = () => now
const closers: { close(): void }[] = []
afterEach(() => {
  for (const c of closers.splice(0)) c.close()
})

function stats(options: LiveStatsOptions = {}) {
  const s = liveStats({ clock, ...options })
  closers.push(s)
  return s
}

/** `seconds` empty seconds ending at `last`, with `filled` overriding some of them. */
function series(last: number, seconds: number, filled: Record<number, Partial<SecondCounts>> = {}) {
  return Array.from({ length: seconds }, (_, i) => {
    const t = last - seconds + 1 + i
    return { t, allowed: 0, queued: 0, denied: 0, shadow: 0, ...filled[t] }
  })
}

const allow = (limiter: string, key: string) => publishDecision(limiter, key)
const queue = (limiter: string, key: string) => publishDecision(limiter, key, { waitMs: 100 })
const deny = (limiter: string, key: string) => publishDecision(limiter, key, { allowed: false })

describe('liveStats', () => {
  it('counts consumes per second and shadowed requests, and ranks the most denied keys', () => {
    const s = stats({ seconds: 5, topKeys: 2 })
    now = 1_000_200
    allow('api', 'a')
    allow('api', 'a')
    queue('api', 'b')
    deny('api', 'c')
    deny('api', 'c')
    deny('api', 'c')
    deny('api', 'd')
    publishDecision('api', 'e', { mode: 'peek', allowed: false }) // peeks are not counted
    publishHttp('api', 'm', 'shadow', '/pay', { allowed: false })
    publishHttp('api', 'c', 'deny', '/pay', { allowed: false }) // counted by its decision, not again
    now = 1_001_900
    deny('api', 'd')
    deny('api', 'd')
    deny('api', 'd')
    now = 1_003_000
    allow('pay', 'x')
    publishHttp('pay', 'x', 'shadow', undefined, { allowed: false })
    now = 1_003_500

    expect(s.snapshot()).toEqual({
      at: 1_003_500,
      seconds: 5,
      limiters: {
        api: {
          series: series(1003, 5, {
            1000: { allowed: 2, queued: 1, denied: 4, shadow: 1 },
            1001: { denied: 3 },
          }),
          topDenied: [
            { key: 'd', count: 4 },
            { key: 'c', count: 3 },
          ],
        },
        pay: { series: series(1003, 5, { 1003: { allowed: 1, shadow: 1 } }), topDenied: [] },
      },
    })
  })

  it('counts requests an overload guard shed as denied (a shadowed one also as shadow), with no key to rank', () => {
    const s = stats({ seconds: 2, topKeys: 2 })
    now = 2_000_100
    publishHttp('api', '', 'deny', '/pay', { allowed: false, rule: '', reason: 'overload' })
    publishHttp('api', '', 'deny', '/pay', { allowed: false, rule: '', reason: 'overload' })
    publishHttp('api', '', 'shadow', '/pay', { allowed: false, rule: '', reason: 'overload' })
    expect(s.snapshot().limiters).toEqual({
      api: { series: series(2000, 2, { 2000: { denied: 3, shadow: 1 } }), topDenied: [] },
    })
  })

  it('resets stale seconds when time jumps past the window, and forgets idle limiters', () => {
    const s = stats({ seconds: 5, topKeys: 3 })
    now = 1_000_000
    deny('api', 'old')
    allow('pay', 'x')
    now = 1_004_000
    deny('api', 'recent')
    // 1010 lands in the slot that held 1000, and the sketch slot that held period 200: both reset.
    now = 1_010_100
    deny('api', 'new')
    expect(s.snapshot()).toEqual({
      at: 1_010_100,
      seconds: 5,
      limiters: {
        api: { series: series(1010, 5, { 1010: { denied: 1 } }), topDenied: [{ key: 'new', count: 1 }] },
      },
    })
    // Nothing for a whole window: api is forgotten too.
    now = 1_015_000
    expect(s.snapshot()).toEqual({ at: 1_015_000, seconds: 5, limiters: {} })
    // A jump of years costs the same: one slot is reset.
    now = 1_000_000 + 86_400_000 * 3650
    allow('api', 'a')
    const t = Math.floor(now / 1000)
    expect(s.snapshot().limiters.api).toEqual({
      series: series(t, 5, { [t]: { allowed: 1 } }),
      topDenied: [],
    })
  })

  it('ranks denials of the current and the previous period of `seconds`', () => {
    const s = stats({ seconds: 5, topKeys: 5 })
    now = 1_004_000 // period 200
    deny('api', 'p200')
    now = 1_006_000 // period 201
    deny('api', 'p201')
    deny('api', 'p201')
    expect(s.snapshot().limiters.api!.topDenied).toEqual([
      { key: 'p201', count: 2 },
      { key: 'p200', count: 1 },
    ])
    now = 1_010_000 // period 202: period 200 is too old
    allow('api', 'a')
    expect(s.snapshot().limiters.api!.topDenied).toEqual([{ key: 'p201', count: 2 }])
  })

  it('drops an event older than the second its slot already holds', () => {
    const s = stats({ seconds: 5 })
    now = 1_009_000
    allow('api', 'a')
    now = 1_004_000 // the clock went back 5 s: slot 4 holds 1009
    allow('api', 'a')
    now = 1_009_000
    expect(s.snapshot().limiters.api!.series).toEqual(series(1009, 5, { 1009: { allowed: 1 } }))
  })

  it('keeps hostile limiter names and keys as plain data', () => {
    const s = stats({ seconds: 2, topKeys: 3 })
    now = 5_000
    const xss = '<img src=x onerror=alert(1)>'
    deny('__proto__', '__proto__')
    deny('__proto__', '__proto__')
    deny('__proto__', xss)
    deny('constructor', 'constructor')
    const snapshot = s.snapshot()
    expect(Object.getPrototypeOf(snapshot.limiters)).toBe(null)
    expect(Object.keys(snapshot.limiters)).toEqual(['__proto__', 'constructor'])
    expect(Object.getPrototypeOf({})).toBe(Object.prototype) // nothing was polluted
    const parsed = JSON.parse(JSON.stringify(snapshot))
    expect(Object.keys(parsed.limiters)).toEqual(['__proto__', 'constructor'])
    expect(Object.getOwnPropertyDescriptor(parsed.limiters, '__proto__')?.value).toEqual({
      series: series(5, 2, { 5: { denied: 3 } }),
      topDenied: [
        { key: '__proto__', count: 2 },
        { key: xss, count: 1 },
      ],
    })
    expect(parsed.limiters.constructor.topDenied).toEqual([{ key: 'constructor', count: 1 }])
  })

  it('finds a hot key among 10,000 distinct denied keys, reporting at most topKeys', () => {
    const s = stats({ seconds: 60, topKeys: 20 })
    now = 1_000_000
    let hot = 0
    for (let i = 0; i < 10_000; i++) {
      deny('api', `flood-${i}`)
      if (i % 20 === 0) {
        deny('api', 'hot')
        hot++
      }
    }
    const top = s.snapshot().limiters.api!.topDenied
    expect(hot).toBe(500)
    expect(top.length).toBe(20)
    // Held from its first denial and never the least counted: its count is exact.
    expect(top[0]).toEqual({ key: 'hot', count: 500 })
    expect(s.snapshot().limiters.api!.series.at(-1)).toEqual({
      t: 1000,
      allowed: 0,
      queued: 0,
      denied: 10_500,
      shadow: 0,
    })
  })

  it('tracks at most maxLimiters limiters, taking new ones once old ones are idle for a window', () => {
    const s = stats({ seconds: 2, maxLimiters: 2 })
    now = 10_000
    allow('a', 'k')
    allow('b', 'k')
    allow('c', 'k') // not tracked: two already are
    expect(Object.keys(s.snapshot().limiters)).toEqual(['a', 'b'])
    now = 12_000 // a and b idle for the whole window
    allow('c', 'k')
    expect(Object.keys(s.snapshot().limiters)).toEqual(['c'])
    expect(s.snapshot().limiters.c!.series).toEqual(series(12, 2, { 12: { allowed: 1 } }))
  })

  it('tracks no keys with topKeys 0', () => {
    const s = stats({ seconds: 1, topKeys: 0 })
    now = 1_000
    deny('api', 'k')
    expect(s.snapshot().limiters.api).toEqual({ series: series(1, 1, { 1: { denied: 1 } }), topDenied: [] })
  })

  it('stops counting on close()', () => {
    const s = liveStats({ clock, seconds: 1 })
    now = 1_000
    allow('api', 'k')
    s.close()
    s.close()
    allow('api', 'k')
    expect(s.snapshot().limiters.api!.series).toEqual([{ t: 1, allowed: 1, queued: 0, denied: 0, shadow: 0 }])
  })

  it('defaults to 300 seconds and the wall clock', () => {
    const s = stats({ clock: undefined })
    const before = Date.now()
    const snapshot = s.snapshot()
    expect(snapshot.seconds).toBe(300)
    expect(snapshot.at).toBeGreaterThanOrEqual(before)
    expect(snapshot.at).toBeLessThanOrEqual(Date.now())
  })

  it.each([
    [{ seconds: 0 }, 'liveStats.seconds'],
    [{ seconds: 3601 }, 'liveStats.seconds'],
    [{ seconds: 1.5 }, 'liveStats.seconds'],
    [{ topKeys: -1 }, 'liveStats.topKeys'],
    [{ topKeys: 1001 }, 'liveStats.topKeys'],
    [{ maxLimiters: 0 }, 'liveStats.maxLimiters'],
    // What one process may publish (issue 45 item 1): 20,000 limiters of 300 s wrote 373 MB a second.
    [{ maxLimiters: 20_000 }, 'liveStats.maxLimiters'],
    [{ seconds: 900, maxLimiters: 41 }, 'liveStats.maxLimiters'],
    [{ maxLimiters: 100, topKeys: 41 }, 'liveStats.topKeys'],
    [{ clock: 5 }, 'liveStats.clock'],
    [{ secnds: 5 }, 'liveStats.secnds'],
  ])('rejects %o naming %s', (options, option) => {
    let error: unknown
    try {
      liveStats(options as LiveStatsOptions)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option })
  })
})

describe('liveStats within what one process may publish (issue 45 item 1)', () => {
  it('defaults to as many limiters as fit the bound of points and keys, and accepts the bound itself', () => {
    const tracked = (options: LiveStatsOptions) => {
      const s = stats({ ...options, seconds: options.seconds ?? 300 })
      now = 5_000_000
      for (let i = 0; i < 1000; i++) deny(`l${i}`, 'k')
      return Object.keys(s.snapshot().limiters).length
    }
    expect(tracked({})).toBe(100)
    expect(tracked({ seconds: 900 })).toBe(40)
    expect(tracked({ seconds: 3600 })).toBe(10)
    expect(tracked({ topKeys: 1000 })).toBe(4)
    expect(tracked({ seconds: 36, maxLimiters: 1000, topKeys: 4 })).toBe(1000)
  })

  it('records a denied key longer than 128 characters cut, ending in …', () => {
    const s = stats({ seconds: 1, topKeys: 2 })
    now = 7_000_000
    deny('api', 'k'.repeat(10_000))
    deny('api', 'short')
    expect(s.snapshot().limiters.api!.topDenied).toEqual([
      { key: `${'k'.repeat(127)}…`, count: 1 },
      { key: 'short', count: 1 },
    ])
  })
})

describe('SpaceSaving', () => {
  it('holds at most its capacity, however many distinct keys arrive', () => {
    const sketch = new SpaceSaving(80)
    for (let i = 0; i < 10_000; i++) sketch.add(`key-${i}`)
    expect(sketch.size).toBe(80)
    let total = 0
    for (const [, count] of sketch.entries()) total += count
    expect(total).toBe(10_000) // Space-Saving keeps the sum of counts equal to the stream length
  })

  it('counts exactly while it holds every key', () => {
    const sketch = new SpaceSaving(10)
    const stream = 'abcabcaabjjjjjjjjjdeghia'
    for (const key of stream) sketch.add(key)
    const exact = new Map<string, number>()
    for (const key of stream) exact.set(key, (exact.get(key) ?? 0) + 1)
    expect(new Map(sketch.entries())).toEqual(exact)
  })

  it('overestimates held keys only, and holds every key seen more than total / capacity times', () => {
    let seed = 42
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      return seed / 2_147_483_648
    }
    const sketch = new SpaceSaving(16)
    const exact = new Map<string, number>()
    const n = 20_000
    for (let i = 0; i < n; i++) {
      // Skewed: key k with probability ~ 1/(k+1).
      const key = `k${Math.floor(Math.exp(random() * Math.log(1000))) - 1}`
      sketch.add(key)
      exact.set(key, (exact.get(key) ?? 0) + 1)
    }
    const held = new Map(sketch.entries())
    for (const [key, count] of held) expect(count).toBeGreaterThanOrEqual(exact.get(key)!)
    const heavy = [...exact].filter(([, count]) => count > n / 16).map(([key]) => key)
    expect(heavy.length).toBeGreaterThan(0)
    for (const key of heavy) expect(held.has(key)).toBe(true)
  })
})
