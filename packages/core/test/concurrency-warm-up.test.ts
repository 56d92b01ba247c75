/**
 * concurrency and warmUp on the memory store: each against a plain reference model on random traces, a
 * warm-up trace worked by hand from docs/design/rules/warm-up.md, and the factories' checks. The same traces
 * hold on Redis (packages/redis/test/redis-concurrency-warm-up.test.ts and the conformance suite).
 */
import {
  type ConcurrencyRule,
  concurrency,
  createLimiter,
  type Decision,
  ErrorCode,
  InvalidOptionError,
  MemoryStore,
  type Rule,
  type Store,
  StoreError,
  slidingLog,
  warmUp,
} from '@sluice/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { concurrencyAlgorithm, newLease, release } from '../src/rules/concurrency.ts'
import { catchError, type Figures, figures } from './support.ts'

const RUNS = Number(process.env.SLUICE_PROPERTY_RUNS ?? 300)

function setup(rules: Rule[], start = 0) {
  const clock = { now: start }
  const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  return { clock, store, limiter: createLimiter({ rules, store }) }
}

// ---------------------------------------------------------------------------------------------------
// concurrency

/** Leases as a list, searched by brute force: what is held at `t` is summed afresh every time. */
class ConcurrencyModel {
  readonly leases: { id: number; start: number; cost: number; released: boolean }[] = []
  constructor(
    readonly limit: number,
    readonly leaseMs: number,
  ) {}
  held(t: number): number {
    let units = 0
    for (const l of this.leases) if (!l.released && t < l.start + this.leaseMs) units += l.cost
    return units
  }
  fits(t: number, cost: number): boolean {
    return this.held(t) + cost <= this.limit
  }
  /** The figures of a call; records it when a consume is admitted (returns its lease number). */
  call(t: number, cost: number, consume: boolean): Figures & { lease: number | undefined } {
    const allowed = this.fits(t, cost)
    let lease: number | undefined
    if (allowed && consume) {
      lease = this.leases.length
      this.leases.push({ id: lease, start: t, cost, released: false })
    }
    const after = this.held(t) + (allowed && !consume ? cost : 0)
    // resetMs: the least d at which nothing is held (a peek counts the call as if admitted).
    let resetMs = 0
    while (this.held(t + resetMs) + (allowed && !consume && resetMs < this.leaseMs ? cost : 0) > 0) resetMs++
    let retryAfterMs = 0
    if (!allowed) while (!this.fits(t + retryAfterMs, cost)) retryAfterMs++
    return { allowed, remaining: Math.max(0, this.limit - after), resetMs, retryAfterMs, waitMs: 0, lease }
  }
  release(t: number, lease: number): void {
    const l = this.leases[lease]!
    if (t < l.start + this.leaseMs) l.released = true
  }
}

