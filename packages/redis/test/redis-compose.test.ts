/**
 * The composed script for long sequences of rules: a call may carry any number of rules, and the
 * generated foot must stay within Lua's limits (200 locals per function) and decide exactly as the memory
 * store does, admitted and denied, with ioredis and node-redis.
 */
import { createHash } from 'node:crypto'
import {
  concurrency,
  fixedWindow,
  MemoryStore,
  type Rule,
  type RuleDecision,
  type StoreAnswer,
  slidingLog,
  tokenBucket,
} from '@sluice/core'
import { type RedisClientLike, RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients, nodeRedis } from '../../../test/harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { CONSUME_LUA } from '../src/scripts.generated.ts'
import { encodeConsume, withDeadline } from '../src/wire.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** 120 rules of three kinds, named apart (each its own state identity); the tightest admits 2 calls. */
const RULES = Array.from({ length: 120 }, (_, i) => {
  const name = `r${i}`
  if (i % 3 === 0) return fixedWindow({ limit: i + 2, windowMs: 60_000, name })
  if (i % 3 === 1) return slidingLog({ limit: i + 2, windowMs: 60_000, name })
  return tokenBucket({ capacity: i + 2, refillPerSecond: 1, name })
}) as Rule[]

let run = 0
const T0 = 1_800_000_000_000

describe.each(CLIENT_KINDS)('RedisStore with 120 rules in one call (%s)', (kind) => {
  it('admits and denies all or nothing, exactly as the memory store', async () => {
    const client = await clientOf(kind, server)
    const now = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
    const prefix = `compose${run++}`
    for (let call = 0; call < 3; call++) {
      const expected = memory.apply(prefix, 'k', RULES, 1, 'consume')
      const actual = await redis.apply(prefix, 'k', RULES, 1, 'consume')
      expect(actual).toEqual(expected)
      expect(actual.every((d) => d.allowed)).toBe(call < 2)
    }
    expect(await redis.apply(prefix, 'k', RULES, 1, 'peek')).toEqual(
      memory.apply(prefix, 'k', RULES, 1, 'peek'),
    )
    memory.close()
  })
})

describe.each(CLIENT_KINDS)('the straight-down consume scripts (%s)', (kind) => {
  it("run one fixedWindow, slidingLog or concurrency rule's consume without a Lua function, and only that", async () => {
    const client = await clientOf(kind, server)
    const redis = new RedisStore({ client, deniedCache: false })
    const prefix = `lean${run++}`
    const bucket = tokenBucket({ capacity: 5, refillPerSecond: 1 }) as Rule
    const rules = [
      fixedWindow({ limit: 5, windowMs: 60_000 }),
      slidingLog({ limit: 5, windowMs: 60_000 }),
      concurrency({ limit: 5 }),
    ] as Rule[]
    for (const rule of rules) {
      const lua = CONSUME_LUA[rule.kind]!
      // Made no closure per call: the Redis time they save (bench/redis-time.mjs).
      expect(lua).not.toMatch(/\bfunction\s*[\w.:]*\s*\(/)
      const sha = createHash('sha1').update(lua).digest('hex')
      await server.cli('SCRIPT', 'FLUSH')
      // A peek or several rules take the composed script.
      await redis.apply(prefix, 'k', [rule], 1, 'peek')
      await redis.apply(prefix, 'k', [rule, bucket], 1, 'consume')
      expect((await server.cli('SCRIPT', 'EXISTS', sha)).trim()).toBe('0')
      const d = await redis.apply(prefix, 'k', [rule], 2, 'consume')
      expect((await server.cli('SCRIPT', 'EXISTS', sha)).trim()).toBe('1')
      // 1 unit counted with the token bucket, 2 now.
      expect(d[0]).toMatchObject({ allowed: true, remaining: 2 })
    }
  })

  it('reads a concurrency key past 64 ended leases, or past its limit + 64 leases, as the composed script does', async () => {
    const clock = { now: T0 }
    const redis = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      deniedCache: false,
    })
    const memory = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
    const prefix = `leases${run++}`
    const both = async (t: number, rule: Rule, cost: number) => {
      clock.now = T0 + t
      const r = await redis.apply(prefix, 'k', [rule], cost, 'consume')
      const m = memory.apply(prefix, 'k', [rule], cost, 'consume') as StoreAnswer
      const figures = (d: RuleDecision) => [d.allowed, d.remaining, d.resetMs, d.retryAfterMs]
      expect(figures(r[0]!)).toEqual(figures(m[0]!))
      return figures(r[0]!)
    }
    // 70 leases end at T0 + 1000, 5 at T0 + 1500: the first consume after drops 64 of the 70.
    const wide = concurrency({ limit: 100, leaseMs: 1000, name: 'wide' }) as Rule
    for (let i = 0; i < 70; i++) await both(0, wide, 1)
    for (let i = 0; i < 5; i++) await both(500, wide, 1)
    expect(await both(1000, wide, 1)).toEqual([true, 94, 1000, 0])
    // At most 64 ended leases dropped per call: 6 are left.
    expect(await server.cli('ZCARD', `sluice:${prefix}:{k}:${wide.id}`)).toBe('12\n')
    expect(await both(1000, wide, 90)).toEqual([true, 4, 1000, 0])
    expect(await both(1000, wide, 5)).toEqual([false, 4, 1000, 500])
    // 70 live leases of cost 0 on a limit of 1: more than limit + 64, all read.
    const narrow = concurrency({ limit: 1, leaseMs: 1000, name: 'narrow' }) as Rule
    for (let i = 0; i < 70; i++) await both(2000, narrow, 0)
    expect(await both(2100, narrow, 1)).toEqual([true, 0, 1000, 0])
    expect(await both(2200, narrow, 1)).toEqual([false, 0, 900, 900])
    memory.close()
  })
})

