/**
 * Property tests: every rule against a brute-force reference model on random traces (non-decreasing
 * times with small gaps, window edges and huge jumps; random costs; several keys; peeks and resets).
 *
 * The models keep the plainest possible state (one entry per admitted unit, a count per window, exact
 * integer arithmetic for the buckets) and derive every figure by search rather than by formula:
 * `remaining` by admitting unit calls one after another, `resetMs` and `retryAfterMs` by finding the
 * least delay at which the state is replenished or the call fits. So a figure the rule computes by a
 * shortcut is checked against its definition.
 */
import {
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Figures, figures } from './support.ts'

/** Raise with SLUICE_PROPERTY_RUNS=5000 for a deeper search. */
const RUNS = Number(process.env.SLUICE_PROPERTY_RUNS ?? 300)

// ---------------------------------------------------------------------------------------------------
// Reference models

interface Model {
  /** Whether a call of `cost` at `now` would be admitted. */
  fits(now: number, cost: number): boolean
  /** Records an admitted call. */
  admit(now: number, cost: number): void
  /** Whether, at `t`, the state is fully replenished (nothing left to expire or refill). */
  replenished(t: number): boolean
  /** leakyBucket: the admitted call's wait; 0 for the others. */
  waitMs(now: number, cost: number): number
  clone(): Model
}

class FixedWindowModel implements Model {
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly counts = new Map<number, number>(),
  ) {}
  #count(t: number) {
    return this.counts.get(Math.floor(t / this.windowMs)) ?? 0
  }
  fits(now: number, cost: number) {
    return this.#count(now) + cost <= this.limit
  }
  admit(now: number, cost: number) {
    this.counts.set(Math.floor(now / this.windowMs), this.#count(now) + cost)
  }
  replenished(t: number) {
    return this.#count(t) === 0
  }
  waitMs() {
    return 0
  }
  clone() {
    return new FixedWindowModel(this.limit, this.windowMs, new Map(this.counts))
  }
}

class SlidingLogModel implements Model {
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly units: number[] = [],
  ) {}
  live(t: number) {
    return this.units.filter((u) => u > t - this.windowMs && u <= t).length
  }
  fits(now: number, cost: number) {
    return this.live(now) + cost <= this.limit
  }
  admit(now: number, cost: number) {
    for (let i = 0; i < cost; i++) this.units.push(now)
  }
  replenished(t: number) {
    return this.live(t) === 0
  }
  waitMs() {
    return 0
  }
  clone() {
    return new SlidingLogModel(this.limit, this.windowMs, [...this.units])
  }
}

class SlidingWindowModel implements Model {
  readonly bucketMs: number
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly buckets: number,
    readonly counts = new Map<number, number>(),
  ) {
    this.bucketMs = windowMs / buckets
  }
  #start(t: number) {
    return t - (t % this.bucketMs)
  }
  #live(t: number) {
    let total = 0
    for (const [s, n] of this.counts) if (s <= t && t < s + this.windowMs) total += n
    return total
  }
  fits(now: number, cost: number) {
    return this.#live(now) + cost <= this.limit
  }
  admit(now: number, cost: number) {
    const s = this.#start(now)
    this.counts.set(s, (this.counts.get(s) ?? 0) + cost)
  }
  replenished(t: number) {
    return this.#live(t) === 0
  }
  waitMs() {
    return 0
  }
  clone() {
    return new SlidingWindowModel(this.limit, this.windowMs, this.buckets, new Map(this.counts))
  }
}

/**
 * Exact token bucket. Rates are `p / 4` per second, so tokens kept in units of 1/4000 token refill
 * by exactly `p` per ms: every quantity is an integer.
 */
class TokenBucketModel implements Model {
  static readonly UNIT = 4000
  constructor(
    readonly capacity: number,
    readonly p: number,
    public scaled = capacity * TokenBucketModel.UNIT,
    public last = Number.NEGATIVE_INFINITY,
  ) {}
  #at(t: number) {
    const cap = this.capacity * TokenBucketModel.UNIT
    if (this.last === Number.NEGATIVE_INFINITY) return cap
    return Math.min(cap, this.scaled + (t - this.last) * this.p)
  }
  fits(now: number, cost: number) {
    return this.#at(now) >= cost * TokenBucketModel.UNIT
  }
  admit(now: number, cost: number) {
    this.scaled = this.#at(now) - cost * TokenBucketModel.UNIT
    this.last = now
  }
  replenished(t: number) {
    return this.#at(t) === this.capacity * TokenBucketModel.UNIT
  }
  waitMs() {
    return 0
  }
  clone() {
    return new TokenBucketModel(this.capacity, this.p, this.scaled, this.last)
  }
}

