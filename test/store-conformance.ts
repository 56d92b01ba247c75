/**
 * @module The store-conformance cases every shared store runs: the same seeded random traces through
 * MemoryStore and the store under test (driven by one clock) give identical per-rule decisions, field by
 * field. Each case takes a maker of the store under test for a clock; the Redis and PostgreSQL suites call
 * them with their own clients.
 */
import {
  type BlockPolicy,
  type Costs,
  concurrency,
  createLimiter,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleDecision,
  type RuleInput,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { refundMark } from '@sluice/core/store'
import fc from 'fast-check'
import { expect } from 'vitest'

/** The store under test, reading time from `clock` (its own clock would not follow the trace). */
export type StoreMaker = (
  clock: () => number,
) => Store & { adjust: NonNullable<Store['adjust']>; close(): unknown }

/**
 * How a trace's clock moves beside real time. A store that expires state by its own clock (Redis's TTLs)
 * needs a trace clock that never runs slower than real time (x4); one that expires state only by the ms it
 * is given (PostgreSQL with its sweep off) takes the trace's jumps alone, so a slower round trip does not
 * age its queues away.
 */
export interface TraceClock {
  /** Default true. */
  followsRealTime?: boolean
}

/**
 * Acts a suite turns on once its store takes them, so that main stays green before a store is built for
 * them. Off, the traces are exactly those of before: the same seeds draw the same steps.
 */
export interface TraceActs {
  /**
   * Consumes with one cost per rule (a `Costs` list), and `'settle'` adjustments of a key's last admitted
   * consume, each rule by its own signed amount with the call's marks. Default false.
   */
  perRuleCosts?: boolean
}

/** The least the trace clock may read, `started` (performance.now()) being when the trace began. */
function pace(clock: TraceClock, started: number): number {
  return clock.followsRealTime === false ? 0 : 4 * Math.floor(performance.now() - started)
}

export const asRule = (r: RuleInput): Rule => r as Rule

/** A store's answer, with the `countedAt` of an admitted consume. */
type StoreAnswerOf = readonly RuleDecision[] & { readonly countedAt?: number; readonly reason?: string }

/**
 * The start times of a test's traces, from a seeded sequence (Park-Miller), one per run: with fast-check's
 * seed, every trace of every run is the same, windows' edges included.
 */
export function leads(seed: number): () => number {
  let state = seed
  return () => {
    state = (state * 48_271) % 2_147_483_647
    return 1_700_000_000_000 + (state % 1_000_000_000)
  }
}

/** Small numbers, so traces hit limits, window edges and refills often. */
const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc
    .record({ limit: fc.integer({ min: 1, max: 5 }), windowMs: fc.constantFrom(7, 10, 50, 100, 1000) })
    .map((o) => asRule(fixedWindow(o))),
  fc
    .record({ limit: fc.integer({ min: 1, max: 6 }), windowMs: fc.constantFrom(5, 10, 60, 100, 1000) })
    .map((o) => asRule(slidingLog(o))),
  fc
    .record({
      limit: fc.integer({ min: 1, max: 8 }),
      buckets: fc.integer({ min: 1, max: 6 }),
      bucketMs: fc.constantFrom(3, 10, 25, 100),
    })
    .map(({ limit, buckets, bucketMs }) =>
      asRule(slidingWindow({ limit, buckets, windowMs: buckets * bucketMs })),
    ),
  fc
    .record({
      capacity: fc.integer({ min: 1, max: 6 }),
      refillPerSecond: fc.constantFrom(0.1234, 0.5, 1, 3.7, 10, 33.3, 100, 999.99),
    })
    .map((o) => asRule(tokenBucket(o))),
  fc
    .record({
      ratePerSecond: fc.constantFrom(0.7, 1, 3, 7.5, 10, 33.3, 100, 450),
      maxQueueMs: fc.constantFrom(0, 1, 50, 120, 1000),
    })
    .map((o) => asRule(leakyBucket(o))),
  fc
    .record({
      limit: fc.integer({ min: 1, max: 6 }),
      leaseMs: fc.constantFrom(5, 40, 100, 1000),
    })
    .map((o) => asRule(concurrency(o))),
  fc
    .record({
      ratePerSecond: fc.constantFrom(0.7, 3, 7.5, 33.3, 100, 450),
      warmUpMs: fc.constantFrom(1, 50, 333, 1000, 3000),
      coldFactor: fc.constantFrom(1, 1.5, 3, 7),
      maxQueueMs: fc.constantFrom(0, 1, 50, 120, 1000),
    })
    .map((o) => asRule(warmUp(o))),
)

