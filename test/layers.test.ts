/**
 * The layers' promises to each other, for the pairs no other suite pins (docs/design/layers.md lists every
 * pair and the test that covers it): a reset under every rule kind in both stores, the denied-key cache
 * under every kind it keeps, a refund through the store dropping a cached denial, a refund leaving a block
 * standing, no denial cached while prefetched units are held, and what this process's cache and batches
 * see of another process's refund, reset and block, and how the cache and prefetch meet per-rule costs and
 * settles. The memory store and RedisStores on a real
 * redis-server run the same steps on manual clocks.
 */
import {
  concurrency,
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleKind,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { refundMark } from '@sluice/core/store'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { closeClients, ioredis } from './harness/clients.ts'
import { commandCalls, type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** A whole hour, so every window, bucket and slot below starts at T. */
const T = 1_800_000_000_000
let run = 0

/**
 * One rule of each kind, each admitting two calls of cost 1 at T and denying the third with a retry of
 * exactly 1000 ms (the meters queue the second call 1000 ms, their `maxQueueMs`).
 */
const RULES: Record<RuleKind, Rule> = {
  fixedWindow: fixedWindow({ limit: 2, windowMs: 1000 }) as Rule,
  slidingLog: slidingLog({ limit: 2, windowMs: 1000 }) as Rule,
  slidingWindow: slidingWindow({ limit: 2, windowMs: 1000, buckets: 10 }) as Rule,
  tokenBucket: tokenBucket({ capacity: 2, refillPerSecond: 1 }) as Rule,
  leakyBucket: leakyBucket({ ratePerSecond: 1, maxQueueMs: 1000 }),
  warmUp: warmUp({ ratePerSecond: 1, warmUpMs: 1000, coldFactor: 1, maxQueueMs: 1000 }),
  concurrency: concurrency({ limit: 2, leaseMs: 60_000 }) as Rule,
}
const KINDS = Object.keys(RULES) as RuleKind[]
/** The kinds whose denial the denied-key cache keeps (a concurrency retry is only an upper bound). */
const CACHED = KINDS.filter((kind) => kind !== 'concurrency')

/** What a decision says, lease ids aside (they are random). */
const brief = (d: Decision) => ({
  allowed: d.allowed,
  remaining: d.remaining,
  resetMs: d.resetMs,
  retryAfterMs: d.retryAfterMs,
  waitMs: d.waitMs,
  reason: d.reason,
  leased: d.lease !== undefined,
})

/** Script calls Redis has run since the last `CONFIG RESETSTAT` (a first call may go as EVAL). */
async function scriptCalls(): Promise<number> {
  return (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
}

type StoreKind = 'memory' | 'redis'

/** A limiter on a store of `kind` (Redis: the denied-key cache on, as by default) on a manual clock. */
async function rig(kind: StoreKind, rules: readonly Rule[], block?: { ms: number }) {
  const clock = { now: T }
  const store: Store =
    kind === 'memory'
      ? new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
      : new RedisStore({ client: await ioredis(server), clock: () => clock.now, timeoutMs: 5000 })
  const limiter = createLimiter({ rules, store, block, prefix: `layers${run++}` })
  const at = (t: number, key = 'k', cost = 1) => {
    clock.now = T + t
    return limiter.consume(key, { cost })
  }
  return { limiter, at }
}

describe.each<StoreKind>(['memory', 'redis'])('resets under every rule kind (%s store)', (store) => {
  it.each(KINDS)('%s: a key reset after a denial answers every call as a key never seen', async (kind) => {
    const { limiter, at } = await rig(store, [RULES[kind]])
    const before = [await at(0), await at(0), await at(0)]
    expect(before.map((d) => d.allowed)).toEqual([true, true, false])
    await limiter.reset('k')
    const after = [await at(0), await at(0), await at(0)]
    const fresh = [await at(0, 'never'), await at(0, 'never'), await at(0, 'never')]
    expect(after.map(brief)).toEqual(fresh.map(brief))
    expect(after.map(brief)).toEqual(before.map(brief))
  })
})

describe('the denied-key cache under every rule kind it keeps (Redis)', () => {
  it.each(CACHED)(
    '%s: a denial is answered from memory until its retryAfterMs, then Redis admits the call',
    async (kind) => {
      const { at } = await rig('redis', [RULES[kind]])
      await at(0)
      await at(0)
      const denied = await at(0)
      expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, 'rules', 1000])
      await server.cli('CONFIG', 'RESETSTAT')
      const cached = await at(999)
      expect([cached.allowed, cached.reason, cached.retryAfterMs]).toEqual([false, 'cache', 1])
      expect(await scriptCalls()).toBe(0)
      const admitted = await at(1000)
      expect([admitted.allowed, admitted.reason]).toEqual([true, 'rules'])
      expect(await scriptCalls()).toBe(1)
    },
  )

  it.each(CACHED)(
    '%s: a refund through the store drops its cached denial, and the next call is decided by Redis as in memory',
    async (kind) => {
      const redis = await rig('redis', [RULES[kind]])
      const memory = await rig('memory', [RULES[kind]])
      for (const { at } of [redis, memory]) await at(0)
      const [second, secondInMemory] = [await redis.at(0), await memory.at(0)]
      expect((await redis.at(0)).allowed).toBe(false)
      expect((await memory.at(0)).allowed).toBe(false)
      await server.cli('CONFIG', 'RESETSTAT')
      expect((await redis.at(0)).reason).toBe('cache')
      expect(await scriptCalls()).toBe(0)
      await redis.limiter.refund('k', { decision: second })
      await memory.limiter.refund('k', { decision: secondInMemory })
      expect(await scriptCalls()).toBe(1)
      const again = await redis.at(0)
      expect(await scriptCalls()).toBe(2)
      expect(brief(again)).toEqual(brief(await memory.at(0)))
      expect([again.allowed, again.reason]).toEqual([true, 'rules'])
    },
  )
})

describe('the denied-key cache and penalties (Redis)', () => {
  it('a penalty keeps a cached denial: it can only put the next admission later', async () => {
    const { limiter, at } = await rig('redis', [RULES.fixedWindow])
    await at(0)
    await at(0)
    expect((await at(0)).reason).toBe('rules')
    await server.cli('CONFIG', 'RESETSTAT')
    expect((await limiter.penalize('k')).allowed).toBe(false)
    expect(await scriptCalls()).toBe(1)
    const cached = await at(10)
    expect([cached.allowed, cached.reason, cached.retryAfterMs]).toEqual([false, 'cache', 990])
    expect(await scriptCalls()).toBe(1)
  })
})

describe.each<StoreKind>(['memory', 'redis'])('refunds and concurrency (%s store)', (store) => {
  it('a refund gives a concurrency rule nothing back, with or without the decision: leases end by release', async () => {
    const { limiter, at } = await rig(store, [RULES.concurrency])
    await at(0)
    const second = await at(0)
    expect((await at(0)).allowed).toBe(false)
    await limiter.refund('k', { decision: second })
    await limiter.refund('k', { cost: 2 })
    const still = await at(0)
    expect([still.allowed, still.remaining, still.retryAfterMs]).toEqual([false, 0, 60_000])
    await limiter.release('k', second)
    expect((await at(0)).allowed).toBe(true)
  })
})

describe.each<StoreKind>(['memory', 'redis'])('blocks and refunds (%s store)', (store) => {
  it('a refund leaves a block standing: calls are answered blocked until it ends, then the refunded unit admits one', async () => {
    const { limiter, at } = await rig(store, [RULES.fixedWindow], { ms: 500 })
    const first = await at(0)
    await at(0)
    const starts = await at(0)
    expect([starts.allowed, starts.reason, starts.retryAfterMs]).toEqual([false, 'rules', 1000])
    await limiter.refund('k', { decision: first })
    const blocked = await at(100)
    expect([blocked.allowed, blocked.reason, blocked.retryAfterMs]).toEqual([false, 'blocked', 400])
    const after = await at(500)
    expect([after.allowed, after.reason, after.remaining]).toEqual([true, 'rules', 0])
  })

  it('a penalty on a blocked key answers the block, as a peek would', async () => {
    const { limiter, at } = await rig(store, [RULES.fixedWindow], { ms: 500 })
    await at(0)
    await at(0)
    await at(0)
    await at(100)
    const penalized = await limiter.penalize('k', { cost: 3 })
    expect([penalized.allowed, penalized.reason, penalized.retryAfterMs]).toEqual([false, 'blocked', 400])
  })
})

describe('the denied-key cache and another process (Redis)', () => {
  it("another process's refund is not seen until the cached retryAfterMs: stricter than Redis, never looser", async () => {
    const here = await rig('redis', [RULES.fixedWindow])
    const there = await rig('redis', [RULES.fixedWindow])
    const prefix = here.limiter.prefix
    const other = createLimiter({ rules: [RULES.fixedWindow], store: there.limiter.store, prefix })
    await here.at(0)
    await here.at(0)
    expect((await here.at(0)).reason).toBe('rules')
    await other.refund('k', { cost: 2 })
    expect((await other.peek('k')).allowed).toBe(true)
    const cached = await here.at(10)
    expect([cached.allowed, cached.reason, cached.retryAfterMs]).toEqual([false, 'cache', 990])
    const redis = await here.at(1000)
    expect([redis.allowed, redis.reason]).toEqual([true, 'rules'])
  })

  it('a block another process lifted stays cached here until its original end, then Redis admits', async () => {
    const here = await rig('redis', [RULES.fixedWindow], { ms: 500 })
    const there = await rig('redis', [RULES.fixedWindow], { ms: 500 })
    const prefix = here.limiter.prefix
    const other = createLimiter({
      rules: [RULES.fixedWindow],
      store: there.limiter.store,
      prefix,
      block: { ms: 500 },
    })
    await here.at(0)
    await here.at(0)
    expect((await here.at(0)).retryAfterMs).toBe(1000)
    await other.reset('k')
    expect((await other.peek('k')).allowed).toBe(true)
    const cached = await here.at(100)
    expect([cached.allowed, cached.reason, cached.retryAfterMs]).toEqual([false, 'blocked', 400])
    const redis = await here.at(500)
    expect([redis.allowed, redis.reason, redis.remaining]).toEqual([true, 'rules', 1])
  })
})

/** A RedisStore that prefetches (batches of up to 8 units, for 1000 ms), on a clock standing at T. */
async function prefetching() {
  const clock = () => T
  const client = await ioredis(server)
  const prefix = `layers${run++}`
  const store = new RedisStore({ client, clock, timeoutMs: 5000, prefetch: { units: 8, ms: 1000 } })
  /** Another process's store on the same Redis, without prefetch. */
  const other = new RedisStore({ client, clock })
  return { store, other, prefix }
}

const HOUR = fixedWindow({ limit: 100, windowMs: 3_600_000 }) as Rule

describe('prefetch and the rule kinds it does not serve (Redis)', () => {
  it.each<RuleKind>(['leakyBucket', 'warmUp', 'concurrency'])(
    '%s is never prefetched: every consume is a round trip, alone or beside a rule prefetch serves',
    async (kind) => {
      const { store, prefix } = await prefetching()
      for (const rules of [[RULES[kind]], [HOUR, RULES[kind]]]) {
        const limiter = createLimiter({ rules, store, prefix: `${prefix}-${rules.length}` })
        // A script's first call may go as EVALSHA, then EVAL on NOSCRIPT: another key loads it first.
        await limiter.consume('warm')
        await server.cli('CONFIG', 'RESETSTAT')
        const reasons = [(await limiter.consume('k')).reason, (await limiter.consume('k')).reason]
        expect(reasons).toEqual(['rules', 'rules'])
        expect(await scriptCalls()).toBe(2)
      }
      await store.close()
    },
  )
})

describe('prefetch and refunds (Redis)', () => {
  it('a refund naming a call answered from prefetched units gives its unit back in Redis; the units held stay', async () => {
    const { store, other, prefix } = await prefetching()
    const holder = createLimiter({ rules: [HOUR], store, prefix })
    const redis = createLimiter({ rules: [HOUR], store: other, prefix })
    const said = []
    for (let i = 0; i < 4; i++) said.push(await holder.consume('k'))
    expect(said.map((d) => d.reason)).toEqual(['rules', 'rules', 'prefetch', 'prefetch'])
    // Redis counts 7 (batches of 1, 2 and 4): 4 spent, 3 held.
    expect((await redis.peek('k')).remaining).toBe(100 - 7 - 1)
    await holder.refund('k', { decision: said[3]! })
    expect((await redis.peek('k')).remaining).toBe(100 - 6 - 1)
    expect((await holder.consume('k')).reason).toBe('prefetch')
    await store.close()
  })
})

describe('prefetch and another process (Redis)', () => {
  it("a block another process began is seen at the holder's next round trip: the units it holds are spent until then", async () => {
    const { store, other: otherStore, prefix } = await prefetching()
    const block = { ms: 60_000 }
    const holder = createLimiter({ rules: [HOUR], store, prefix, block })
    const other = createLimiter({ rules: [HOUR], store: otherStore, prefix, block })
    for (let i = 0; i < 4; i++) await holder.consume('k') // 7 counted in Redis, 3 held
    const denied = await other.consume('k', { cost: 94 })
    expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, 'rules', 3_600_000])
    // The second spend fetches ahead; its reply says the key is blocked, and the holder stops there.
    const said = []
    for (let i = 0; i < 4; i++) said.push((await holder.consume('k')).reason)
    expect(said).toEqual(['prefetch', 'prefetch', 'prefetch', 'blocked'])
    await store.close()
  })

  it("slidingLog: units spent after another process's reset are counted in the new state at the holder's next round trip", async () => {
    const { store, other: otherStore, prefix } = await prefetching()
    const log = slidingLog({ limit: 100, windowMs: 3_600_000 }) as Rule
    const holder = createLimiter({ rules: [log], store, prefix })
    const other = createLimiter({ rules: [log], store: otherStore, prefix })
    for (let i = 0; i < 4; i++) await holder.consume('k') // 7 logged in Redis, 3 held
    await other.reset('k')
    expect((await other.peek('k')).remaining).toBe(99)
    // Two spends after the reset; the second fetches ahead, carrying every unit spent since the holder's
    // previous round trip: the two, and the fourth call's, spent before the reset (such a unit counts twice).
    expect([(await holder.consume('k')).reason, (await holder.consume('k')).reason]).toEqual([
      'prefetch',
      'prefetch',
    ])
    // Closing returns what is held: nothing of the batch counted before the reset, all of the new one.
    await store.close()
    expect((await other.peek('k')).remaining).toBe(100 - 3 - 1)
  })
})

