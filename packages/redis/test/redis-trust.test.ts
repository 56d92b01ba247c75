/**
 * Issue 24's store faults on a real Redis, each pinned by a test named for what broke, on both clients:
 * a concurrency rule starved behind the denied-key cache, late refunds that took a newer call's units,
 * weighted calls refused by meters, huge penalties past Redis's range, and batches lost on close; and
 * replies no script sends (NaN, negative, fractional) refused as store errors instead of admitting.
 * The memory store's side of the same traces is in packages/core/test/trust.test.ts.
 */
import {
  concurrency,
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { refundMark, type StoreAnswer } from '@sluice/core/store'
import { type RedisClientLike, RedisStore } from '@sluice/redis'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CLIENT_KINDS,
  type ClientKind,
  clientOf,
  closeClients,
  nodeRedis,
} from '../../../test/harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { HUGE_PENALTY_RULES, LATE_REFUND_RULES, WEIGHTED_METERS } from '../../core/test/support.ts'
import { decode, expectOk, fetchedOf, serverNowOf } from '../src/wire.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

let run = 0
const T0 = 1_800_000_000_000

/** A limiter on a fresh prefix, its RedisStore on a manual clock (`at` sets it and consumes). */
async function onClock(kind: ClientKind, rules: readonly RuleInput[], deniedCache = false) {
  const clock = { now: T0 }
  // A timeout no load reaches: a call answered by onStoreError would change what a trace counts.
  const store = new RedisStore({
    client: await clientOf(kind, server),
    clock: () => clock.now,
    deniedCache,
    timeoutMs: 10_000,
  })
  const limiter = createLimiter({ rules, store, prefix: `trust${run++}`, onStoreError: 'throw' })
  const move = (t: number) => {
    clock.now = T0 + t
  }
  const at = (t: number, cost = 1): Promise<Decision> => {
    move(t)
    return limiter.consume('k', { cost })
  }
  return { store, limiter, at, move }
}

describe.each(CLIENT_KINDS)('issue 24 on Redis (%s)', (kind) => {
  it('a concurrency denial is not cached: a lease released by another process admits the next call at once', async () => {
    const rules = [concurrency({ limit: 3, leaseMs: 600 })]
    const { limiter, at } = await onClock(kind, rules, true)
    // Another process on the same Redis, with its own store (and its own cache).
    const other = createLimiter({
      rules,
      store: new RedisStore({ client: await clientOf(kind, server), clock: () => T0 + 1, timeoutMs: 10_000 }),
      onStoreError: 'throw',
      prefix: limiter.prefix,
    })
    const held = [await at(0), await at(0), await at(0)]
    expect(held.map((d) => d.allowed)).toEqual([true, true, true])
    const denied = await at(1)
    expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, 'rules', 599])
    await other.release('k', held[0]!)
    const next = await at(2)
    expect([next.allowed, next.reason]).toEqual([true, 'rules'])
  })

  it('64 callers holding a concurrency lease for ~4 ms each are all admitted, none denied from the cache', async () => {
    // The figures: 64 callers in one process, concurrency({ limit: 3, leaseMs: 600 }), the
    // default store options (denied-key cache on, Redis's clock; only a timeout no load reaches). Each
    // caller tries until it is admitted, holds ~4 ms, releases. A cached denial would keep every caller
    // out for up to 600 ms per round.
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 10_000 })
    const limiter = createLimiter({
      rules: [concurrency({ limit: 3, leaseMs: 600 })],
      store,
      prefix: `trust${run++}`,
      onStoreError: 'throw',
    })
    let admitted = 0
    let fromCache = 0
    let attempts = 0
    const caller = async () => {
      while (attempts < 100_000) {
        attempts++
        const d = await limiter.consume('k')
        if (d.reason === 'cache') fromCache++
        if (d.allowed) {
          admitted++
          await new Promise((resolve) => setTimeout(resolve, 4))
          await limiter.release('k', d)
          return
        }
        await new Promise(setImmediate)
      }
    }
    await Promise.all(Array.from({ length: 64 }, caller))
    expect({ admitted, fromCache }).toEqual({ admitted: 64, fromCache: 0 })
  })
})

