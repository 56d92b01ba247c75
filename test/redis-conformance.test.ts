/**
 * Store conformance: the same random traces through MemoryStore and RedisStore (driven by one clock)
 * give identical per-rule decisions, field by field, for every algorithm, several rules per key, several
 * keys, costs above 1, peeks, and many calls in the same millisecond; with ioredis and with node-redis.
 */
import {
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleDecision,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ALL_CLIENT_KINDS, type ClientKind, clientOf, closeClients, versionOf } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

const asRule = (r: RuleInput): Rule => r as Rule

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
)

/** 1 to 3 rules with distinct ids. */
const ruleSetArb = fc.uniqueArray(ruleArb, { minLength: 1, maxLength: 3, selector: (r) => r.id })

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
  peek: fc.integer({ min: 0, max: 9 }).map((x) => x < 2),
})

const traceArb = fc.record({
  ruleSets: fc.array(ruleSetArb, { minLength: 3, maxLength: 3 }),
  steps: fc.array(stepArb, { minLength: 20, maxLength: 80 }),
})

const KEYS = ['alpha', 'beta:{x}', 'γ\u0000δ']

let run = 0

describe('the client libraries under test', () => {
  it.each<[ClientKind, string]>([
    ['ioredis', '6.'],
    ['node-redis', '6.'],
    ['ioredis@5', '5.'],
    ['node-redis@5', '5.'],
  ])('%s is major %s', (kind, major) => {
    expect(versionOf(kind).startsWith(major)).toBe(true)
  })
})