describe('concurrency against its reference model', () => {
  it('agrees on every figure, with releases, peeks and leases that end by themselves', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          limit: fc.integer({ min: 1, max: 6 }),
          leaseMs: fc.constantFrom(1, 5, 30, 100),
          steps: fc.array(
            fc.record({
              gap: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 120 })),
              op: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'release', 'release-old'),
              cost: fc.integer({ min: 1, max: 3 }),
            }),
            { minLength: 1, maxLength: 60 },
          ),
        }),
        async ({ limit, leaseMs, steps }) => {
          const rule = concurrency({ limit, leaseMs }) as ConcurrencyRule
          const { clock, limiter } = setup([rule], 1_700_000_000_000)
          const model = new ConcurrencyModel(limit, leaseMs)
          const held: { decision: Decision; lease: number }[] = []
          for (const [i, step] of steps.entries()) {
            clock.now += step.gap
            const where = `step ${i} at +${clock.now - 1_700_000_000_000}: ${JSON.stringify(step)}`
            if (step.op === 'release' || step.op === 'release-old') {
              const h = step.op === 'release' ? held.pop() : held.shift()
              if (h === undefined) continue
              await limiter.release('k', h.decision)
              // Twice is once.
              await limiter.release('k', h.decision)
              model.release(clock.now, h.lease)
              continue
            }
            const cost = Math.min(step.cost, limit)
            const consume = step.op === 'consume'
            const { lease, ...want } = model.call(clock.now, cost, consume)
            const d = await (consume ? limiter.consume : limiter.peek)('k', { cost })
            expect(figures(d), where).toEqual(want)
            expect(d.lease !== undefined, where).toBe(lease !== undefined)
            if (d.lease !== undefined) held.push({ decision: d, lease: lease! })
          }
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('holds a lease while now < t + leaseMs; release is idempotent and ends only its own lease', async () => {
    const { clock, limiter } = setup([concurrency({ limit: 2, leaseMs: 1000 }) as Rule])
    const a = await limiter.consume('k')
    expect(a).toMatchObject({ allowed: true, remaining: 1, resetMs: 1000 })
    // This process's 16 random characters, the lease's number in hex, its units.
    expect(a.lease).toMatch(/^[\w-]{16}[0-9a-f]{3,}:1$/)
    clock.now = 400
    const b = await limiter.consume('k')
    expect(b.lease).not.toBe(a.lease)
    expect(b.lease!.slice(0, 16)).toBe(a.lease!.slice(0, 16))
    clock.now = 500
    // Full: the oldest lease (a) ends at 1000.
    expect(figures(await limiter.consume('k'))).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: 900,
      retryAfterMs: 500,
      waitMs: 0,
    })
    await limiter.release('k', b)
    await limiter.release('k', b)
    expect((await limiter.peek('k')).remaining).toBe(0) // a is held; a peek of 1 would take the last
    expect(figures(await limiter.consume('k'))).toMatchObject({ allowed: true, remaining: 0 })
    clock.now = 999
    expect((await limiter.consume('k')).allowed).toBe(false)
    clock.now = 1000
    expect((await limiter.consume('k')).allowed).toBe(true)
  })

  it('finds a lease released in any order, or from a copy of its decision, among many held', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          limit: fc.integer({ min: 1, max: 40 }),
          leaseMs: fc.constantFrom(10, 200),
          steps: fc.array(
            fc.record({
              gap: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30 })),
              op: fc.constantFrom(
                'consume',
                'consume',
                'consume',
                'release',
                'release-copy',
                'release-again',
              ),
              cost: fc.integer({ min: 1, max: 3 }),
              pick: fc.nat(),
            }),
            { minLength: 1, maxLength: 150 },
          ),
        }),
        async ({ limit, leaseMs, steps }) => {
          const rule = concurrency({ limit, leaseMs }) as ConcurrencyRule
          const { clock, limiter } = setup([rule], 1_700_000_000_000)
          const model = new ConcurrencyModel(limit, leaseMs)
          const held: { decision: Decision; lease: number }[] = []
          const released: { decision: Decision; lease: number }[] = []
          for (const [i, step] of steps.entries()) {
            clock.now += step.gap
            const where = `step ${i}: ${JSON.stringify(step)}`
            if (step.op !== 'consume') {
              const from = step.op === 'release-again' ? released : held
              if (from.length === 0) continue
              const [h] = from.splice(step.pick % from.length, 1)
              // A copy carries an equal lease id that is not the same string: found by what it says.
              const decision =
                step.op === 'release-copy'
                  ? (JSON.parse(JSON.stringify(h!.decision)) as Decision)
                  : h!.decision
              await limiter.release('k', decision)
              model.release(clock.now, h!.lease)
              released.push(h!)
            } else {
              const cost = Math.min(step.cost, limit)
              const { lease, ...want } = model.call(clock.now, cost, true)
              const d = await limiter.consume('k', { cost })
              expect(figures(d), where).toEqual(want)
              if (d.lease !== undefined) held.push({ decision: d, lease: lease! })
            }
            const { lease: _, ...now } = model.call(clock.now, 1, false)
            expect(figures(await limiter.peek('k')), where).toEqual(now)
          }
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('releases leases a store made elsewhere, in any order (ids not from this process)', () => {
    const rule = concurrency({ limit: 10, leaseMs: 100 }) as ConcurrencyRule
    const state = concurrencyAlgorithm.create(rule, 0)
    const left = () => concurrencyAlgorithm.decide(state, rule, 50, 0).remaining
    concurrencyAlgorithm.admit(state, rule, 0, 1, 'b:1')
    concurrencyAlgorithm.admit(state, rule, 0, 2, newLease(2))
    concurrencyAlgorithm.admit(state, rule, 0, 3, 'a:3')
    concurrencyAlgorithm.admit(state, rule, 0, 1, 'c:1')
    expect(left()).toBe(3)
    release(state, 'a:3')
    expect(left()).toBe(6)
    release(state, 'a:3')
    release(state, 'z:3')
    expect(left()).toBe(6)
    release(state, 'c:1')
    release(state, 'b:1')
    expect(left()).toBe(8)
    expect(state.leases).toBe(1)
  })

  it('finds a lease admitted after a newer one was made (ids made ahead of their calls)', () => {
    const rule = concurrency({ limit: 10, leaseMs: 100 }) as ConcurrencyRule
    const state = concurrencyAlgorithm.create(rule, 0)
    const ids = [newLease(1), newLease(1), newLease(1), newLease(1), newLease(1)]
    for (const id of [ids[0]!, ids[1]!, ids[3]!, ids[2]!, ids[4]!])
      concurrencyAlgorithm.admit(state, rule, 0, 1, id)
    for (const id of [ids[2]!, ids[3]!, ids[1]!]) {
      release(state, id)
      release(state, id)
    }
    expect(concurrencyAlgorithm.decide(state, rule, 0, 0).remaining).toBe(8)
  })

  it('keeps its slots bounded: about twice the live leases, however many come and go', () => {
    const rule = concurrency({ limit: 8, leaseMs: 1_000_000 }) as ConcurrencyRule
    const state = concurrencyAlgorithm.create(rule, 0)
    // The oldest lease stays held throughout while 10,000 others come and go behind it.
    concurrencyAlgorithm.admit(state, rule, 0, 1, newLease(1))
    const others: string[] = []
    for (let i = 0; i < 10_000; i++) {
      const id = newLease(1)
      concurrencyAlgorithm.admit(state, rule, i, 1, id)
      others.push(id)
      if (others.length === 7) release(state, others.splice(i % 7, 1)[0]!)
    }
    expect(state.leases).toBe(7)
    expect(state.ids.length).toBeLessThanOrEqual(2 * 8 + 1)
    expect(concurrencyAlgorithm.decide(state, rule, 10_000, 0).remaining).toBe(1)
  })

  it('releases through the store once, with each rule its lease; a failed store rejects with a StoreError', async () => {
    const inner = new MemoryStore({ clock: () => 0, sweepIntervalMs: 0 })
    const asked: { marks: readonly (string | undefined)[] | undefined; adjustment: string }[] = []
    let fail: 'throw' | 'reject' | undefined
    const store: Store = {
      apply: (...args) => inner.apply(...args),
      reset: (prefix, key) => inner.reset(prefix, key),
      adjust(prefix, key, rules, cost, adjustment, block, marks) {
        asked.push({ marks, adjustment })
        if (fail === 'throw') throw new Error('connection refused')
        if (fail === 'reject') return Promise.reject(new Error('connection refused'))
        return inner.adjust(prefix, key, rules, cost, adjustment, block, marks)
      },
    }
    const rules = [slidingLog({ limit: 5, windowMs: 1000 }) as Rule, concurrency({ limit: 1 }) as Rule]
    // The rules are resolved per call, here by promise: the release waits for them, then asks the store.
    const limiter = createLimiter({ rules: async () => rules, store })
    const a = await limiter.consume('k')
    expect(asked).toEqual([])
    await limiter.release('k', a)
    expect(asked).toEqual([{ marks: [undefined, a.lease], adjustment: 'release' }])
    const b = await limiter.consume('k')
    expect(b.allowed).toBe(true)
    // A decision that holds no lease asks nothing.
    await limiter.release('k', await limiter.peek('k'))
    expect(asked).toHaveLength(1)
    for (const how of ['throw', 'reject'] as const) {
      fail = how
      const error = await limiter.release('k', b).catch((e: unknown) => e)
      expect(error, how).toBeInstanceOf(StoreError)
      expect((error as StoreError).code).toBe(ErrorCode.STORE_ERROR)
      expect(((error as StoreError).cause as Error).message).toBe('connection refused')
    }
    // The lease is still held: nothing was released.
    expect((await limiter.consume('k')).allowed).toBe(false)
  })

  it('composes with other rules all or nothing, and a denied call holds no lease', async () => {
    const rules = [concurrency({ limit: 5 }) as Rule, slidingLog({ limit: 2, windowMs: 1000 }) as Rule]
    const { limiter } = setup(rules)
    const first = await limiter.consume('k')
    await limiter.consume('k')
    const third = await limiter.consume('k')
    expect(first.lease).toBeDefined()
    expect(third.allowed).toBe(false)
    expect(third.lease).toBeUndefined()
    // The denied call took no lease: 2 held of 5.
    expect(third.rules[0]).toMatchObject({ allowed: true, remaining: 3, unit: 'concurrent-requests' })
  })

  it('forgets a key once its leases have ended (the memory store stays bounded)', async () => {
    const { clock, store, limiter } = setup([concurrency({ limit: 3, leaseMs: 100 }) as Rule])
    for (const key of ['a', 'b', 'c']) await limiter.consume(key)
    store.sweep()
    expect(store.size).toBe(3)
    clock.now = 100
    store.sweep()
    expect(store.size).toBe(0)
  })

  it.each<[object, string]>([
    [{ limit: 0 }, 'concurrency.limit'],
    [{ limit: 10_001 }, 'concurrency.limit'],
    [{ limit: 1.5 }, 'concurrency.limit'],
    [{ limit: 1, leaseMs: 0 }, 'concurrency.leaseMs'],
    [{ limit: 1, leaseMs: 2 ** 50 + 1 }, 'concurrency.leaseMs'],
    [{ limit: 1, lease: 5 }, 'concurrency.lease'],
  ])('rejects %j', (options, option) => {
    const error = catchError(() => concurrency(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
    expect((error as InvalidOptionError).option).toBe(option)
  })

  it('is not limited with limit -1', () => {
    expect(concurrency({ limit: -1 }).kind).toBe('unlimited')
  })
})

// ---------------------------------------------------------------------------------------------------
// warmUp

/** The formula of docs/design/rules/warm-up.md, line by line: the reference the rule must match. */
class WarmUpModel {
  stable: number
  cold: number
  threshold: number
  max: number
  slope: number
  coolDown: number
  next: number | undefined
  stored = 0
  constructor(
    rate: number,
    warmUpMs: number,
    coldFactor: number,
    readonly maxQueueMs: number,
    readonly limit: number,
  ) {
    this.stable = 1000 / rate
    this.cold = this.stable * coldFactor
    this.threshold = (0.5 * warmUpMs) / this.stable
    this.max = this.threshold + (2 * warmUpMs) / (this.stable + this.cold)
    this.slope = (this.cold - this.stable) / (this.max - this.threshold)
    this.coolDown = warmUpMs / this.max
  }
  timeFor(p: number) {
    return this.stable + p * this.slope
  }
  waitFor(stored: number, take: number) {
    const above = stored - this.threshold
    let w = 0
    if (above > 0) {
      const t = Math.min(above, take)
      w = (t * (this.timeFor(above) + this.timeFor(above - t))) / 2
      take -= t
    }
    return w + this.stable * take
  }
  /** The figures of a call of `k` at `now`; records it when a consume is admitted. */
  call(now: number, k: number, consume: boolean): Figures {
    let next = this.next ?? now
    let stored = this.next === undefined ? this.max : this.stored
    if (now > next) {
      stored = Math.min(this.max, stored + (now - next) / this.coolDown)
      next = now
    }
    const slot = next
    // remaining and resetMs as a leaky bucket reports them at the stable rate, found by search.
    const report = (ahead: number) => {
      let remaining = 0
      if (ahead <= 0) remaining = this.limit
      else while (remaining < this.limit && ahead + remaining * this.stable <= this.maxQueueMs) remaining++
      let resetMs = 0
      while (ahead - resetMs > 0) resetMs++
      return { remaining, resetMs }
    }
    if (slot - now > this.maxQueueMs) {
      const retryAfterMs = Math.ceil(slot - this.maxQueueMs - now)
      return { allowed: false, ...report(slot - now), retryAfterMs, waitMs: 0 }
    }
    const spend = Math.min(k, stored)
    const after = slot + this.waitFor(stored, spend) + (k - spend) * this.stable
    if (consume) {
      this.next = after
      this.stored = stored - spend
    }
    return { allowed: true, ...report(after - now), retryAfterMs: 0, waitMs: Math.ceil(slot - now) }
  }
}

const d = (allowed: boolean, remaining: number, resetMs: number, retryAfterMs: number, waitMs: number) => ({
  allowed,
  remaining,
  resetMs,
  retryAfterMs,
  waitMs,
})

describe('warmUp', () => {
  it('follows a trace worked by hand from docs/design/rules/warm-up.md', async () => {
    // ratePerSecond 10, warmUpMs 1000, coldFactor 3, maxQueueMs 1000:
    //   stable = 1000 / 10 = 100          cold = 100 × 3 = 300
    //   threshold = 0.5 × 1000 / 100 = 5  max = 5 + 2 × 1000 / (100 + 300) = 5 + 5 = 10
    //   slope = (300 − 100) / (10 − 5) = 40      coolDown = 1000 / 10 = 100
    //   timeFor(p) = 100 + 40p; limit = floor(1000 / 100) + 1 = 11
    // A new key starts cold: next = 0, stored = 10. Six calls at t = 0:
    //   1: slot 0;    waitFor(10, 1) = 1 × (timeFor(5) + timeFor(4)) / 2 = (300 + 260) / 2 = 280 → next 280, stored 9
    //   2: slot 280;  waitFor(9, 1)  = (260 + 220) / 2 = 240 → next 520, stored 8
    //   3: slot 520;  waitFor(8, 1)  = (220 + 180) / 2 = 200 → next 720, stored 7
    //   4: slot 720;  waitFor(7, 1)  = (180 + 140) / 2 = 160 → next 880, stored 6
    //   5: slot 880;  waitFor(6, 1)  = (140 + 100) / 2 = 120 → next 1000, stored 5
    //   6: slot 1000 (≤ maxQueueMs); above = 0, so waitFor(5, 1) = stable = 100 → next 1100, stored 4
    //   7: slot 1100 − 0 > 1000: denied, retryAfterMs = ceil(1100 − 1000 − 0) = 100, nothing changes
    // remaining = floor((1000 − (next − now)) / 100) + 1 (at most 11), resetMs = ceil(next − now):
    //   after 1: floor(720 / 100) + 1 = 8; after 2: 5; 3: 3; 4: 2; 5: 1; 6: floor(−100 / 100) + 1 = 0.
    const rule = warmUp({ ratePerSecond: 10, warmUpMs: 1000, maxQueueMs: 1000 })
    expect(rule).toMatchObject({
      stableMs: 100,
      coldMs: 300,
      thresholdPermits: 5,
      maxPermits: 10,
      slope: 40,
      coolDownMs: 100,
      limit: 11,
    })
    const { clock, limiter } = setup([rule])
    const at = async (t: number, cost = 1) => {
      clock.now = t
      return figures(await limiter.consume('k', { cost }))
    }
    expect(await at(0)).toEqual(d(true, 8, 280, 0, 0))
    expect(await at(0)).toEqual(d(true, 5, 520, 0, 280))
    expect(await at(0)).toEqual(d(true, 3, 720, 0, 520))
    expect(await at(0)).toEqual(d(true, 2, 880, 0, 720))
    expect(await at(0)).toEqual(d(true, 1, 1000, 0, 880))
    expect(await at(0)).toEqual(d(true, 0, 1100, 0, 1000))
    expect(await at(0)).toEqual(d(false, 0, 1100, 100, 0))
    // Idle until 3000: (3000 − 1100) / 100 = 19 permits more, capped at 10: cold again.
    //   slot 3000; waitFor(10, 1) = 280 → next 3280, stored 9
    expect(await at(3000)).toEqual(d(true, 8, 280, 0, 0))
    // Steady demand at each slot: 3280: waitFor(9, 1) = 240 → next 3520, stored 8.
    expect(await at(3280)).toEqual(d(true, 8, 240, 0, 0))
    // Idle 100 ms (3520 → 3620) stores one permit: 8 + 100 / 100 = 9; waitFor(9, 1) = 240 → next 3860.
    expect(await at(3620)).toEqual(d(true, 8, 240, 0, 0))
    // A call of cost 3 at 3860 (stored 8): above = 3, t = 3,
    //   waitFor(8, 3) = 3 × (timeFor(3) + timeFor(0)) / 2 = 3 × (220 + 100) / 2 = 480 → next 4340, stored 5;
    //   remaining = floor((1000 − 480) / 100) + 1 = 6.
    expect(await at(3860, 3)).toEqual(d(true, 6, 480, 0, 0))
    // Warm now (stored 5 = threshold): the spacing is stable, 100 ms: next 4440.
    expect(await at(4340)).toEqual(d(true, 10, 100, 0, 0))
  })

  it('agrees with the formula of docs/design/rules/warm-up.md on random traces, figures checked by search', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          rate: fc.constantFrom(0.7, 1, 3, 7.5, 10, 33.3, 100, 450, 2000),
          warmUpMs: fc.constantFrom(1, 10, 333, 1000, 5000),
          coldFactor: fc.constantFrom(1, 1.5, 3, 7),
          maxQueueMs: fc.constantFrom(0, 1, 50, 500, 2000),
          start: fc.oneof(fc.constant(0), fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 })),
          steps: fc.array(
            fc.record({
              gap: fc.oneof(
                fc.integer({ min: 0, max: 3 }),
                fc.integer({ min: 0, max: 400 }),
                fc.integer({ min: 0, max: 10_000 }),
              ),
              peek: fc.integer({ min: 0, max: 4 }).map((x) => x === 0),
              cost: fc.integer({ min: 1, max: 4 }),
            }),
            { minLength: 1, maxLength: 60 },
          ),
        }),
        async ({ rate, warmUpMs, coldFactor, maxQueueMs, start, steps }) => {
          const rule = warmUp({ ratePerSecond: rate, warmUpMs, coldFactor, maxQueueMs })
          const { clock, limiter } = setup([rule], start)
          const model = new WarmUpModel(rate, warmUpMs, coldFactor, maxQueueMs, rule.limit)
          for (const [i, step] of steps.entries()) {
            clock.now += step.gap
            const cost = Math.min(step.cost, rule.limit)
            const consume = !step.peek
            const want = model.call(clock.now, cost, consume)
            const got = await (consume ? limiter.consume : limiter.peek)('k', { cost })
            expect(figures(got), `step ${i} at +${clock.now - start}: ${JSON.stringify(step)}`).toEqual(want)
            expect(got.limit).toBe(rule.limit)
          }
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('tells a denied call the exact retry: 1 ms earlier still denied, then admitted', async () => {
    const rule = warmUp({ ratePerSecond: 33.3, warmUpMs: 2000, coldFactor: 4, maxQueueMs: 250 })
    const { clock, limiter } = setup([rule], 1_800_000_000_000)
    let denied: Decision | undefined
    for (let i = 0; i < 50 && denied === undefined; i++) {
      const got = await limiter.consume('k')
      if (!got.allowed) denied = got
    }
    expect(denied).toBeDefined()
    const now = clock.now
    clock.now = now + denied!.retryAfterMs - 1
    expect((await limiter.peek('k')).allowed).toBe(false)
    clock.now = now + denied!.retryAfterMs
    expect((await limiter.peek('k')).allowed).toBe(true)
  })

  it.each<[object, string]>([
    [{ ratePerSecond: 0, warmUpMs: 10 }, 'warmUp.ratePerSecond'],
    [{ ratePerSecond: 1, warmUpMs: 0 }, 'warmUp.warmUpMs'],
    [{ ratePerSecond: 1, warmUpMs: 2 ** 50 + 1 }, 'warmUp.warmUpMs'],
    [{ ratePerSecond: 1, warmUpMs: 10, coldFactor: 0.5 }, 'warmUp.coldFactor'],
    [{ ratePerSecond: 1, warmUpMs: 10, coldFactor: Number.NaN }, 'warmUp.coldFactor'],
    [{ ratePerSecond: 1, warmUpMs: 10, maxQueueMs: -1 }, 'warmUp.maxQueueMs'],
    [{ ratePerSecond: 1e-12, warmUpMs: 10 }, 'warmUp.ratePerSecond'],
    [{ ratePerSecond: 1e6, warmUpMs: 2 ** 50 }, 'warmUp.warmUpMs'],
    [{ ratePerSecond: 1, warmUpMs: 10, cold: 3 }, 'warmUp.cold'],
  ])('rejects %j', (options, option) => {
    const error = catchError(() => warmUp(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect((error as InvalidOptionError).option).toBe(option)
  })
})