describe.each(CLIENT_KINDS)('late refunds on Redis (%s)', (kind) => {
  describe.each(Object.keys(LATE_REFUND_RULES))('%s', (rule) => {
    it('a late refund does not let an extra call in (the issue trace: 100, 1100–1120, refund at 1150, 1160 denied)', async () => {
      const { limiter, at, move } = await onClock(kind, [LATE_REFUND_RULES[rule]!])
      const first = await at(100)
      expect(first.allowed).toBe(true)
      expect([(await at(1100)).allowed, (await at(1110)).allowed, (await at(1120)).allowed]).toEqual([
        true,
        true,
        true,
      ])
      move(1150)
      await limiter.refund('k', { decision: JSON.parse(JSON.stringify(first)) })
      expect((await at(1160)).allowed).toBe(false)
    })

    it('a refund that names its call still gives its units back while they count', async () => {
      const { limiter, at, move } = await onClock(kind, [LATE_REFUND_RULES[rule]!])
      await at(1100)
      await at(1110)
      const third = await at(1120)
      expect((await at(1121)).allowed).toBe(false)
      move(1130)
      await limiter.refund('k', { decision: third })
      expect((await at(1130)).allowed).toBe(true)
      expect((await at(1131)).allowed).toBe(false)
    })
  })
})

/** Small numbers, so refunds land on both sides of window, bucket and slot edges. */
const refundRuleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc
    .record({ limit: fc.integer({ min: 1, max: 5 }), windowMs: fc.constantFrom(10, 50, 100) })
    .map((o) => fixedWindow(o) as Rule),
  fc
    .record({ limit: fc.integer({ min: 1, max: 6 }), windowMs: fc.constantFrom(10, 60, 100) })
    .map((o) => slidingLog(o) as Rule),
  fc
    .record({ limit: fc.integer({ min: 1, max: 8 }), buckets: fc.integer({ min: 1, max: 5 }) })
    .map(({ limit, buckets }) => slidingWindow({ limit, buckets, windowMs: buckets * 20 }) as Rule),
  fc
    .record({ capacity: fc.integer({ min: 1, max: 6 }), refillPerSecond: fc.constantFrom(3.7, 33.3, 100) })
    .map((o) => tokenBucket(o) as Rule),
  fc
    .record({ ratePerSecond: fc.constantFrom(7.5, 33.3, 100), maxQueueMs: fc.constantFrom(0, 50, 120) })
    .map((o) => leakyBucket(o) as Rule),
  fc
    .record({ ratePerSecond: fc.constantFrom(7.5, 33.3), maxQueueMs: fc.constantFrom(0, 50, 120) })
    .map((o) => warmUp({ ...o, warmUpMs: 200 }) as Rule),
  fc.constant(concurrency({ limit: 3, leaseMs: 40 }) as Rule),
)