describe('prefetch and the denied-key cache (Redis)', () => {
  it('no denial is cached while this process holds prefetched units for the key: they stay spendable', async () => {
    const { store, other: otherStore, prefix } = await prefetching()
    const holder = createLimiter({ rules: [HOUR], store, prefix })
    const other = createLimiter({ rules: [HOUR], store: otherStore, prefix })
    // Batches of 1, then 2 (one unit left over), then 4 fetched ahead, which the fourth call joins: 3 held.
    const reasons = []
    for (let i = 0; i < 4; i++) reasons.push((await holder.consume('k')).reason)
    expect(reasons).toEqual(['rules', 'rules', 'prefetch', 'prefetch'])
    expect((await other.peek('k')).remaining).toBe(100 - 7 - 1)
    // Another process takes all but one unit; the holder's call of 5 is denied by Redis.
    expect((await other.consume('k', { cost: 92 })).remaining).toBe(1)
    const denied = await holder.consume('k', { cost: 5 })
    expect([denied.allowed, denied.reason]).toEqual([false, 'rules'])
    await server.cli('CONFIG', 'RESETSTAT')
    const again = await holder.consume('k', { cost: 5 })
    expect([again.allowed, again.reason]).toEqual([false, 'rules'])
    expect(await scriptCalls()).toBe(1)
    const held = [await holder.consume('k'), await holder.consume('k'), await holder.consume('k')]
    expect(held.map((d) => [d.allowed, d.reason])).toEqual([
      [true, 'prefetch'],
      [true, 'prefetch'],
      [true, 'prefetch'],
    ])
    await store.close()
  })
})