/** 1 to 3 rules with distinct ids. */
const ruleSetArb = fc.uniqueArray(ruleArb, { minLength: 1, maxLength: 3, selector: (r) => r.id })

/** A block policy as a limiter resolves it, or none (most traces). */
const blockArb: fc.Arbitrary<BlockPolicy | undefined> = fc.option(
  fc
    .record({
      ms: fc.integer({ min: 1, max: 200 }),
      factor: fc.constantFrom(1, 1.5, 2, 3),
      extra: fc.integer({ min: 0, max: 1000 }),
      forgetMs: fc.integer({ min: 1, max: 3000 }),
    })
    .map(({ ms, factor, extra, forgetMs }) => blockPolicy({ ms, factor, maxMs: ms + extra, forgetMs })),
  { nil: undefined, freq: 2 },
)

function blockPolicy(block: { ms: number; factor: number; maxMs: number; forgetMs: number }): BlockPolicy {
  return createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1 })], store: new MemoryStore(), block })
    .block!
}

const stepArb = fc.record({
  /** Extra ms the clock jumps before this call (0 most often: many calls share a millisecond). */
  jump: fc.oneof(
    { weight: 6, arbitrary: fc.constant(0) },
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 30 }) },
    { weight: 1, arbitrary: fc.integer({ min: 100, max: 3000 }) },
  ),
  key: fc.integer({ min: 0, max: 2 }),
  ruleSet: fc.integer({ min: 0, max: 2 }),
  cost: fc.oneof(
    { weight: 4, arbitrary: fc.constant(1) },
    { weight: 1, arbitrary: fc.integer({ min: 2, max: 4 }) },
  ),
  /** consume most often; peek; refund; penalize; give the key's last queued slot back. */
  act: fc.constantFrom(
    'consume',
    'consume',
    'consume',
    'consume',
    'consume',
    'consume',
    'peek',
    'peek',
    'refund',
    'penalize',
    'unqueue',
    'release',
  ),
  /** Refunds and penalties may exceed a limit. */
  adjustCost: fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }) },
    { weight: 1, arbitrary: fc.integer({ min: 4, max: 12 }) },
  ),
})

const traceArb = fc.record({
  block: blockArb,
  ruleSets: fc.array(ruleSetArb, { minLength: 3, maxLength: 3 }),
  steps: fc.array(stepArb, { minLength: 20, maxLength: 80 }),
})

type Step = typeof stepArb extends fc.Arbitrary<infer S> ? S : never

/** A step with per-rule costs and settles besides (`TraceActs.perRuleCosts`). */
const costStepArb = fc.record({
  step: stepArb,
  act: fc.constantFrom('step', 'step', 'step', 'consumeCosts', 'consumeCosts', 'settle', 'settle'),
  /** A consume's cost per rule (cut to each rule's limit). */
  costs: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 3, maxLength: 3 }),
  /** A settle's amount per rule (never below what the call reserved under it). */
  amounts: fc.array(fc.integer({ min: -4, max: 4 }), { minLength: 3, maxLength: 3 }),
})

const costTraceArb = fc.record({
  block: blockArb,
  ruleSets: fc.array(ruleSetArb, { minLength: 3, maxLength: 3 }),
  steps: fc.array(costStepArb, { minLength: 20, maxLength: 80 }),
})

/** Steps of either trace, as one shape: a plain trace's steps are all `'step'`. */
type CostStep = { step: Step; act: string; costs: number[]; amounts: number[] }

/** Both kinds of trace, as one arbitrary of one shape. */
function tracesOf(acts: TraceActs): fc.Arbitrary<{
  block: BlockPolicy | undefined
  ruleSets: Rule[][]
  steps: CostStep[]
}> {
  if (acts.perRuleCosts === true) return costTraceArb
  return traceArb.map(({ steps, ...trace }) => ({
    ...trace,
    steps: steps.map((step) => ({ step, act: 'step', costs: [], amounts: [] })),
  }))
}