describe.each(CLIENT_KINDS)('refunds that name their call, Redis against memory (%s)', (kind) => {
  it('give back exactly what the memory store gives back, field by field, on seeded random traces', async () => {
    const client = await clientOf(kind, server)
    let named = 0
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(refundRuleArb, { minLength: 1, maxLength: 2, selector: (r) => r.id }),
        fc.array(
          fc.record({
            jump: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 })),
            act: fc.constantFrom('consume', 'consume', 'consume', 'refundCall', 'refundCall', 'refund'),
            pick: fc.nat(),
            cost: fc.integer({ min: 1, max: 3 }),
          }),
          { minLength: 10, maxLength: 40 },
        ),
        async (rules, steps) => {
          let now = T0 + 1_000_000 * run
          const clock = () => now
          const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
          const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 5000 })
          const prefix = `named${run++}`
          const calls: { at: number; decisions: StoreAnswer }[] = []
          const history: string[] = [rules.map((r) => JSON.stringify(r)).join(' ')]
          for (const step of steps) {
            now += step.jump
            if (step.act === 'consume') {
              const e = memory.apply(prefix, 'k', rules, 1, 'consume')
              const a = await redis.apply(prefix, 'k', rules, 1, 'consume')
              const strip = (ds: StoreAnswer) => ds.map(({ lease, ...d }) => d)
              history.push(`${now} consume -> ${JSON.stringify(strip(e))}`)
              expect([strip(a), a.countedAt], history.join('\n')).toEqual([strip(e), e.countedAt])
              if (e.countedAt !== undefined) calls.push({ at: e.countedAt, decisions: e })
            } else if (step.act === 'refund') {
              memory.adjust(prefix, 'k', rules, step.cost, 'refund')
              await redis.adjust(prefix, 'k', rules, step.cost, 'refund')
              history.push(`${now} refund x${step.cost}`)
            } else {
              const call = calls[step.pick % Math.max(calls.length, 1)]
              if (call === undefined) continue
              const marks = rules.map((r, i) => refundMark(r, call.decisions[i]!, call.at))
              memory.adjust(prefix, 'k', rules, step.cost, 'refund', undefined, marks)
              await redis.adjust(prefix, 'k', rules, step.cost, 'refund', undefined, marks)
              history.push(`${now} refund x${step.cost} of the call at ${call.at} [${marks}]`)
              named++
            }
            // What each store holds now, as a peek of cost 1 reads it.
            const e = memory.apply(prefix, 'k', rules, 1, 'peek')
            const a = await redis.apply(prefix, 'k', rules, 1, 'peek')
            expect(a, history.join('\n')).toEqual(e)
          }
          memory.close()
          redis.close()
        },
      ),
      { numRuns: 60, seed: 24 },
    )
    expect(named).toBeGreaterThan(100)
  })
})

/** The same calls on a memory store and a Redis store, on one manual clock. */
async function twins(kind: ClientKind, rules: readonly RuleInput[]) {
  const clock = { now: T0 }
  const prefix = `twin${run++}`
  const redisStore = new RedisStore({
    client: await clientOf(kind, server),
    clock: () => clock.now,
    deniedCache: false,
    timeoutMs: 10_000,
  })
  const memory = createLimiter({ rules, prefix, store: new MemoryStore({ clock: () => clock.now }) })
  const redis = createLimiter({ rules, prefix, store: redisStore, onStoreError: 'throw' })
  return { clock, prefix, memory, redis }
}

describe.each(CLIENT_KINDS)('meters and penalties on Redis (%s)', (kind) => {
  describe.each(Object.keys(WEIGHTED_METERS))('%s with maxQueueMs 0', (rule) => {
    it('admits a weighted call (cost 2) on a fresh key instead of throwing InvalidCostError, as the memory store does', async () => {
      const { clock, memory, redis } = await twins(kind, [WEIGHTED_METERS[rule]!])
      for (const [t, cost] of [
        [100, 2],
        [100, 1],
        [1100, 1],
        [2100, 2],
        [3000, 2],
        [9000, 1],
      ] as const) {
        clock.now = T0 + t
        const e = await memory.consume('k', { cost })
        const a = await redis.consume('k', { cost })
        expect(a, `${t} x${cost}`).toEqual(e)
      }
      clock.now = T0 + 100
    })
  })

  describe.each(Object.keys(HUGE_PENALTY_RULES))('%s', (rule) => {
    it('refuses a penalty past the safe range with a coded error, and keeps the largest accepted one as long as it says', async () => {
      const r = HUGE_PENALTY_RULES[rule]! as Rule
      const { clock, prefix, memory, redis } = await twins(kind, [r])
      clock.now = T0 + 100
      await memory.consume('k')
      await redis.consume('k')
      // At 1 a second, 1e14 units would wait about 1e17 ms: Redis refused such an expiry and the penalty
      // was written with the old one.
      for (const limiter of [memory, redis]) {
        await expect(limiter.penalize('k', { cost: 1e14 })).rejects.toMatchObject({
          code: 'ERR_SLUICE_INVALID_COST',
        })
      }
      expect(await redis.peek('k')).toEqual(await memory.peek('k'))
      // The largest penalty these numbers accept: 2^50 ms of refill or of intervals (less what is held).
      const largest = Math.floor(2 ** 50 / 1000) - (rule === 'warmUp' ? 0 : 1)
      await expect(redis.penalize('k', { cost: largest + 1 })).rejects.toMatchObject({
        code: 'ERR_SLUICE_INVALID_COST',
      })
      const e = await memory.penalize('k', { cost: largest })
      const a = await redis.penalize('k', { cost: largest })
      expect(a).toEqual(e)
      expect(a.retryAfterMs).toBeGreaterThan(2 ** 49)
      const pttl = Number(await server.cli('PTTL', `sluice:${prefix}:{k}:${r.id}`))
      expect(pttl).toBeGreaterThanOrEqual(a.retryAfterMs)
      clock.now = T0 + 100 + 2 ** 49
      expect(await redis.peek('k')).toEqual(await memory.peek('k'))
      expect((await redis.peek('k')).allowed).toBe(false)
    })
  })
})

