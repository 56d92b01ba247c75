/**
 * State identity: a rule's state is keyed by its kind, its shape and its given name, never by its limit,
 * capacity or rate. An edited limit judges the counts the old one built, in the memory store and in the
 * Redis store alike (one manual clock drives both, and they must answer the same). Regression: lowering a
 * fixed window's limit from 4 to 2 after 3 calls used to reset the counts and admit 5 in one minute.
 */
import {
  concurrency,
  createLimiter,
  createLimitTable,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  type Store,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

const T0 = 1_800_000_000_000 // a multiple of 60,000: the minute starts here

type StoreKind = 'memory' | (typeof CLIENT_KINDS)[number]
const STORES: readonly StoreKind[] = ['memory', ...CLIENT_KINDS]
let run = 0

/** A limiter on `kind` whose rules are `current`, with a manual clock. */
async function rig(kind: StoreKind, first: readonly RuleInput[]) {
  const clock = { now: T0 }
  let store: Store
  if (kind === 'memory') store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  else {
    const client = await clientOf(kind, server)
    store = new RedisStore({ client, clock: () => clock.now, deniedCache: false, timeoutMs: 2000 })
  }
  const state = { rules: first }
  const prefix = `identity${run++}`
  const limiter = createLimiter({ rules: () => state.rules, store, prefix, onStoreError: 'throw' })
  const at = async (t: number, cost = 1): Promise<Decision> => {
    clock.now = T0 + t
    return limiter.consume('k', { cost })
  }
  return { clock, state, limiter, at, prefix }
}

const brief = (d: Decision) => ({
  allowed: d.allowed,
  limit: d.limit,
  remaining: d.remaining,
  retryAfterMs: d.retryAfterMs,
})

describe.each(STORES)('state identity (%s)', (kind) => {
  // When the call denied at 3 could pass: the fixed window ends at 60,000; the log needs its two oldest
  // entries (at 0 and 1) gone, the second leaving at 60,001; the 10 s bucket holding all three leaves at 60,000.
  it.each([
    ['fixedWindow', (limit: number) => fixedWindow({ limit, windowMs: 60_000 }), 60_000],
    ['slidingLog', (limit: number) => slidingLog({ limit, windowMs: 60_000 }), 60_001],
    ['slidingWindow', (limit: number) => slidingWindow({ limit, windowMs: 60_000, buckets: 6 }), 60_000],
  ])(
    '%s: limit 4 -> 2 after 3 calls denies the 4th; raised to 5 it admits 2 more, not 5',
    async (_, rule, passes) => {
      const r = await rig(kind, [rule(4)])
      expect(brief(await r.at(0))).toEqual({ allowed: true, limit: 4, remaining: 3, retryAfterMs: 0 })
      expect(brief(await r.at(1))).toEqual({ allowed: true, limit: 4, remaining: 2, retryAfterMs: 0 })
      expect(brief(await r.at(2))).toEqual({ allowed: true, limit: 4, remaining: 1, retryAfterMs: 0 })
      r.state.rules = [rule(2)]
      const denied = await r.at(3)
      expect(denied).toMatchObject({ allowed: false, limit: 2, remaining: 0, rule: '2-per-60s' })
      expect(denied.retryAfterMs).toBe(passes - 3)
      r.state.rules = [rule(5)]
      expect(brief(await r.at(4))).toEqual({ allowed: true, limit: 5, remaining: 1, retryAfterMs: 0 })
      expect(brief(await r.at(5))).toEqual({ allowed: true, limit: 5, remaining: 0, retryAfterMs: 0 })
      expect((await r.at(6)).allowed).toBe(false)
      // At the window's edge the first calls' counts are gone.
      expect(brief(await r.at(59_999))).toMatchObject({ allowed: false })
      expect(brief(await r.at(60_000))).toMatchObject({ allowed: true })
      r.limiter.close()
    },
  )

  it('a token bucket whose capacity is lowered holds at most the new capacity; raised again, it refills from there', async () => {
    const bucket = (capacity: number) => tokenBucket({ capacity, refillPerSecond: 1 })
    const r = await rig(kind, [bucket(10)])
    expect(brief(await r.at(0, 2))).toEqual({ allowed: true, limit: 10, remaining: 8, retryAfterMs: 0 })
    r.state.rules = [bucket(5)]
    // 8 tokens, capped at 5: one call leaves 4.
    expect(brief(await r.at(0))).toEqual({ allowed: true, limit: 5, remaining: 4, retryAfterMs: 0 })
    r.state.rules = [bucket(10)]
    // Not refilled to 10 by the edit: 4 left, then 1 a second.
    expect(brief(await r.at(0))).toEqual({ allowed: true, limit: 10, remaining: 3, retryAfterMs: 0 })
    expect(brief(await r.at(2000))).toEqual({ allowed: true, limit: 10, remaining: 4, retryAfterMs: 0 })
    expect(brief(await r.at(2000, 5))).toEqual({
      allowed: false,
      limit: 10,
      remaining: 4,
      retryAfterMs: 1000,
    })
    r.limiter.close()
  })

  it('a leaky bucket whose rate changes keeps its queue: the new rate spaces the calls behind it', async () => {
    const meter = (ratePerSecond: number) => leakyBucket({ ratePerSecond, maxQueueMs: 0 })
    const r = await rig(kind, [meter(1)])
    expect((await r.at(0)).allowed).toBe(true)
    expect(brief(await r.at(100))).toMatchObject({ allowed: false, retryAfterMs: 900 })
    r.state.rules = [meter(5)]
    // Under 5 a second the call at 0 holds its slot for 200 ms, not 1000.
    expect(brief(await r.at(199))).toMatchObject({ allowed: false, retryAfterMs: 1 })
    expect((await r.at(200)).allowed).toBe(true)
    r.limiter.close()
  })

  it('a token bucket past `until` refunds nothing, even after an edit: it reads as a fresh, full bucket', async () => {
    const bucket = (capacity: number) => tokenBucket({ capacity, refillPerSecond: 1 })
    const r = await rig(kind, [bucket(2)])
    expect(brief(await r.at(0, 2))).toEqual({ allowed: true, limit: 2, remaining: 0, retryAfterMs: 0 })
    // Full again at 2000 under capacity 2; from then on a fresh bucket under any capacity.
    r.state.rules = [bucket(10)]
    r.clock.now = T0 + 2000
    await r.limiter.refund('k', { cost: 1 })
    expect(brief(await r.at(2000, 10))).toEqual({ allowed: true, limit: 10, remaining: 0, retryAfterMs: 0 })
    r.limiter.close()
  })

  it('a warmUp meter whose rate changes keeps its next slot; its figures are not its identity', async () => {
    const meter = (ratePerSecond: number) => warmUp({ ratePerSecond, warmUpMs: 1000 })
    const r = await rig(kind, [meter(10)])
    // Cold: the first call pays (300 + 260) / 2 ms for the permit it takes.
    expect((await r.at(0)).allowed).toBe(true)
    expect(brief(await r.at(100))).toMatchObject({ allowed: false, retryAfterMs: 180 })
    r.state.rules = [meter(20)]
    expect(brief(await r.at(100))).toMatchObject({ allowed: false, retryAfterMs: 180 })
    expect((await r.at(280)).allowed).toBe(true)
    r.limiter.close()
  })

  it('a concurrency rule whose limit changes keeps its live leases', async () => {
    const held = (limit: number) => concurrency({ limit })
    const r = await rig(kind, [held(3)])
    expect(brief(await r.at(0))).toEqual({ allowed: true, limit: 3, remaining: 2, retryAfterMs: 0 })
    expect(brief(await r.at(0))).toEqual({ allowed: true, limit: 3, remaining: 1, retryAfterMs: 0 })
    r.state.rules = [held(2)]
    expect(await r.at(1)).toMatchObject({ allowed: false, limit: 2, remaining: 0 })
    r.state.rules = [held(5)]
    expect(brief(await r.at(2))).toEqual({ allowed: true, limit: 5, remaining: 2, retryAfterMs: 0 })
    r.limiter.close()
  })

  it('a given name is part of the identity (a renamed rule starts afresh); a default name is not', async () => {
    const r = await rig(kind, [fixedWindow({ limit: 3, windowMs: 60_000 })])
    await r.at(0)
    await r.at(0)
    r.state.rules = [fixedWindow({ limit: 3, windowMs: 60_000, name: 'pay' })]
    expect((await r.at(0)).remaining).toBe(2)
    r.state.rules = [fixedWindow({ limit: 9, windowMs: 60_000, name: 'pay' })]
    expect((await r.at(0)).remaining).toBe(7)
    r.state.rules = [fixedWindow({ limit: 3, windowMs: 60_000 })]
    expect(await r.at(0)).toMatchObject({ allowed: true, remaining: 0 })
    expect((await r.at(0)).allowed).toBe(false)
    // A new shape is a new state.
    r.state.rules = [fixedWindow({ limit: 3, windowMs: 30_000 })]
    expect((await r.at(0)).remaining).toBe(2)
    if (kind !== 'memory') {
      const keys = (await server.cli('KEYS', `sluice:${r.prefix}:*`)).trim().split('\n').sort()
      expect(keys).toEqual([
        `sluice:${r.prefix}:{k}:fixedWindow:30000`,
        `sluice:${r.prefix}:{k}:fixedWindow:60000`,
        `sluice:${r.prefix}:{k}:fixedWindow:60000@pay`,
      ])
    }
    r.limiter.close()
  })

  it('a limit table edit keeps the counts: rules: (key) => table.get(key)', async () => {
    const table = createLimitTable({ k: [{ kind: 'fixedWindow', limit: 4, windowMs: 60_000 }] })
    const clock = { now: T0 }
    const store =
      kind === 'memory'
        ? new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
        : new RedisStore({
            client: await clientOf(kind, server),
            clock: () => clock.now,
            deniedCache: false,
          })
    const limiter = createLimiter({ rules: (key) => table.get(key), store, prefix: `table${run++}` })
    for (let i = 0; i < 3; i++) expect((await limiter.consume('k')).allowed).toBe(true)
    await table.set('k', [{ kind: 'fixedWindow', limit: 2, windowMs: 60_000 }])
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, limit: 2, remaining: 0 })
    await table.set('k', null)
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, reason: 'unlimited' })
    limiter.close()
  })
})

it('rules of one call may not share an identity, whatever their limits (both stores reject before any store call)', () => {
  const two: Rule[] = [
    fixedWindow({ limit: 4, windowMs: 60_000 }) as Rule,
    fixedWindow({ limit: 9, windowMs: 60_000 }) as Rule,
  ]
  expect(() => createLimiter({ rules: two })).toThrow(
    expect.objectContaining({ code: 'ERR_SLUICE_DUPLICATE_RULE', identity: 'fixedWindow:60000' }),
  )
})