/** Requests and tokens per second: a call with per-rule costs, as a token budget makes one. */
const BUDGET = [
  fixedWindow({ limit: 10, windowMs: 1000, name: 'requests' }),
  fixedWindow({ limit: 100, windowMs: 1000, name: 'tokens' }),
] as Rule[]

describe('the denied-key cache and per-rule costs (Redis)', () => {
  async function denied() {
    const store = new RedisStore({ client: await ioredis(server), clock: () => T, timeoutMs: 5000 })
    const prefix = `layers${run++}`
    const first = await store.apply(prefix, 'k', BUDGET, [1, 100], 'consume')
    const answer = await store.apply(prefix, 'k', BUDGET, [1, 50], 'consume')
    expect([answer.map((d) => d.allowed), answer.reason]).toEqual([[true, false], undefined])
    await server.cli('CONFIG', 'RESETSTAT')
    return { store, prefix, first }
  }

  it("a cached denial answers a call of per-rule costs only when each is at least the denied call's", async () => {
    const { store, prefix } = await denied()
    for (const cost of [[1, 50], [2, 60], 50]) {
      expect((await store.apply(prefix, 'k', BUDGET, cost, 'consume')).reason).toBe('cache')
    }
    expect(await scriptCalls()).toBe(0)
    // Fewer tokens than the denied call's: Redis decides (and denies).
    const smaller = await store.apply(prefix, 'k', BUDGET, [1, 49], 'consume')
    expect([smaller.map((d) => d.allowed), smaller.reason]).toEqual([[true, false], undefined])
    expect(await scriptCalls()).toBe(1)
    await store.close()
  })

  it('a settle that gives back drops a cached denial; one that only counts more keeps it', async () => {
    const { store, prefix, first } = await denied()
    await store.adjust!(prefix, 'k', BUDGET, [1, 0], 'settle')
    expect((await store.apply(prefix, 'k', BUDGET, [1, 50], 'consume')).reason).toBe('cache')
    expect(await scriptCalls()).toBe(1)
    const marks = BUDGET.map((rule, i) => refundMark(rule, first[i]!, first.countedAt!))
    await store.adjust!(prefix, 'k', BUDGET, [0, -10], 'settle', undefined, marks)
    const asked = await store.apply(prefix, 'k', BUDGET, [1, 50], 'consume')
    expect([asked.map((d) => d.remaining), asked.reason]).toEqual([[8, 10], undefined])
    expect(await scriptCalls()).toBe(3)
    await store.close()
  })
})