describe.each(ALL_CLIENT_KINDS)('RedisStore conformance with MemoryStore (%s)', (kind) => {
  it('answers every random trace exactly as the memory store does', async () => {
    const client = await clientOf(kind, server)
    await fc.assert(
      fc.asyncProperty(traceArb, async ({ ruleSets, steps }) => {
        // The trace clock never runs slower than real time (x4), so Redis, which expires keys by its own
        // clock, never drops a key before the memory store would.
        const started = performance.now()
        let lead = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
        let now = lead
        const clock = () => now
        const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
        const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
        const prefix = `conf${run++}`
        const history: string[] = []
        for (const step of steps) {
          lead += step.jump
          now = Math.max(now, lead + 4 * Math.floor(performance.now() - started))
          const rules = ruleSets[step.ruleSet]!
          const minLimit = Math.min(...rules.map((r) => ('limit' in r ? r.limit : r.capacity)))
          const cost = Math.min(step.cost, minLimit)
          const key = KEYS[step.key]!
          const mode = step.peek ? 'peek' : 'consume'
          const expected = memory.apply(prefix, key, rules, cost, mode)
          const actual = await redis.apply(prefix, key, rules, cost, mode)
          const brief = (ds: readonly RuleDecision[]) =>
            ds.map(
              (d) => `${d.allowed ? 'ok' : 'no'} r${d.remaining} reset${d.resetMs} retry${d.retryAfterMs}`,
            )
          history.push(
            `${now} ${mode} ${JSON.stringify(key)} x${cost} [${rules.map((r) => r.id)}] -> ${brief(expected)}`,
          )
          expect(actual, `trace so far:\n${history.join('\n')}\nredis said ${brief(actual)}`).toEqual(
            expected,
          )
        }
        memory.close()
        redis.close()
      }),
      { numRuns: 100 },
    )
  })

  it('logs a sliding-log call of cost 1,000,000 as one member, not one per unit (it blocked Redis 1.5 s)', async () => {
    const client = await clientOf(kind, server)
    let now = 1_800_000_000_000
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const redis = new RedisStore({ client, clock, deniedCache: false })
    const rules = [asRule(slidingLog({ limit: 2_500_000, windowMs: 60_000 }))]
    const prefix = `big-${kind}-${run++}`
    const both = async (cost: number) => {
      const expected = memory.apply(prefix, 'k', rules, cost, 'consume')
      const actual = await redis.apply(prefix, 'k', rules, cost, 'consume')
      expect(actual).toEqual(expected)
      return actual[0]!
    }
    expect(await both(1_000_000)).toMatchObject({ allowed: true, remaining: 1_500_000 })
    now += 10
    expect(await both(1_000_000)).toMatchObject({ allowed: true, remaining: 500_000 })
    now += 10
    expect(await both(1_000_000)).toMatchObject({ allowed: false, remaining: 500_000, retryAfterMs: 59_980 })
    const zset = `sluice:${prefix}:{k}:${rules[0]!.id}`
    expect(Number(await server.cli('ZCARD', zset))).toBe(2)
    // The first call's million units leave together, at the very ms the denial named.
    now += 59_980
    expect(await both(1_000_000)).toMatchObject({ allowed: true, remaining: 500_000 })
    expect(Number(await server.cli('ZCARD', zset))).toBe(2)
    memory.close()
    redis.close()
  })

  it('agrees with the memory store on long logs: many entries, large costs, expiries of many at once', async () => {
    const client = await clientOf(kind, server)
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
          let lead = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
          let now = lead
          const clock = () => now
          const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
          const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
          const rules = [asRule(slidingLog({ limit, windowMs }))]
          const prefix = `long${run++}`
          for (const [i, step] of steps.entries()) {
            lead += step.jump
            now = Math.max(now, lead + 4 * Math.floor(performance.now() - started))
            const cost = Math.min(step.cost, limit)
            const mode = step.peek ? 'peek' : 'consume'
            const expected = memory.apply(prefix, 'k', rules, cost, mode)
            const actual = await redis.apply(prefix, 'k', rules, cost, mode)
            expect(actual, `step ${i} at ${now}: ${mode} x${cost}`).toEqual(expected)
          }
          memory.close()
          redis.close()
        },
      ),
      { numRuns: 15 },
    )
  })

  it('decides like the memory store at the edges of the figures the factories accept (a refill of 1e-13 a second kept Redis BUSY)', async () => {
    const client = await clientOf(kind, server)
    const start = 1_800_000_000_000
    let now = start
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
    const edges: Rule[] = [
      asRule(tokenBucket({ capacity: 10, refillPerSecond: 10_000 / 2 ** 50 })),
      asRule(tokenBucket({ capacity: 9_007_199_254_740, refillPerSecond: 9_007_199_254_740_000 / 2 ** 50 })),
      leakyBucket({ ratePerSecond: 1000 / 2 ** 50 }),
      leakyBucket({ ratePerSecond: 2 ** 50, maxQueueMs: 1000 }),
      leakyBucket({ ratePerSecond: 1000 }),
      asRule(slidingLog({ limit: 2 ** 50, windowMs: 1000 })),
    ]
    for (const [i, rule] of edges.entries()) {
      const prefix = `edge-${kind}-${run++}`
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
        const actual = await redis.apply(prefix, 'k', [rule], cost, mode)
        expect(actual, `rule ${i} ${rule.id} at +${now - start}: ${mode} x${cost}`).toEqual(expected)
      }
    }
    memory.close()
    redis.close()
  })

  it('holds the DESIGN worked example (slidingLog, limit 2 per 1000 ms)', async () => {
    const client = await clientOf(kind, server)
    let now = 0
    const store = new RedisStore({ client, clock: () => now + 1_800_000_000_000, deniedCache: false })
    const rules = [asRule(slidingLog({ limit: 2, windowMs: 1000 }))]
    const at = async (t: number) => {
      now = t
      return (await store.apply(`worked-${kind}`, 'k', rules, 1, 'consume'))[0]!
    }
    expect((await at(100)).allowed).toBe(true)
    expect((await at(400)).allowed).toBe(true)
    const denied = await at(500)
    expect(denied.allowed).toBe(false)
    expect(denied.retryAfterMs).toBe(600)
    expect((await at(1100)).allowed).toBe(true)
    expect((await at(1101)).allowed).toBe(false)
  })
})
