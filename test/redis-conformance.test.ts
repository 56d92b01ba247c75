/**
 * Store conformance: the shared cases (store-conformance.ts) run MemoryStore and RedisStore through the
 * same random traces (driven by one clock) and ask for identical per-rule decisions, field by field, for
 * every algorithm, several rules per key, several keys, costs above 1, per-rule costs, peeks, refunds,
 * penalties, settles, queued slots given back, blocks that escalate, and many calls in the same millisecond;
 * with every client kind.
 */
import { MemoryStore, slidingLog } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ClientKind, clientOf, closeClients, STORE_CLIENT_KINDS, versionOf } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'
import {
  agreesAtEdges,
  agreesOnLongLogs,
  answersRandomTraces,
  asRule,
  givesQueuedSlotsBack,
  holdsWorkedExample,
} from './store-conformance.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

describe('the client libraries under test', () => {
  it.each<[ClientKind, string]>([
    ['ioredis', '6.'],
    ['node-redis', '6.'],
    ['ioredis@5', '5.'],
    ['node-redis@5', '5.'],
    ['iovalkey', '0.4.'],
    ['glide', '2.5.'],
  ])('%s is major %s', (kind, major) => {
    expect(versionOf(kind).startsWith(major)).toBe(true)
  })
})

describe.each(STORE_CLIENT_KINDS)('RedisStore conformance with MemoryStore (%s)', (kind) => {
  it('answers every random trace exactly as the memory store does', async () => {
    const client = await clientOf(kind, server)
    await answersRandomTraces(
      (clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }),
    )
  })

  it('answers every random trace of per-rule costs and settles exactly as the memory store does', async () => {
    const client = await clientOf(kind, server)
    await answersRandomTraces(
      (clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }),
      {},
      { perRuleCosts: true },
    )
  })

  it('gives queued slots back exactly as the memory store does (leaky buckets, abandoned waits)', async () => {
    const client = await clientOf(kind, server)
    await givesQueuedSlotsBack(
      (clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }),
    )
  })

  it('logs a sliding-log call of cost 1,000,000 as one member, not one per unit (it blocked Redis 1.5 s)', async () => {
    const client = await clientOf(kind, server)
    let now = 1_800_000_000_000
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const redis = new RedisStore({ client, clock, deniedCache: false })
    const rules = [asRule(slidingLog({ limit: 2_500_000, windowMs: 60_000 }))]
    const prefix = `big-${kind}`
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
    await agreesOnLongLogs((clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }))
  })

  it('decides like the memory store at the edges of the figures the factories accept (a refill of 1e-13 a second kept Redis BUSY)', async () => {
    const client = await clientOf(kind, server)
    await agreesAtEdges((clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }))
  })

  it('holds the DESIGN worked example (slidingLog, limit 2 per 1000 ms)', async () => {
    const client = await clientOf(kind, server)
    await holdsWorkedExample(
      (clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }),
    )
  })
})