/**
 * Exact leaky bucket, straight from DESIGN: slot = max(now, last + cost * 1000 / rate). With rate
 * `p / 4`, time counted in units of 1/p ms makes one interval exactly 4000 units.
 */
class LeakyBucketModel implements Model {
  static readonly INTERVAL = 4000n
  readonly P: bigint
  constructor(
    readonly p: number,
    readonly maxQueueMs: number,
    public last: bigint | null = null,
  ) {
    this.P = BigInt(p)
  }
  #slot(now: number, cost: number) {
    const t = BigInt(now) * this.P
    if (this.last === null) return t
    const s = this.last + BigInt(cost) * LeakyBucketModel.INTERVAL
    return s > t ? s : t
  }
  fits(now: number, cost: number) {
    return this.#slot(now, cost) - BigInt(now) * this.P <= BigInt(this.maxQueueMs) * this.P
  }
  admit(now: number, cost: number) {
    this.last = this.#slot(now, cost)
  }
  replenished(t: number) {
    return this.last === null || this.last + LeakyBucketModel.INTERVAL <= BigInt(t) * this.P
  }
  waitMs(now: number, cost: number) {
    const ahead = this.#slot(now, cost) - BigInt(now) * this.P
    return Number((ahead + this.P - 1n) / this.P)
  }
  clone() {
    return new LeakyBucketModel(this.p, this.maxQueueMs, this.last)
  }
}

/** The least `d >= from` with `ok(d)`, for `ok` monotone in `d` (false, then true forever). */
function leastDelay(ok: (d: number) => boolean, from: number): number {
  if (ok(from)) return from
  let lo = from
  let hi = from + 1
  while (!ok(hi)) {
    lo = hi
    hi = from + (hi - from) * 2
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (ok(mid)) hi = mid
    else lo = mid
  }
  return hi
}

/** Unit calls one after another at `now` that `model` still admits, each recorded on a copy. */
function unitCallsLeft(model: Model, now: number, limit: number): number {
  const copy = model.clone()
  let n = 0
  while (n <= limit && copy.fits(now, 1)) {
    copy.admit(now, 1)
    n++
  }
  return n
}

/** What one rule should answer for a call, from the model alone. Records it when `consume` admits. */
/**
 * The figures one rule reports. `callCounts` is false when another rule of the call denied it: a rule
 * that would have admitted the call then reports its state as it stands.
 */
function expectedFigures(
  model: Model,
  now: number,
  cost: number,
  limit: number,
  consume: boolean,
  callCounts = true,
): Figures {
  const allowed = model.fits(now, cost)
  const counted = allowed && callCounts
  const after = model.clone()
  if (counted) after.admit(now, cost)
  const result = {
    allowed,
    remaining: unitCallsLeft(after, now, limit),
    resetMs: leastDelay((d) => after.replenished(now + d), 0),
    retryAfterMs: allowed ? 0 : leastDelay((d) => model.fits(now + d, cost), 1),
    waitMs: counted ? model.waitMs(now, cost) : 0,
  }
  if (allowed && consume) model.admit(now, cost)
  return result
}

// ---------------------------------------------------------------------------------------------------
// Rules with their models, and traces

interface Spec {
  rule: Rule
  limit: number
  /** A characteristic time of the rule: gaps are drawn around it. */
  scaleMs: number
  model(): Model
}

/** Refill and leak rates `p / 4` per second: exact in binary, many with intervals that are not whole ms. */
const quarterRate = fc.constantFrom(1, 2, 3, 4, 6, 10, 12, 28, 40, 120, 4000)

const fixedWindowSpec = fc
  .record({
    limit: fc.integer({ min: 1, max: 8 }),
    windowMs: fc.constantFrom(1, 2, 7, 10, 100, 1000, 60_000),
  })
  .map(
    ({ limit, windowMs }): Spec => ({
      rule: fixedWindow({ limit, windowMs }) as Rule,
      limit,
      scaleMs: windowMs,
      model: () => new FixedWindowModel(limit, windowMs),
    }),
  )