/** The most one consume may cost under `rule` in a trace (its limit, or a bucket's capacity). */
const limitOf = (rule: Rule): number => ('limit' in rule ? rule.limit : rule.capacity)

const KEYS = ['alpha', 'beta:{x}', 'γ\u0000δ']

let run = 0
/**
 * Random traces of every rule kind, several rules per key, several keys, costs above 1, peeks, refunds,
 * penalties, queued slots given back, leases released and blocks that escalate, with many calls in one ms.
 */
export async function answersRandomTraces(
  makeStore: StoreMaker,
  pacing: TraceClock = {},
  acts: TraceActs = {},
): Promise<void> {
  // What the traces reached, so a generator that stopped reaching blocks or queues would be noticed.
  const seen: Record<string, number> = {
    blocked: 0,
    blockBegun: 0,
    queued: 0,
    unqueued: 0,
    refund: 0,
    penalize: 0,
    leased: 0,
    released: 0,
  }
  if (acts.perRuleCosts === true) {
    seen.perRuleCosts = 0
    seen.settle = 0
    seen.settleBack = 0
  }
  const nextLead = leads(24)
  await fc.assert(
    fc.asyncProperty(tracesOf(acts), async ({ block, ruleSets, steps }) => {
      // The trace clock never runs slower than real time (x4) unless told so, so a store that expires keys
      // by its own clock never drops a key before the memory store would.
      const started = performance.now()
      let lead = nextLead()
      let now = lead
      const clock = () => now
      const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
      const store = makeStore(clock)
      const prefix = `conf${run++}`
      const history: string[] = [`block ${JSON.stringify(block)}`]
      /** Per key: the rule set, queue marks and cost of the last consume that was told to wait. */
      const queued = new Map<
        string,
        { rules: readonly Rule[]; queues: (string | undefined)[]; cost: number | Costs }
      >()
      /** Per key: the last admitted consume's rules, costs and answers (memory's, the store's), until settled. */
      const admitted = new Map<
        string,
        { rules: readonly Rule[]; costs: number[]; memory: StoreAnswerOf; store: StoreAnswerOf }
      >()
      /** Per key: the rules and the leases (memory's, the store's) of the last consume that took one. */
      const leased = new Map<string, { rules: readonly Rule[]; memory: string; store: string }>()
      /** Lease ids are random, so decisions are compared without them (and with whether they had one). */
      const bare = (ds: readonly RuleDecision[]) =>
        ds.map(({ lease, ...d }) => (lease === undefined ? d : { ...d, leased: true }))
      const brief = (ds: readonly RuleDecision[] | undefined) =>
        ds?.map(
          (d) =>
            `${d.allowed ? 'ok' : 'no'} r${d.remaining} reset${d.resetMs} retry${d.retryAfterMs} wait${d.waitMs}${d.queue === undefined ? '' : ` q${d.queue}`}`,
        )
      for (const { step, act: costAct, costs: drawn, amounts: drawnAmounts } of steps) {
        lead += step.jump
        now = Math.max(now, lead + pace(pacing, started))
        const rules = ruleSets[step.ruleSet]!
        const minLimit = Math.min(...rules.map(limitOf))
        const key = KEYS[step.key]!
        // Per-rule costs: each cut to its rule's limit; a call's concurrency rules hold one lease, of one cost.
        const leases = rules.filter((r) => r.kind === 'concurrency')
        const leaseCost = Math.min(drawn[rules.indexOf(leases[0]!)] ?? 1, ...leases.map(limitOf))
        const perRule = rules.map((r, i) =>
          r.kind === 'concurrency' ? leaseCost : Math.min(drawn[i] ?? 1, limitOf(r)),
        )
        const cost: number | Costs = costAct === 'consumeCosts' ? perRule : Math.min(step.cost, minLimit)
        const act = costAct === 'consumeCosts' ? 'consume' : costAct === 'settle' ? 'settle' : step.act
        let expected: unknown
        let actual: unknown
        let said = ''
        if (act === 'settle') {
          const last = admitted.get(key)
          if (last === undefined) continue
          admitted.delete(key)
          // A true cost is never below 0: an amount never gives back more than the call reserved.
          const amounts = last.rules.map((_, i) => Math.max(drawnAmounts[i]!, -last.costs[i]!))
          const marksOf = (answer: StoreAnswerOf) =>
            last.rules.map((r, i) =>
              amounts[i]! < 0 ? refundMark(r, answer[i]!, answer.countedAt!) : undefined,
            )
          const e = memory.adjust(prefix, key, last.rules, amounts, 'settle', block, marksOf(last.memory))
          const a = await store.adjust(prefix, key, last.rules, amounts, 'settle', block, marksOf(last.store))
          expected = e === undefined ? undefined : [...bare(e), e.reason]
          actual = a === undefined ? undefined : [...bare(a), a.reason]
          said = `[${amounts}] -> ${brief(e)}`
          seen.settle!++
          if (amounts.some((n) => n < 0)) seen.settleBack!++
        } else if (act === 'consume' || act === 'peek') {
          const e = memory.apply(prefix, key, rules, cost, act, block)
          const a = await store.apply(prefix, key, rules, cost, act, block)
          if (typeof cost !== 'number') seen.perRuleCosts!++
          if (act === 'consume' && e.countedAt !== undefined && a.countedAt !== undefined) {
            const costs = typeof cost === 'number' ? rules.map(() => cost) : [...cost]
            admitted.set(key, { rules, costs, memory: e, store: a })
          }
          expected = [...bare(e), e.reason]
          actual = [...bare(a), a.reason]
          const lease = e.find((d) => d.lease !== undefined)?.lease
          if (lease !== undefined) {
            leased.set(key, { rules, memory: lease, store: a.find((d) => d.lease !== undefined)!.lease! })
            seen.leased!++
          }
          said = `x${cost} -> ${brief(e)} ${e.reason ?? ''}`
          if (e.reason === 'blocked') seen.blocked!++
          if (
            block !== undefined &&
            act === 'consume' &&
            e.reason !== 'blocked' &&
            e.some((d) => !d.allowed)
          ) {
            seen.blockBegun!++
          }
          if (act === 'consume' && e.some((d) => d.queue !== undefined)) {
            queued.set(key, { rules, queues: e.map((d) => d.queue), cost })
            seen.queued!++
          }
        } else if (step.act === 'release') {
          const last = leased.get(key)
          if (last === undefined) continue
          const marks = (lease: string) =>
            last.rules.map((r) => (r.kind === 'concurrency' ? lease : undefined))
          memory.adjust(prefix, key, last.rules, 1, 'release', undefined, marks(last.memory))
          await store.adjust(prefix, key, last.rules, 1, 'release', undefined, marks(last.store))
          said = 'the last lease'
          seen.released!++
        } else if (step.act === 'unqueue') {
          const last = queued.get(key)
          if (last === undefined) continue
          memory.adjust(prefix, key, last.rules, last.cost, 'unqueue', undefined, last.queues)
          await store.adjust(prefix, key, last.rules, last.cost, 'unqueue', undefined, last.queues)
          said = `x${last.cost} [${last.queues}]`
          seen.unqueued!++
        } else {
          // What is left of a plain step: a refund or a penalty.
          const adjustment = step.act as 'refund' | 'penalize'
          const e = memory.adjust(prefix, key, rules, step.adjustCost, adjustment, block)
          const a = await store.adjust(prefix, key, rules, step.adjustCost, adjustment, block)
          expected = e === undefined ? undefined : [...bare(e), e.reason]
          actual = a === undefined ? undefined : [...bare(a), a.reason]
          said = `x${step.adjustCost} -> ${brief(e)}`
          seen[step.act]!++
        }
        history.push(`${now} ${act} ${JSON.stringify(key)} [${rules.map((r) => r.id)}] ${said}`)
        expect(
          actual,
          `trace so far:\n${history.join('\n')}\nthe store said ${JSON.stringify(actual)}`,
        ).toEqual(expected)
      }
      memory.close()
      store.close()
    }),
    // Seeded, as the start times are: a trace that fails fails again on every run, and the counts of
    // what the traces did (asked below to pass 3) are the same on every run.
    { numRuns: 100, seed: 24 },
  )
  // Slots given back are few here (queues need a leaky bucket with room); the next test is about them.
  for (const [what, count] of Object.entries(seen)) {
    if (what !== 'unqueued') expect(count, what).toBeGreaterThan(3)
  }
}