describe('the short call of a straight-down consume', () => {
  /** A node-redis client that keeps the ARGV of every EVALSHA it sends (after its numkeys and key). */
  async function recordingClient(sent: string[][]): Promise<RedisClientLike> {
    const client = await nodeRedis(server)
    return {
      isReady: true,
      sendCommand: (args: string[]) => {
        if (args[0] === 'EVALSHA') sent.push(args.slice(4))
        return client.sendCommand(args)
      },
    } as unknown as RedisClientLike
  }

  /**
   * A store on a recording client, on Redis's clock or on `clock`, with the ARGV it sends from now on in
   * `sent`: warmed up first, since a fresh store's first call goes twice (its deadline waits for a reply
   * to learn Redis's clock).
   */
  async function recordingStore(rule: Rule, sent: string[][], clock?: () => number): Promise<RedisStore> {
    const client = await recordingClient(sent)
    const store = new RedisStore(
      clock === undefined ? { client, deniedCache: false } : { client, clock, deniedCache: false },
    )
    await store.apply('warm', 'warm', [rule], 1, 'peek')
    sent.length = 0
    return store
  }

  it.each([
    ['fixedWindow', fixedWindow({ limit: 5, windowMs: 60_000 })],
    ['slidingLog', slidingLog({ limit: 5, windowMs: 60_000 })],
  ] as [string, Rule][])(
    '%s: sends the deadline, limit and windowMs, the cost only when not 1, the clock only when given, and decides as the memory store',
    async (_, rule) => {
      const sent: string[][] = []
      const prefix = `short${run++}`
      const onRedisClock = await recordingStore(rule, sent)
      expect((await onRedisClock.apply(prefix, 'k', [rule], 1, 'consume'))[0]).toMatchObject({
        allowed: true,
        remaining: 4,
      })
      expect((await onRedisClock.apply(prefix, 'k', [rule], 3, 'consume'))[0]).toMatchObject({
        allowed: true,
        remaining: 1,
      })
      // Denied: the full reply, with its retry.
      const denied = (await onRedisClock.apply(prefix, 'k', [rule], 2, 'consume'))[0]!
      expect(denied).toMatchObject({ allowed: false, remaining: 1 })
      expect(denied.retryAfterMs).toBeGreaterThan(0)
      expect(sent.map((argv) => argv.slice(1))).toEqual([
        ['5', '60000'],
        ['5', '60000', '3'],
        ['5', '60000', '2'],
      ])
      // The caller's clock goes last, after the cost, whatever the cost.
      const now = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
      const memory = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
      const onClock = await recordingStore(rule, sent, () => now)
      for (const cost of [1, 2, 3]) {
        const expected = memory.apply(prefix, 'c', [rule], cost, 'consume')
        expect(await onClock.apply(prefix, 'c', [rule], cost, 'consume')).toEqual(expected)
      }
      expect(sent.map((argv) => argv.slice(1))).toEqual([
        ['5', '60000', '1', String(now)],
        ['5', '60000', '2', String(now)],
        ['5', '60000', '3', String(now)],
      ])
      memory.close()
    },
  )

  it('concurrency: sends the deadline, limit and leaseMs, then the lease id, the cost only when not 1 and the clock only when given, and decides as the memory store', async () => {
    const rule = concurrency({ limit: 5, leaseMs: 60_000 }) as Rule
    const sent: string[][] = []
    const prefix = `short${run++}`
    const onRedisClock = await recordingStore(rule, sent)
    const one = (await onRedisClock.apply(prefix, 'k', [rule], 1, 'consume'))[0]!
    expect(one).toMatchObject({ allowed: true, remaining: 4, resetMs: 60_000 })
    const three = (await onRedisClock.apply(prefix, 'k', [rule], 3, 'consume'))[0]!
    expect(three).toMatchObject({ allowed: true, remaining: 1 })
    const denied = (await onRedisClock.apply(prefix, 'k', [rule], 2, 'consume'))[0]!
    expect(denied).toMatchObject({ allowed: false, remaining: 1 })
    expect('lease' in denied).toBe(false)
    expect(sent.map((argv) => argv.slice(1))).toEqual([
      ['5', '60000', one.lease],
      ['5', '60000', three.lease, '3'],
      ['5', '60000', expect.any(String), '2'],
    ])
    // The lease the call sent is the one Redis holds: releasing it frees its unit.
    await onRedisClock.adjust(prefix, 'k', [rule], 1, 'release', undefined, [one.lease])
    expect((await onRedisClock.apply(prefix, 'k', [rule], 2, 'consume'))[0]).toMatchObject({
      allowed: true,
      remaining: 0,
    })
    // The caller's clock goes last, after the cost, whatever the cost; the decisions are the memory store's
    // but for the lease ids, each store's own.
    const now = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
    const memory = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
    const onClock = await recordingStore(rule, sent, () => now)
    const leases: (string | undefined)[] = []
    for (const cost of [1, 2, 3]) {
      const [expected] = memory.apply(prefix, 'c', [rule], cost, 'consume') as StoreAnswer
      const [got] = await onClock.apply(prefix, 'c', [rule], cost, 'consume')
      leases.push(got!.lease)
      expect({ ...got, lease: got!.lease === undefined }).toEqual({
        ...expected,
        lease: expected!.lease === undefined,
      })
    }
    expect(sent.map((argv) => argv.slice(1))).toEqual([
      ['5', '60000', leases[0], '1', String(now)],
      ['5', '60000', leases[1], '2', String(now)],
      ['5', '60000', expect.any(String), '3', String(now)],
    ])
    memory.close()
  })

  it.each([
    ['fixedWindow', fixedWindow({ limit: 5, windowMs: 60_000 }), undefined],
    ['slidingLog', slidingLog({ limit: 5, windowMs: 60_000 }), undefined],
    ['concurrency', concurrency({ limit: 5, leaseMs: 60_000 }), 'lease-1:1'],
  ] as [string, Rule, string | undefined][])(
    '%s: a script that starts past the deadline in its first ARGV counts nothing',
    async (_, rule, lease) => {
      const key = `short${run++}`
      const call = withDeadline(
        encodeConsume(key, { ids: [rule.id], params: ['5', '60000'] }, undefined, 1, lease),
        1,
      )
      const reply = await server.cli('EVAL', CONSUME_LUA[rule.kind]!, '1', ...call.keys, ...call.args)
      expect(reply.split('\n')[0]).toBe('late')
      expect(await server.cli('EXISTS', call.keys[0]!)).toBe('0\n')
      // The same call with a deadline ahead counts.
      withDeadline(call, Date.now() + 60_000)
      const counted = await server.cli('EVAL', CONSUME_LUA[rule.kind]!, '1', ...call.keys, ...call.args)
      expect(counted.split('\n').slice(0, 3)).toEqual(['1', '4', expect.any(String)])
      expect(await server.cli('EXISTS', call.keys[0]!)).toBe('1\n')
    },
  )
})
