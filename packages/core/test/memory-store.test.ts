import {
  createLimiter,
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  MemoryStore,
  type Rule,
  slidingLog,
  tokenBucket,
} from '@sluice/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { catchError } from './support.ts'

const onePerSecond = fixedWindow({ limit: 1, windowMs: 1000 }) as Rule

function setup(options: { maxKeys?: number; sweepIntervalMs?: number } = {}) {
  const clock = { now: 0 }
  const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0, ...options })
  return { clock, store }
}

/** Whether the store still holds `key`'s count: a second call inside the window is denied. */
function remembers(store: MemoryStore, key: string, rules: readonly Rule[] = [onePerSecond]): boolean {
  const [d] = store.apply('p', key, rules, 1, 'peek')
  return !d!.allowed
}

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

describe('MemoryStore bound (maxKeys)', () => {
  it('never holds more than maxKeys keys, and keeps the most recently used half', () => {
    const maxKeys = 10
    const { store } = setup({ maxKeys })
    for (let i = 0; i < 1000; i++) {
      store.apply('p', `k${i}`, [onePerSecond], 1, 'consume')
      expect(store.size).toBeLessThanOrEqual(maxKeys)
      // The last maxKeys / 2 keys used are always still there.
      for (let j = Math.max(0, i - maxKeys / 2 + 1); j <= i; j++) expect(remembers(store, `k${j}`)).toBe(true)
    }
    expect(remembers(store, 'k0')).toBe(false)
  })

  it('keeps a key that is used all along while thousands of others come and go', () => {
    const { store } = setup({ maxKeys: 4 })
    for (let i = 0; i < 2000; i++) {
      store.apply('p', 'hot', [tokenBucket({ capacity: 5000, refillPerSecond: 1 }) as Rule], 1, 'consume')
      store.apply('p', `cold${i}`, [onePerSecond], 1, 'consume')
      expect(store.size).toBeLessThanOrEqual(4)
    }
    const [d] = store.apply(
      'p',
      'hot',
      [tokenBucket({ capacity: 5000, refillPerSecond: 1 }) as Rule],
      1,
      'peek',
    )
    expect(d!.remaining).toBe(5000 - 2001)
  })

  it('drops only the least recently used: the keys it keeps are always the most recently used ones', () => {
    const maxKeys = 8
    const { store } = setup({ maxKeys })
    const recency: string[] = [] // least recently used first
    let seed = 7
    for (let i = 0; i < 3000; i++) {
      // A skewed, repeatable choice among 40 keys: some come back often, most rarely.
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      const key = `k${Math.floor((seed / 2 ** 31) ** 3 * 40)}`
      store.apply('p', key, [onePerSecond], 1, 'consume')
      const at = recency.indexOf(key)
      if (at >= 0) recency.splice(at, 1)
      recency.push(key)
      const kept = recency.map((k) => remembers(store, k))
      const firstKept = kept.indexOf(true)
      expect(kept.slice(firstKept).every(Boolean)).toBe(true)
      expect(kept.length - firstKept).toBeGreaterThanOrEqual(Math.min(recency.length, maxKeys / 2))
      expect(store.size).toBe(kept.length - firstKept)
    }
  })

  it('counts keys across every prefix', () => {
    const { store } = setup({ maxKeys: 4 })
    for (let i = 0; i < 100; i++) {
      store.apply(`prefix${i % 3}`, `k${i}`, [onePerSecond], 1, 'consume')
      expect(store.size).toBeLessThanOrEqual(4)
    }
  })

  it('peek neither stores a key nor pushes others out', () => {
    const { store } = setup({ maxKeys: 4 })
    for (const key of ['a', 'b', 'c', 'd']) store.apply('p', key, [onePerSecond], 1, 'consume')
    expect(store.size).toBe(4)
    for (let i = 0; i < 100; i++) {
      const [d] = store.apply('p', `unknown${i}`, [onePerSecond], 1, 'peek')
      expect(d!.allowed).toBe(true)
    }
    expect(store.size).toBe(4)
    for (const key of ['a', 'b', 'c', 'd']) expect(remembers(store, key)).toBe(true)
  })
})