/**
 * Leaky buckets whose callers stop waiting: queued slots given back, refunds and penalties between.
 */
export async function givesQueuedSlotsBack(makeStore: StoreMaker, pacing: TraceClock = {}): Promise<void> {
  let given = 0
  const nextLead = leads(19)
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        ratePerSecond: fc.constantFrom(0.7, 3, 7.5, 33.3, 100, 450, 3000),
        maxQueueMs: fc.constantFrom(120, 300, 1000),
        other: fc.boolean(),
        steps: fc.array(
          fc.record({
            jump: fc.oneof(
              { weight: 4, arbitrary: fc.constant(0) },
              { weight: 4, arbitrary: fc.integer({ min: 1, max: 40 }) },
            ),
            act: fc.constantFrom(
              'consume',
              'consume',
              'consume',
              'unqueue',
              'unqueue-older',
              'refund',
              'penalize',
            ),
            cost: fc.integer({ min: 1, max: 3 }),
          }),
          { minLength: 20, maxLength: 60 },
        ),
      }),
      async ({ ratePerSecond, maxQueueMs, other, steps }) => {
        const started = performance.now()
        let lead = nextLead()
        let now = lead
        const clock = () => now
        const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
        const store = makeStore(clock)
        const rules: Rule[] = [leakyBucket({ ratePerSecond, maxQueueMs })]
        if (other) rules.push(asRule(slidingLog({ limit: 20, windowMs: 500 })))
        const prefix = `unq${run++}`
        const waits: { queues: (string | undefined)[]; cost: number }[] = []
        for (const [i, step] of steps.entries()) {
          lead += step.jump
          now = Math.max(now, lead + pace(pacing, started))
          const where = `step ${i} at ${now}: ${step.act} x${step.cost}`
          if (step.act === 'consume') {
            // A call may not cost more than a rule's limit (the limiter refuses it).
            const cost = Math.min(step.cost, rules[0]!.kind === 'leakyBucket' ? rules[0]!.limit : 1)
            const e = memory.apply(prefix, 'k', rules, cost, 'consume')
            expect(await store.apply(prefix, 'k', rules, cost, 'consume'), where).toEqual(e)
            if (e[0]!.queue !== undefined) waits.push({ queues: e.map((d) => d.queue), cost })
          } else if (step.act === 'unqueue' || step.act === 'unqueue-older') {
            const w = step.act === 'unqueue' ? waits.pop() : waits.shift()
            if (w === undefined) continue
            given++
            memory.adjust(prefix, 'k', rules, w.cost, 'unqueue', undefined, w.queues)
            await store.adjust(prefix, 'k', rules, w.cost, 'unqueue', undefined, w.queues)
          } else {
            memory.adjust(prefix, 'k', rules, step.cost, step.act)
            await store.adjust(prefix, 'k', rules, step.cost, step.act)
          }
          const e = memory.apply(prefix, 'k', rules, 1, 'peek')
          expect(await store.apply(prefix, 'k', rules, 1, 'peek'), `${where}, then a peek`).toEqual(e)
        }
        memory.close()
        store.close()
      },
    ),
    // A fixed seed: how many slots the random traces give back varies with the seed (77 to 100 and more),
    // and the count below asks that this trace gives back enough to matter.
    { numRuns: 40, seed: 19 },
  )
  expect(given).toBeGreaterThan(80)
}