describe('prefetch and per-rule costs (Redis)', () => {
  it('a call with per-rule costs is never spent from prefetched units: it goes to Redis, and the units held stay', async () => {
    const { store, other, prefix } = await prefetching()
    const rules = [HOUR, fixedWindow({ limit: 1000, windowMs: 3_600_000, name: 'tokens' })] as Rule[]
    const reasons = []
    for (let i = 0; i < 4; i++) reasons.push((await store.apply(prefix, 'k', rules, 1, 'consume')).reason)
    // Batches of 1, 2 and 4: 7 counted in Redis, 4 spent, 3 held.
    expect(reasons).toEqual([undefined, undefined, 'prefetch', 'prefetch'])
    await server.cli('CONFIG', 'RESETSTAT')
    const own = await store.apply(prefix, 'k', rules, [1, 5], 'consume')
    expect([own.map((d) => d.remaining), own.reason]).toEqual([[92, 988], undefined])
    expect(await scriptCalls()).toBe(1)
    expect((await store.apply(prefix, 'k', rules, 1, 'consume')).reason).toBe('prefetch')
    expect(await scriptCalls()).toBe(1)
    expect((await other.apply(prefix, 'k', rules, 1, 'peek')).map((d) => d.remaining)).toEqual([91, 987])
    await store.close()
  })
})