describe('MemoryStore expiry', () => {
  it('drops an idle key once its rule would answer as fresh, and the key starts over', () => {
    const { clock, store } = setup()
    const limiter = createLimiter({ rules: [slidingLog({ limit: 2, windowMs: 1000 })], store })
    return (async () => {
      await limiter.consume('k')
      clock.now = 400
      await limiter.consume('k')
      clock.now = 1399
      store.sweep()
      expect(store.size).toBe(1)
      expect((await limiter.peek('k')).remaining).toBe(0)
      clock.now = 1400
      store.sweep()
      expect(store.size).toBe(0)
      expect((await limiter.consume('k')).remaining).toBe(1)
    })()
  })

  it('resets an expired key lazily on its next call, without a sweep', async () => {
    const { clock, store } = setup()
    const limiter = createLimiter({ rules: [tokenBucket({ capacity: 2, refillPerSecond: 1 })], store })
    expect((await limiter.consume('k', { cost: 2 })).remaining).toBe(0)
    clock.now = 2000
    const d = await limiter.consume('k')
    expect(d.remaining).toBe(1)
    expect(d.resetMs).toBe(1000)
    expect(store.size).toBe(1)
  })

  it('keeps a key with several rules until every one of them would answer as fresh', async () => {
    const { clock, store } = setup()
    const short = slidingLog({ limit: 1, windowMs: 100 })
    const long = fixedWindow({ limit: 2, windowMs: 10_000 })
    const limiter = createLimiter({ rules: [short, long], store })
    await limiter.consume('k')
    clock.now = 5000
    store.sweep()
    expect(store.size).toBe(1)
    const d = await limiter.consume('k')
    expect(d.allowed).toBe(true)
    expect(d.rules[1]!.remaining).toBe(0)
    clock.now = 9999
    store.sweep()
    expect(store.size).toBe(1)
    expect((await limiter.peek('k')).allowed).toBe(false)
    clock.now = 10_000
    store.sweep()
    expect(store.size).toBe(0)
  })

  it('never lets a later call with shorter rules cut short what a longer rule still counts', async () => {
    const { clock, store } = setup()
    const long = fixedWindow({ limit: 1, windowMs: 10_000 })
    const short = slidingLog({ limit: 5, windowMs: 100 })
    const limiter = createLimiter<'long' | 'short'>({
      rules: (_key, context) => (context === 'long' ? [long] : [short]),
      store,
    })
    expect((await limiter.consume('k', { context: 'long' })).allowed).toBe(true)
    clock.now = 50
    expect((await limiter.consume('k', { context: 'short' })).allowed).toBe(true)
    clock.now = 5000
    store.sweep()
    expect((await limiter.consume('k', { context: 'long' })).allowed).toBe(false)
  })

  it('forgets a key on reset', async () => {
    const { store } = setup()
    const limiter = createLimiter({ rules: [onePerSecond], store })
    await limiter.consume('a')
    await limiter.consume('b')
    expect(store.size).toBe(2)
    await limiter.reset('a')
    expect(store.size).toBe(1)
    expect((await limiter.consume('a')).allowed).toBe(true)
    expect((await limiter.consume('b')).allowed).toBe(false)
  })

  it('sweeps by itself on an interval, and close() stops it', () => {
    vi.useFakeTimers()
    const clock = { now: 0 }
    const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 1000 })
    expect(vi.getTimerCount()).toBe(1)
    store.apply('p', 'k', [onePerSecond], 1, 'consume')
    clock.now = 1000
    expect(store.size).toBe(1)
    vi.advanceTimersByTime(1000)
    expect(store.size).toBe(0)
    store.close()
    expect(vi.getTimerCount()).toBe(0)
  })

  it('a clock that throws makes its timed sweep skip a turn: nothing is thrown from the timer, where it would end the process', () => {
    vi.useFakeTimers()
    const clock = { broken: false }
    const store = new MemoryStore({
      clock: () => {
        if (clock.broken) throw new Error('clock broke')
        return 0
      },
      sweepIntervalMs: 1000,
    })
    store.apply('p', 'k', [onePerSecond], 1, 'consume')
    clock.broken = true
    expect(() => vi.advanceTimersByTime(3000)).not.toThrow()
    expect(store.size).toBe(1)
    // Called by its user, a sweep still says what failed.
    expect(() => store.sweep()).toThrow('clock broke')
    store.close()
  })

  it('unrefs its sweep timer so it never keeps the process alive; sweepIntervalMs 0 makes none', () => {
    const spy = vi.spyOn(globalThis, 'setInterval')
    const store = new MemoryStore()
    expect(spy).toHaveBeenCalledTimes(1)
    expect(spy.mock.calls[0]![1]).toBe(60_000)
    const timer = spy.mock.results[0]!.value as NodeJS.Timeout
    expect(timer.hasRef()).toBe(false)
    store.close()
    new MemoryStore({ sweepIntervalMs: 0 }).close()
    expect(spy).toHaveBeenCalledTimes(1)
  })

  it('forgets everything on close', async () => {
    const { store } = setup()
    store.apply('p', 'k', [onePerSecond], 1, 'consume')
    store.close()
    expect(store.size).toBe(0)
  })
})