const slidingLogSpec = fc
  .record({ limit: fc.integer({ min: 1, max: 10 }), windowMs: fc.constantFrom(1, 5, 100, 1000, 3600) })
  .map(
    ({ limit, windowMs }): Spec => ({
      rule: slidingLog({ limit, windowMs }) as Rule,
      limit,
      scaleMs: windowMs,
      model: () => new SlidingLogModel(limit, windowMs),
    }),
  )

const slidingWindowSpec = fc
  .record({
    limit: fc.integer({ min: 1, max: 10 }),
    buckets: fc.constantFrom(1, 2, 3, 4, 5, 10),
    bucketMs: fc.constantFrom(1, 3, 10, 100, 250),
  })
  .map(
    ({ limit, buckets, bucketMs }): Spec => ({
      rule: slidingWindow({ limit, windowMs: buckets * bucketMs, buckets }) as Rule,
      limit,
      scaleMs: buckets * bucketMs,
      model: () => new SlidingWindowModel(limit, buckets * bucketMs, buckets),
    }),
  )

const tokenBucketSpec = fc.record({ capacity: fc.integer({ min: 1, max: 10 }), p: quarterRate }).map(
  ({ capacity, p }): Spec => ({
    rule: tokenBucket({ capacity, refillPerSecond: p / 4 }) as Rule,
    limit: capacity,
    scaleMs: Math.ceil((capacity * 4000) / p),
    model: () => new TokenBucketModel(capacity, p),
  }),
)

const leakyBucketSpec = fc
  .record({ p: quarterRate, maxQueueMs: fc.constantFrom(0, 1, 100, 333, 1000, 5000) })
  .map(({ p, maxQueueMs }): Spec => {
    const rule = leakyBucket({ ratePerSecond: p / 4, maxQueueMs })
    return {
      rule,
      limit: rule.limit,
      scaleMs: Math.max(Math.ceil(4000 / p), maxQueueMs),
      model: () => new LeakyBucketModel(p, maxQueueMs),
    }
  })

/** Rates that are not exact in binary: no exact model, but retries must still be tight. */
const awkwardRate = fc.constantFrom(0.1, 0.3, 1 / 3, 0.7, 3.3, 33.3, 1000 / 3, 1000 / 7)
const noModel = (): Model => {
  throw new Error('no reference model for this rate')
}

const awkwardTokenBucketSpec = fc
  .record({ capacity: fc.integer({ min: 1, max: 10 }), rate: awkwardRate })
  .map(
    ({ capacity, rate }): Spec => ({
      rule: tokenBucket({ capacity, refillPerSecond: rate }) as Rule,
      limit: capacity,
      scaleMs: Math.ceil((capacity * 1000) / rate),
      model: noModel,
    }),
  )

const awkwardLeakyBucketSpec = fc
  .record({ rate: awkwardRate, maxQueueMs: fc.constantFrom(0, 1, 100, 333, 1000, 5000) })
  .map(({ rate, maxQueueMs }): Spec => {
    const rule = leakyBucket({ ratePerSecond: rate, maxQueueMs })
    return { rule, limit: rule.limit, scaleMs: Math.max(Math.ceil(1000 / rate), maxQueueMs), model: noModel }
  })

interface Step {
  gap: number
  key: string
  cost: number
  op: 'consume' | 'peek' | 'reset'
}

const KEYS = ['a', 'b', 'c']

function stepArb(scaleMs: number, limit: number): fc.Arbitrary<Step> {
  const gap = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 3 }) },
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 2 * scaleMs }) },
    { weight: 2, arbitrary: fc.constantFrom(scaleMs - 1, scaleMs, scaleMs + 1).map((g) => Math.max(g, 0)) },
    { weight: 1, arbitrary: fc.constant(1_000_000_000) },
  )
  const cost = fc.oneof(
    { weight: 3, arbitrary: fc.constant(1) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: limit }) },
  )
  const op = fc.oneof(
    { weight: 16, arbitrary: fc.constant('consume' as const) },
    { weight: 4, arbitrary: fc.constant('peek' as const) },
    { weight: 1, arbitrary: fc.constant('reset' as const) },
  )
  return fc.record({ gap, key: fc.constantFrom(...KEYS), cost, op })
}