/**
 * Sliding logs of many entries, large costs, expiries of many at once.
 */
export async function agreesOnLongLogs(makeStore: StoreMaker, pacing: TraceClock = {}): Promise<void> {
  const nextLead = leads(15)
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        limit: fc.integer({ min: 50, max: 600 }),
        windowMs: fc.constantFrom(20, 100, 250),
        steps: fc.array(
          fc.record({
            jump: fc.oneof(
              { weight: 8, arbitrary: fc.constant(0) },
              { weight: 8, arbitrary: fc.integer({ min: 1, max: 5 }) },
              { weight: 1, arbitrary: fc.integer({ min: 50, max: 400 }) },
            ),
            cost: fc.oneof(
              { weight: 6, arbitrary: fc.constant(1) },
              { weight: 2, arbitrary: fc.integer({ min: 2, max: 40 }) },
              { weight: 1, arbitrary: fc.integer({ min: 41, max: 300 }) },
            ),
            peek: fc.integer({ min: 0, max: 9 }).map((x) => x === 0),
          }),
          { minLength: 100, maxLength: 400 },
        ),
      }),
      async ({ limit, windowMs, steps }) => {
        const started = performance.now()
        let lead = nextLead()
        let now = lead
        const clock = () => now
        const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
        const store = makeStore(clock)
        const rules = [asRule(slidingLog({ limit, windowMs }))]
        const prefix = `long${run++}`
        for (const [i, step] of steps.entries()) {
          lead += step.jump
          now = Math.max(now, lead + pace(pacing, started))
          const cost = Math.min(step.cost, limit)
          const mode = step.peek ? 'peek' : 'consume'
          const expected = memory.apply(prefix, 'k', rules, cost, mode)
          const actual = await store.apply(prefix, 'k', rules, cost, mode)
          expect(actual, `step ${i} at ${now}: ${mode} x${cost}`).toEqual(expected)
        }
        memory.close()
        store.close()
      },
    ),
    { numRuns: 15, seed: 15 },
  )
}