describe.each(CLIENT_KINDS)('closing with prefetch (%s)', (kind) => {
  it('close() with prefetch loses no batch in flight: Redis counts exactly the units spent', async () => {
    const clock = { now: T0 }
    const store = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      prefetch: { units: 64, ms: 60_000 },
      timeoutMs: 10_000,
    })
    const rule = fixedWindow({ limit: 100_000, windowMs: 3_600_000 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `close${run++}`, onStoreError: 'throw' })
    // Grow the batch: each call that finds no units doubles it, up to 64.
    let spent = 0
    for (let i = 0; i < 200; i++) if ((await limiter.consume('k')).allowed) spent++
    // A burst, and close() in the same tick: batches are on their way when the store closes.
    const burst = Array.from({ length: 300 }, () => limiter.consume('k'))
    const closed = store.close()
    for (const d of await Promise.allSettled(burst)) {
      if (d.status === 'fulfilled' && d.value.allowed) spent++
    }
    await closed
    // The window's count is the hash's one field, named by the window's start.
    expect(await server.cli('HVALS', `sluice:${limiter.prefix}:{k}:${rule.id}`)).toBe(`${spent}\n`)
  })
})

/** One fixedWindow rule, limit 5; a reply of the scripts' shape for it, admitted, at Redis ms `NOW`. */
const FORGED_RULE = fixedWindow({ limit: 5, windowMs: 1000 }) as Rule
const NOW = 1_800_000_000_000
const APPLY_REPLY = [1, 4, 1000, 0, 0, '', 0, NOW]
/** A fetch's reply: the same, then 3 units taken and the key's reset count '0'. */
const FETCH_REPLY = [1, 4, 1000, 0, 0, '', 0, 3, '0', NOW]
/** The short reply of an admitted call of one rule (sliding-log-consume.lua's). */
const ADMITTED_SHORT = [1, 4, 1000, NOW]
const forged = (reply: unknown[], at: number, value: unknown) => reply.map((v, i) => (i === at ? value : v))
const UNEXPECTED = /unexpected reply/