/** Clock starts at 0 or near a real `Date.now()`, where doubles keep only about 1/4096 ms. */
const startArb = fc.oneof(fc.constant(0), fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }))

function traceArb(spec: fc.Arbitrary<Spec>) {
  return spec.chain((s) =>
    fc.record({
      spec: fc.constant(s),
      start: startArb,
      steps: fc.array(stepArb(s.scaleMs, s.limit), { minLength: 1, maxLength: 60 }),
    }),
  )
}

function setup(rules: Rule[], start: number) {
  const clock = { now: start }
  const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  return { clock, store, limiter: createLimiter({ rules, store }) }
}

/** Each rule: rules with an exact model, and (for tight retries only) more rules without one. */
const SPECS: [string, fc.Arbitrary<Spec>, fc.Arbitrary<Spec>][] = [
  ['fixedWindow', fixedWindowSpec, fixedWindowSpec],
  ['slidingLog', slidingLogSpec, slidingLogSpec],
  ['slidingWindow', slidingWindowSpec, slidingWindowSpec],
  ['tokenBucket', tokenBucketSpec, fc.oneof(tokenBucketSpec, awkwardTokenBucketSpec)],
  ['leakyBucket', leakyBucketSpec, fc.oneof(leakyBucketSpec, awkwardLeakyBucketSpec)],
]

// ---------------------------------------------------------------------------------------------------

describe.each(SPECS)('%s against its reference model', (_, specArb, anyRateArb) => {
  it('agrees on allowed, remaining, resetMs, retryAfterMs and waitMs for every call', async () => {
    await fc.assert(
      fc.asyncProperty(traceArb(specArb), async ({ spec, start, steps }) => {
        const { clock, limiter } = setup([spec.rule], start)
        const models = new Map<string, Model>()
        for (const [i, step] of steps.entries()) {
          clock.now += step.gap
          if (step.op === 'reset') {
            await limiter.reset(step.key)
            models.delete(step.key)
            continue
          }
          let model = models.get(step.key)
          if (model === undefined) {
            model = spec.model()
            models.set(step.key, model)
          }
          const consume = step.op === 'consume'
          const want = expectedFigures(model, clock.now, step.cost, spec.limit, consume)
          const d = await (consume ? limiter.consume : limiter.peek)(step.key, { cost: step.cost })
          expect(figures(d), `step ${i} at t=${clock.now}: ${JSON.stringify(step)}`).toEqual(want)
          expect(d.limit).toBe(spec.limit)
          expect(d.rule).toBe(spec.rule.name)
        }
      }),
      { numRuns: RUNS },
    )
  })

  it('tells a denied call the exact retry: 1 ms earlier is still denied, retryAfterMs later admitted', async () => {
    await fc.assert(
      fc.asyncProperty(traceArb(anyRateArb), async ({ spec, start, steps }) => {
        const { clock, limiter } = setup([spec.rule], start)
        for (const step of steps) {
          clock.now += step.gap
          if (step.op === 'consume') await limiter.consume(step.key, { cost: step.cost })
        }
        // Repeat the last call until it is denied, then probe around its retryAfterMs.
        const { key, cost } = steps[steps.length - 1]!
        let d: Decision = await limiter.consume(key, { cost })
        for (let i = 0; i <= spec.limit && d.allowed; i++) d = await limiter.consume(key, { cost })
        expect(d.allowed).toBe(false)
        expect(d.retryAfterMs).toBeGreaterThanOrEqual(1)
        const now = clock.now
        clock.now = now + d.retryAfterMs - 1
        expect((await limiter.peek(key, { cost })).allowed).toBe(false)
        clock.now = now + d.retryAfterMs
        expect((await limiter.peek(key, { cost })).allowed).toBe(true)
      }),
      { numRuns: RUNS },
    )
  })
})