/**
 * The edges of the figures the factories accept (a refill of 1e-13 a second kept Redis BUSY).
 */
export async function agreesAtEdges(makeStore: StoreMaker): Promise<void> {
  const start = 1_800_000_000_000
  let now = start
  const clock = () => now
  const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
  const store = makeStore(clock)
  const edges: Rule[] = [
    asRule(tokenBucket({ capacity: 10, refillPerSecond: 10_000 / 2 ** 50 })),
    asRule(tokenBucket({ capacity: 9_007_199_254_740, refillPerSecond: 9_007_199_254_740_000 / 2 ** 50 })),
    leakyBucket({ ratePerSecond: 1000 / 2 ** 50 }),
    leakyBucket({ ratePerSecond: 2 ** 50, maxQueueMs: 1000 }),
    leakyBucket({ ratePerSecond: 1000 }),
    asRule(slidingLog({ limit: 2 ** 50, windowMs: 1000 })),
  ]
  for (const [i, rule] of edges.entries()) {
    const prefix = `edge-${run++}`
    const limit = 'limit' in rule ? rule.limit : rule.capacity
    now = start
    const trace: [number, number, 'consume' | 'peek'][] = [
      [0, 1, 'consume'],
      [0, limit - 1, 'consume'],
      [0, 1, 'peek'],
      [0, limit, 'peek'],
      [1, 1, 'consume'],
      [997, 1, 'consume'],
    ]
    for (const [jump, cost, mode] of trace) {
      now += jump
      if (cost < 1) continue
      const expected = memory.apply(prefix, 'k', [rule], cost, mode)
      const actual = await store.apply(prefix, 'k', [rule], cost, mode)
      expect(actual, `rule ${i} ${rule.id} at +${now - start}: ${mode} x${cost}`).toEqual(expected)
    }
  }
  memory.close()
  store.close()
}

/**
 * The worked example of docs/algorithms.md (slidingLog, limit 2 per 1000 ms), on this store alone.
 */
export async function holdsWorkedExample(makeStore: StoreMaker): Promise<void> {
  let now = 0
  const store = makeStore(() => now + 1_800_000_000_000)
  const rules = [asRule(slidingLog({ limit: 2, windowMs: 1000 }))]
  const prefix = `worked-${run++}`
  const at = async (t: number) => {
    now = t
    return (await store.apply(prefix, 'k', rules, 1, 'consume'))[0]!
  }
  expect((await at(100)).allowed).toBe(true)
  expect((await at(400)).allowed).toBe(true)
  const denied = await at(500)
  expect(denied.allowed).toBe(false)
  expect(denied.retryAfterMs).toBe(600)
  expect((await at(1100)).allowed).toBe(true)
  expect((await at(1101)).allowed).toBe(false)
}