describe('MemoryStore state identity', () => {
  it('finds a state by its rule identity, not the rule object: a rule made again, or with another limit, reads and keeps the count', () => {
    const { store } = setup()
    const three = fixedWindow({ limit: 3, windowMs: 1000 }) as Rule
    const again = fixedWindow({ limit: 3, windowMs: 1000 }) as Rule
    const raised = fixedWindow({ limit: 5, windowMs: 1000 }) as Rule
    const other = fixedWindow({ limit: 3, windowMs: 2000 }) as Rule
    const remaining = (rule: Rule) => store.apply('p', 'k', [rule], 1, 'consume')[0]!.remaining
    expect(remaining(three)).toBe(2)
    expect(remaining(again)).toBe(1)
    expect(remaining(three)).toBe(0)
    // The same state judged by a raised limit; then the first object again, after another took its place.
    expect(remaining(raised)).toBe(1)
    expect(store.apply('p', 'k', [three], 1, 'consume')[0]!.allowed).toBe(false)
    // Another window is another state, kept beside the first.
    expect(remaining(other)).toBe(2)
    expect(store.apply('p', 'k', [again, other], 1, 'peek').map((d) => d.remaining)).toEqual([0, 2])
    // A refund by yet another object of the same identity gives back to the same state: 4 counted, 2 left.
    store.adjust('p', 'k', [fixedWindow({ limit: 3, windowMs: 1000 }) as Rule], 2, 'refund')
    expect(store.apply('p', 'k', [three], 1, 'peek')[0]).toMatchObject({ allowed: true, remaining: 0 })
    expect(store.size).toBe(1)
  })
})

describe('MemoryStore options', () => {
  it('reads the clock it is given, and defaults to Date.now', async () => {
    vi.useFakeTimers({ now: 1_234_500 })
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const limiter = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], store })
    expect((await limiter.consume('k')).resetMs).toBe(500)
  })

  it('takes a clock with fractions of a ms as whole ms, so every figure stays an integer', async () => {
    let now = 1500.75
    const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 5, windowMs: 1000 }), leakyBucket({ ratePerSecond: 3, maxQueueMs: 1000 })],
      store,
    })
    expect((await limiter.consume('k')).rules.map((r) => r.resetMs)).toEqual([500, 334])
    now = 1600.25
    const d = await limiter.consume('k')
    expect(d.rules.map((r) => [r.resetMs, r.waitMs])).toEqual([
      [400, 0],
      [567, 234],
    ])
  })

  it.each([
    [{ clock: 5 }, 'MemoryStore.clock'],
    [{ maxKeys: 1 }, 'MemoryStore.maxKeys'],
    [{ maxKeys: 10.5 }, 'MemoryStore.maxKeys'],
    [{ maxKeys: '10' }, 'MemoryStore.maxKeys'],
    [{ sweepIntervalMs: -1 }, 'MemoryStore.sweepIntervalMs'],
    [{ sweepIntervalMs: Number.NaN }, 'MemoryStore.sweepIntervalMs'],
    [{ maxKeys: null }, 'MemoryStore.maxKeys'],
    [{ sweepIntervalMs: null }, 'MemoryStore.sweepIntervalMs'],
    [{ clock: null }, 'MemoryStore.clock'],
    [{ maxkeys: 10 }, 'MemoryStore.maxkeys'],
    ['fast', 'MemoryStore'],
    [[], 'MemoryStore'],
    [JSON.parse('{"__proto__": {"maxKeys": 1}}'), 'MemoryStore.__proto__'],
  ])('rejects %j naming %s', (options, option) => {
    const error = catchError(() => new MemoryStore(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_OPTION', option })
  })

  it('ignores options given as undefined', () => {
    const store = new MemoryStore({ clock: undefined, maxKeys: undefined, sweepIntervalMs: 0 })
    expect(store.size).toBe(0)
  })
})