describe('slidingLog invariant', () => {
  it('no half-open window of windowMs holds more than limit units; a call is denied only if it would', async () => {
    await fc.assert(
      fc.asyncProperty(traceArb(slidingLogSpec), async ({ spec, start, steps }) => {
        const { limit, windowMs } = spec.rule as Extract<Rule, { kind: 'slidingLog' }>
        const { clock, limiter } = setup([spec.rule], start)
        const log = new Map<string, { t: number; cost: number }[]>(KEYS.map((k) => [k, []]))
        const unitsIn = (key: string, from: number, to: number) =>
          log
            .get(key)!
            .filter(({ t }) => t >= from && t < to)
            .reduce((sum, { cost }) => sum + cost, 0)
        for (const step of steps) {
          clock.now += step.gap
          if (step.op !== 'consume') continue
          const d = await limiter.consume(step.key, { cost: step.cost })
          const now = clock.now
          if (d.allowed) {
            log.get(step.key)!.push({ t: now, cost: step.cost })
          } else {
            // Admitting it would put more than limit units into [now - windowMs + 1, now + 1).
            expect(unitsIn(step.key, now - windowMs + 1, now + 1) + step.cost).toBeGreaterThan(limit)
          }
        }
        // The fullest window starts at some admitted call.
        for (const [key, entries] of log) {
          for (const { t } of entries) expect(unitsIn(key, t, t + windowMs)).toBeLessThanOrEqual(limit)
        }
      }),
      { numRuns: RUNS },
    )
  })
})

describe('several rules on one key', () => {
  const anyRule = fc.oneof(
    fixedWindowSpec,
    slidingLogSpec,
    slidingWindowSpec,
    tokenBucketSpec,
    leakyBucketSpec,
  )
  const specsArb = fc.uniqueArray(anyRule, { minLength: 2, maxLength: 3, selector: (s) => s.rule.id })
  const multiTrace = specsArb.chain((specs) => {
    const limit = Math.min(...specs.map((s) => s.limit))
    const scaleMs = Math.max(...specs.map((s) => s.scaleMs))
    return fc.record({
      specs: fc.constant(specs),
      start: startArb,
      steps: fc.array(stepArb(scaleMs, limit), { minLength: 1, maxLength: 50 }),
    })
  })

  it('admit all or nothing, and compose the decision from the deciding rule', async () => {
    await fc.assert(
      fc.asyncProperty(multiTrace, async ({ specs, start, steps }) => {
        const { clock, limiter } = setup(
          specs.map((s) => s.rule),
          start,
        )
        const models = new Map<string, Model[]>()
        for (const [i, step] of steps.entries()) {
          clock.now += step.gap
          if (step.op === 'reset') {
            await limiter.reset(step.key)
            models.delete(step.key)
            continue
          }
          let keyModels = models.get(step.key)
          if (keyModels === undefined) {
            keyModels = specs.map((s) => s.model())
            models.set(step.key, keyModels)
          }
          const now = clock.now
          const allowed = keyModels.every((m) => m.fits(now, step.cost))
          const consume = step.op === 'consume' && allowed
          const want = keyModels.map((m, r) => ({
            ...expectedFigures(m, now, step.cost, specs[r]!.limit, consume, allowed),
            rule: specs[r]!.rule.name,
          }))
          const d = await (step.op === 'consume' ? limiter.consume : limiter.peek)(step.key, {
            cost: step.cost,
          })
          const where = `step ${i} at t=${now}: ${JSON.stringify(step)}`
          expect(
            d.rules.map((r) => ({ ...figures({ ...r, rules: [] } as unknown as Decision), rule: r.rule })),
            where,
          ).toEqual(want)
          expect(d.allowed, where).toBe(allowed)
          // The earliest time the same call could pass every rule, found by search.
          const retry = allowed ? 0 : leastDelay((t) => keyModels.every((m) => m.fits(now + t, step.cost)), 1)
          expect(d.retryAfterMs, where).toBe(retry)
          expect(d.waitMs, where).toBe(allowed ? Math.max(...want.map((w) => w.waitMs)) : 0)
          const deciding = allowed
            ? want.reduce((best, w) => (w.remaining < best.remaining ? w : best))
            : want
                .filter((w) => !w.allowed)
                .reduce((best, w) => (w.retryAfterMs > best.retryAfterMs ? w : best))
          expect(d.rule, where).toBe(deciding.rule)
          expect(d.remaining, where).toBe(deciding.remaining)
          expect(d.resetMs, where).toBe(deciding.resetMs)
        }
      }),
      { numRuns: RUNS },
    )
  })
})