describe('replies no script sends are refused (wire.ts)', () => {
  it('decodes the scripts’ own replies', () => {
    expect(decode([5], [FORGED_RULE], APPLY_REPLY, false)[0][0]).toMatchObject({
      allowed: true,
      remaining: 4,
      resetMs: 1000,
    })
    expect(decode([5], [FORGED_RULE], ['blocked', 250, NOW], false)[0][0]).toMatchObject({
      allowed: false,
      retryAfterMs: 250,
    })
    // The short reply decodes to the decision the full form gives.
    expect(decode([5], [FORGED_RULE], ADMITTED_SHORT, false)).toEqual(
      decode([5], [FORGED_RULE], APPLY_REPLY, false),
    )
    expect(serverNowOf(ADMITTED_SHORT)).toBe(NOW)
    expect(fetchedOf(FETCH_REPLY, 4)).toEqual({ taken: 3, resets: '0', serverNow: NOW })
    expect(expectOk(['ok', NOW])).toBeUndefined()
    expect(serverNowOf(APPLY_REPLY)).toBe(NOW)
  })

  it.each<[string, number, unknown]>([
    ['allowed 2', 0, 2],
    ['allowed "yes"', 0, 'yes'],
    ['remaining NaN', 1, 'NaN'],
    ['remaining -1', 1, -1],
    ['resetMs not a number', 2, 'x'],
    ['resetMs infinite', 2, '1e999'],
    ['retryAfterMs -5', 3, -5],
    ['waitMs empty', 4, ''],
    ['waitMs nil', 4, null],
    ['the block begun -1', 6, -1],
  ])('a decision with %s throws the unexpected-reply StoreError', (_, at, value) => {
    expect(() => decode([5], [FORGED_RULE], forged(APPLY_REPLY, at, value), false)).toThrow(UNEXPECTED)
  })

  it.each<[string, number, unknown]>([
    ['allowed 0', 0, 0],
    ['allowed 2', 0, 2],
    ['remaining -1', 1, -1],
    ['resetMs not a number', 2, 'x'],
  ])('a short admitted reply with %s throws the unexpected-reply StoreError', (_, at, value) => {
    expect(() => decode([5], [FORGED_RULE], forged(ADMITTED_SHORT, at, value), false)).toThrow(UNEXPECTED)
  })

  it('a short admitted reply is refused for two rules, a fetch and a concurrency rule whose call sent no lease', () => {
    expect(() => decode([5, 5], [FORGED_RULE, FORGED_RULE], ADMITTED_SHORT, false)).toThrow(UNEXPECTED)
    expect(() => decode([5], [FORGED_RULE], ADMITTED_SHORT, true)).toThrow(UNEXPECTED)
    const lease = concurrency({ limit: 5, leaseMs: 1000 }) as Rule
    expect(() => decode([5], [lease], ADMITTED_SHORT, false)).toThrow(UNEXPECTED)
    expect(() => decode([5], [lease], ADMITTED_SHORT, false, '')).toThrow(UNEXPECTED)
  })

  it('a concurrency consume’s short admitted reply decodes to the full form holding the lease the call sent', () => {
    const rule = concurrency({ limit: 5, leaseMs: 1000 }) as Rule
    const full = [1, 4, 1000, 0, 0, 'p1:1', 0, NOW]
    expect(decode([5], [rule], ADMITTED_SHORT, false, 'p1:1')).toEqual(decode([5], [rule], full, false))
    expect(decode([5], [rule], ADMITTED_SHORT, false, 'p1:1')[0][0]).toMatchObject({ lease: 'p1:1' })
    expect(() => decode([5], [rule], forged(ADMITTED_SHORT, 0, 0), false, 'p1:1')).toThrow(UNEXPECTED)
  })

  it.each<unknown>([0, 'x', -3])('a blocked reply whose ms left is %s throws', (left) => {
    expect(() => decode([5], [FORGED_RULE], ['blocked', left, NOW], false)).toThrow(UNEXPECTED)
  })

  it.each<[string, number, unknown]>([
    ['taken not a number', 7, 'x'],
    ['taken fractional', 7, 1.5],
    ['taken -1', 7, -1],
    ['taken above want', 7, 5],
    ['a reset count not a whole number', 8, '1.5'],
    ['serverNow fractional', 9, NOW + 0.5],
  ])('a fetch with %s throws', (_, at, value) => {
    expect(() => fetchedOf(forged(FETCH_REPLY, at, value), 4)).toThrow(UNEXPECTED)
  })

  it('an act that only changes the state must answer ok', () => {
    expect(() => expectOk(['nope', NOW])).toThrow(UNEXPECTED)
    expect(() => expectOk(['ok', 'x'])).toThrow(UNEXPECTED)
    expect(() => expectOk(['ok'])).toThrow(UNEXPECTED)
    expect(serverNowOf([...APPLY_REPLY.slice(0, -1), NOW + 0.5])).toBeUndefined()
  })
})

/**
 * A real node-redis client whose script replies pass through `forge`: a Redis (or a proxy) that answers what
 * the scripts never do.
 */
async function forgingClient(forge: { reply?: (reply: unknown[]) => unknown[] }): Promise<RedisClientLike> {
  const client = await nodeRedis(server)
  return {
    isReady: true,
    sendCommand: async (args: string[]) => {
      const reply = await client.sendCommand(args)
      const isScript = args[0] === 'EVALSHA' || args[0] === 'EVAL'
      return isScript && Array.isArray(reply) && forge.reply ? forge.reply(reply) : reply
    },
  } as unknown as RedisClientLike
}

describe('replies no script sends, end to end (node-redis, forged by the client)', () => {
  it.each<[string, number, unknown]>([
    ['taken not a number', 7, 'x'],
    ['resetMs not a number', 2, 'x'],
    ['remaining -1', 1, -1],
  ])(
    'a prefetch fetch answered with %s fails every call as a store error and admits none',
    async (_, at, value) => {
      // Before: a NaN batch (left or until) was spent locally without limit, for ever.
      const clock = { now: T0 }
      const forge = { reply: (r: unknown[]) => (r.length === 10 ? forged(r, at, value) : r) }
      const store = new RedisStore({
        client: await forgingClient(forge),
        clock: () => clock.now,
        prefetch: true,
        timeoutMs: 10_000,
      })
      const limiter = createLimiter({
        rules: [fixedWindow({ limit: 5, windowMs: 60_000 })],
        store,
        prefix: `forged${run++}`,
        onStoreError: 'throw',
      })
      const outcomes: string[] = []
      for (let i = 0; i < 20; i++) {
        clock.now = T0 + i
        try {
          outcomes.push((await limiter.consume('k')).allowed ? 'admitted' : 'denied')
        } catch (error) {
          outcomes.push(
            error instanceof Error && UNEXPECTED.test(error.message) ? 'store error' : String(error),
          )
        }
      }
      expect(outcomes).toEqual(Array(20).fill('store error'))
      // With onStoreError 'deny', the same replies deny through the limiter's store-error path.
      const denying = createLimiter({
        rules: [fixedWindow({ limit: 5, windowMs: 60_000 })],
        store,
        prefix: `forged${run++}`,
        onStoreError: 'deny',
      })
      const d = await denying.consume('k')
      expect([d.allowed, d.reason]).toEqual([false, 'store-error'])
      await store.close()
    },
  )

  it('a decision with NaN remaining, or a refund answered other than ok, fails the call as a store error', async () => {
    const forge: { reply?: (r: unknown[]) => unknown[] } = {
      reply: (r) => (r.length === 8 ? forged(r, 1, 'NaN') : r),
    }
    const store = new RedisStore({
      client: await forgingClient(forge),
      deniedCache: false,
      timeoutMs: 10_000,
    })
    const prefix = `forged${run++}`
    // A peek gets the full form.
    await expect(store.apply(prefix, 'k', [FORGED_RULE], 1, 'peek')).rejects.toThrow(UNEXPECTED)
    // A fixedWindow or slidingLog consume's short admitted reply is checked as the full form is.
    forge.reply = (r) => (r.length === 4 ? forged(r, 1, 'NaN') : r)
    await expect(store.apply(prefix, 'k', [FORGED_RULE], 1, 'consume')).rejects.toThrow(UNEXPECTED)
    const log = slidingLog({ limit: 5, windowMs: 1000 }) as Rule
    await expect(store.apply(prefix, 'log', [log], 1, 'consume')).rejects.toThrow(UNEXPECTED)
    forge.reply = (r) => (r.length === 2 && r[0] === 'ok' ? ['nope', r[1]] : r)
    await expect(store.adjust(prefix, 'k', [FORGED_RULE], 1, 'refund')).rejects.toThrow(UNEXPECTED)
    forge.reply = undefined
    await expect(store.adjust(prefix, 'k', [FORGED_RULE], 1, 'refund')).resolves.toBeUndefined()
    await store.close()
  })
})
