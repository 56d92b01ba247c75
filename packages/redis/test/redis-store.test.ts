/**
 * RedisStore on one server: options checked at construction, TTLs set and bounded, idle keys gone,
 * reset, close leaving the client open, the denied-key cache (a flood of denials costs ~0 Redis commands),
 * and the embedded scripts in sync with src/scripts/*.lua.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import {
  createLimiter,
  ErrorCode,
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients, ioredis } from '../../../test/harness/clients.ts'
import { commandCalls, type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

const asRule = (r: RuleInput): Rule => r as Rule
let run = 0

describe('RedisStore options', () => {
  it('rejects bad options at construction, naming them', async () => {
    const client = await ioredis(server)
    const bad: [object, string][] = [
      [{}, 'RedisStore.client'],
      [{ client: {} }, 'RedisStore.client'],
      [{ client, prefix: '' }, 'RedisStore.prefix'],
      [{ client, prefix: 'a{b' }, 'RedisStore.prefix'],
      [{ client, prefix: 'a b' }, 'RedisStore.prefix'],
      [{ client, timeoutMs: 0 }, 'RedisStore.timeoutMs'],
      [{ client, timeoutMs: 1.5 }, 'RedisStore.timeoutMs'],
      [{ client, maxInFlight: -1 }, 'RedisStore.maxInFlight'],
      [{ client, clock: 5 }, 'RedisStore.clock'],
      [{ client, deniedCache: 'yes' }, 'RedisStore.deniedCache'],
      [{ client, deniedCache: { maxKeys: 0 } }, 'RedisStore.deniedCache.maxKeys'],
      [{ client, deniedCache: { size: 5 } }, 'RedisStore.deniedCache.size'],
      [{ client, prefetch: 'yes' }, 'RedisStore.prefetch'],
      [{ client, prefetch: [] }, 'RedisStore.prefetch'],
      [{ client, prefetch: { units: 0 } }, 'RedisStore.prefetch.units'],
      [{ client, prefetch: { units: 2.5 } }, 'RedisStore.prefetch.units'],
      [{ client, prefetch: { ms: 0 } }, 'RedisStore.prefetch.ms'],
      [{ client, prefetch: { ms: 60_001 } }, 'RedisStore.prefetch.ms'],
      [{ client, prefetch: { size: 5 } }, 'RedisStore.prefetch.size'],
      [{ client, timeoutMS: 50 }, 'RedisStore.timeoutMS'],
      // Regressions from an outside trial: each of these was accepted.
      [{ client, deniedCache: [] }, 'RedisStore.deniedCache'],
      [
        Object.assign(Object.create({ timeoutMs: 0 }), { client, timeoutMs: undefined, ...{ clock: 'now' } }),
        'RedisStore.clock',
      ],
      [{ client, prefix: 'a:b' }, 'RedisStore.prefix'],
      [{ client, timeoutMs: 2 ** 31 }, 'RedisStore.timeoutMs'],
    ]
    for (const [options, option] of bad) {
      let error: unknown
      try {
        new RedisStore(options as never)
      } catch (e) {
        error = e
      }
      expect(error, option).toBeInstanceOf(InvalidOptionError)
      expect((error as InvalidOptionError).option).toBe(option)
      expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
    }
    expect(() => new RedisStore({ client, prefix: undefined, timeoutMs: undefined })).not.toThrow()
    // Inherited properties are not options: only the client's own names are read.
    const inherited = Object.assign(Object.create({ timeoutMs: 0, prefix: '' }), { client })
    expect(() => new RedisStore(inherited)).not.toThrow()
  })

  it('ships scripts.generated.ts in sync with src/scripts/*.lua', () => {
    const script = fileURLToPath(new URL('../scripts/embed-lua.mjs', import.meta.url))
    expect(() => execFileSync('node', [script, '--check'], { stdio: 'pipe' })).not.toThrow()
  })
})

describe.each(CLIENT_KINDS)('RedisStore keys (%s)', (kind) => {
  it('drops a sliding-log key written one member per unit (as before one entry per call) instead of failing on it', async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, deniedCache: false })
    const prefix = `old-log${run++}`
    const rule = asRule(slidingLog({ limit: 3, windowMs: 60_000 }))
    const key = `sluice:${prefix}:{k}:${rule.id}`
    const t = String(Number((await server.cli('TIME')).split('\n')[0]) * 1000)
    await server.cli('ZADD', key, t, `${t}:0`, t, `${t}:1`)
    const [d] = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(d).toMatchObject({ allowed: true, remaining: 2 })
    expect(await server.cli('ZCARD', key)).toBe('1\n')
  })

  it('drops at most 64 expired sliding-log members a call, and counts the live ones behind them exactly', async () => {
    const client = await clientOf(kind, server)
    // Consumes of one rule run the straight-down script; a peek, a penalty and a refund the composed one.
    for (const act of ['consume', 'peek', 'penalize', 'refund'] as const) {
      let now = 1_700_000_000_000
      const clock = () => now
      const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
      const store = new RedisStore({ client, deniedCache: false, clock })
      const prefix = `long-expiry${run++}`
      const rule = asRule(slidingLog({ limit: 106, windowMs: 1000 }))
      const key = `sluice:${prefix}:{k}:${rule.id}`
      const both = async (cost: number, mode: 'consume' | 'peek') => {
        const expected = memory.apply(prefix, 'k', [rule], cost, mode)
        expect(await store.apply(prefix, 'k', [rule], cost, mode), `${act}: ${mode} x${cost}`).toEqual(
          expected,
        )
        return expected[0]!
      }
      // 100 calls in one ms, then three of 2 units half a window later.
      for (let i = 0; i < 100; i++) await both(1, 'consume')
      now += 500
      for (let i = 0; i < 3; i++) await both(2, 'consume')
      expect(await server.cli('ZCARD', key)).toBe('103\n')
      // The 100 expire together: the first call after drops 64 of them and reads the 6 live units past
      // the other 36; the next drops those.
      now += 500
      if (act === 'consume') {
        expect(await both(1, 'consume')).toMatchObject({ allowed: true, remaining: 99 })
        expect(await server.cli('ZCARD', key)).toBe('40\n')
      } else if (act === 'peek') {
        expect(await both(100, 'peek')).toMatchObject({ allowed: true, remaining: 0 })
        expect(await both(101, 'peek')).toMatchObject({ allowed: false, remaining: 100, retryAfterMs: 500 })
        expect(await server.cli('ZCARD', key)).toBe('3\n')
      } else {
        await memory.adjust(prefix, 'k', [rule], 1, act)
        await store.adjust(prefix, 'k', [rule], 1, act)
        // A penalty reads the log twice (to count, then to answer as a peek): up to 64 members each time.
        expect(await server.cli('ZCARD', key)).toBe(act === 'penalize' ? '4\n' : '39\n')
      }
      expect(await both(1, 'peek')).toMatchObject({ allowed: true })
      await both(101, 'consume')
      await both(1, 'consume')
      expect(Number(await server.cli('ZCARD', key))).toBeLessThanOrEqual(6)
      memory.close()
    }
  })

  it('counts on from a fixed-window key of the earlier { s, c } shape, and keeps one field after', async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, deniedCache: false, clock: () => 1_000_000 })
    const prefix = `old-window${run++}`
    const rule = asRule(fixedWindow({ limit: 3, windowMs: 60_000 }))
    const key = `sluice:${prefix}:{k}:${rule.id}`
    // Two units counted in the window starting at 960000, written by the earlier shape.
    await server.cli('HSET', key, 's', '960000', 'c', '2')
    await server.cli('PEXPIRE', key, '60000')
    const [peek] = await store.apply(prefix, 'k', [rule], 1, 'peek')
    expect(peek).toMatchObject({ allowed: true, remaining: 0 })
    const [d] = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(d).toMatchObject({ allowed: true, remaining: 0 })
    // The window's count, alone, in the field named by its start.
    expect(await server.cli('HGETALL', key)).toBe('960000\n3\n')
    const [denied] = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(denied).toMatchObject({ allowed: false, remaining: 0 })
    // A denied call takes its units back: the count stands.
    expect(await server.cli('HGETALL', key)).toBe('960000\n3\n')
  })

  it('gives every key a TTL no longer than its rule needs, and idle keys disappear', async () => {
    const client = await clientOf(kind, server)
    const admin = await ioredis(server)
    const store = new RedisStore({ client })
    const prefix = `ttl${run++}`
    const rules: [Rule, number][] = [
      [asRule(fixedWindow({ limit: 5, windowMs: 400 })), 400],
      [asRule(slidingLog({ limit: 5, windowMs: 300 })), 300],
      [asRule(slidingWindow({ limit: 5, windowMs: 500, buckets: 5 })), 500],
      // 2 tokens short at 10 per second: full again within 200 ms.
      [asRule(tokenBucket({ capacity: 5, refillPerSecond: 10 })), 200],
      // Drained within ceil((2 + limit 4) * 1000 / 20) = 300 ms of the queue's start.
      [leakyBucket({ ratePerSecond: 20, maxQueueMs: 150 }), 300],
    ]
    const all = rules.map(([r]) => r)
    await store.apply(prefix, 'k', all, 1, 'consume')
    await store.apply(prefix, 'k', all, 1, 'consume')
    for (const [rule, bound] of rules) {
      const name = `sluice:${prefix}:{k}:${rule.id}`
      const pttl = await admin.pttl(name)
      expect(pttl, rule.id).toBeGreaterThan(0)
      expect(pttl, rule.id).toBeLessThanOrEqual(bound)
    }
    await sleep(550)
    expect(await admin.keys(`sluice:${prefix}:*`)).toEqual([])
  })

  it('never writes a key on peek, and reset deletes every rule key, keeping only a count of resets', async () => {
    const client = await clientOf(kind, server)
    const admin = await ioredis(server)
    const store = new RedisStore({ client })
    const prefix = `reset${run++}`
    const rules = [
      asRule(slidingLog({ limit: 2, windowMs: 60_000 })),
      asRule(tokenBucket({ capacity: 2, refillPerSecond: 0.01 })),
    ]
    await store.apply(prefix, 'k', rules, 1, 'peek')
    expect(await admin.keys(`sluice:${prefix}:*`)).toEqual([])
    await store.apply(prefix, 'k', rules, 2, 'consume')
    expect((await store.apply(prefix, 'k', rules, 1, 'consume')).every((d) => d.allowed)).toBe(false)
    expect(await admin.keys(`sluice:${prefix}:*`)).toHaveLength(2)
    await store.reset(prefix, 'k', rules)
    // The count tells processes holding prefetched units for the key that their state is gone; it expires.
    expect(await admin.keys(`sluice:${prefix}:*`)).toEqual([`sluice:${prefix}:{k}:!resets`])
    expect(await admin.pttl(`sluice:${prefix}:{k}:!resets`)).toBeGreaterThan(60_000)
    // The denied-key cache forgot the key too: the next call is admitted.
    expect((await store.apply(prefix, 'k', rules, 1, 'consume')).every((d) => d.allowed)).toBe(true)
  })

  it('leaves the client open on close, and refuses calls after it', async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client })
    store.close()
    await expect(
      store.apply('closed', 'k', [asRule(slidingLog({ limit: 1, windowMs: 1000 }))], 1, 'consume'),
    ).rejects.toMatchObject({
      code: ErrorCode.STORE_ERROR,
    })
    // Both libraries answer ping() with PONG.
    const reply = await (client as unknown as { ping(): Promise<string> }).ping()
    expect(reply).toBe('PONG')
  })
})

describe('denied-key cache', () => {
  const rule = asRule(slidingLog({ limit: 3, windowMs: 60_000 }))

  async function flood(store: RedisStore, prefix: string, calls: number) {
    const limiter = createLimiter({ rules: [rule], store, prefix, onStoreError: 'throw' })
    for (let i = 0; i < 3; i++) expect((await limiter.consume('hot')).allowed).toBe(true)
    expect((await limiter.consume('hot')).allowed).toBe(false)
    await server.cli('CONFIG', 'RESETSTAT')
    const decisions = await Promise.all(Array.from({ length: calls }, () => limiter.consume('hot')))
    for (const d of decisions) {
      expect(d.allowed).toBe(false)
      expect(d.retryAfterMs).toBeGreaterThan(59_000)
    }
    return (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
  }

  it('answers a flood of denied calls with no Redis commands', async () => {
    const client = await ioredis(server)
    expect(await flood(new RedisStore({ client }), `cache${run++}`, 2000)).toBe(0)
  })

  it('asks Redis for every call when turned off', async () => {
    const client = await ioredis(server)
    expect(await flood(new RedisStore({ client, deniedCache: false }), `nocache${run++}`, 500)).toBe(500)
  })

  it('asks Redis again for a smaller cost, a peek, other rules, and once retryAfterMs has passed', async () => {
    const client = await ioredis(server)
    let now = 1_900_000_000_000
    const store = new RedisStore({ client, clock: () => now })
    const prefix = `cachesemantics${run++}`
    const limitRule = asRule(fixedWindow({ limit: 4, windowMs: 1000 }))
    const other = asRule(tokenBucket({ capacity: 10, refillPerSecond: 1 }))
    // A rule set's first call on a connection may go as EVAL (ioredis loads the script that way).
    const evalshas = async () =>
      (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
    await store.apply(prefix, 'k', [limitRule], 3, 'consume')
    await server.cli('CONFIG', 'RESETSTAT')
    // Cost 2 is denied (3 + 2 > 4) and cached; cost 3 is answered from the cache, counted down.
    const [first] = await store.apply(prefix, 'k', [limitRule], 2, 'consume')
    expect(first!.allowed).toBe(false)
    now += 400
    const [cached] = await store.apply(prefix, 'k', [limitRule], 3, 'consume')
    expect(cached).toEqual({
      ...first,
      retryAfterMs: first!.retryAfterMs - 400,
      resetMs: first!.resetMs - 400,
    })
    expect(await evalshas()).toBe(1)
    // A smaller cost, a peek and another rule set all go to Redis; cost 1 is admitted.
    expect((await store.apply(prefix, 'k', [limitRule], 2, 'peek'))[0]!.allowed).toBe(false)
    expect((await store.apply(prefix, 'k', [limitRule, other], 2, 'consume'))[0]!.allowed).toBe(false)
    expect((await store.apply(prefix, 'k', [limitRule], 1, 'consume'))[0]!.allowed).toBe(true)
    expect(await evalshas()).toBe(4)
    // The admission dropped the cached denial; the next denial is cached until its retryAfterMs.
    const [again] = await store.apply(prefix, 'k', [limitRule], 1, 'consume')
    expect(again!.allowed).toBe(false)
    now += again!.retryAfterMs - 1
    expect((await store.apply(prefix, 'k', [limitRule], 1, 'consume'))[0]!.allowed).toBe(false)
    expect(await evalshas()).toBe(5)
    now += 1
    expect((await store.apply(prefix, 'k', [limitRule], 1, 'consume'))[0]!.allowed).toBe(true)
    expect(await evalshas()).toBe(6)
  })
})

describe('RedisStore writes (ioredis)', () => {
  /** Counts the writes the client's socket hands to the OS: one per write, one per flushed batch. */
  function countWrites(stream: { _write: unknown; _writev: unknown }): { writes: number; batched: number[] } {
    const seen = { writes: 0, batched: [] as number[] }
    const write = stream._write as (...a: unknown[]) => void
    const writev = stream._writev as (chunks: unknown[], ...a: unknown[]) => void
    stream._write = function (this: unknown, ...a: unknown[]) {
      seen.writes++
      return write.apply(this, a)
    }
    stream._writev = function (this: unknown, chunks: unknown[], ...a: unknown[]) {
      seen.batched.push(chunks.length)
      return writev.call(this, chunks, ...a)
    }
    return seen
  }

  it('sends a call at once when none is in flight, and coalesces the calls started while others are, 16 to a write', async () => {
    const client = await ioredis(server)
    const store = new RedisStore({ client })
    const rule = asRule(fixedWindow({ limit: 1000, windowMs: 60_000 }))
    await store.apply('writes', 'warm', [rule], 1, 'consume')
    const stream = client.stream as unknown as { _write: unknown; _writev: unknown; writableCorked: number }
    const seen = countWrites(stream)

    // Idle: the call leaves in its own write before apply returns, not held for the turn to end.
    const alone = store.apply('writes', 'a', [rule], 1, 'consume')
    expect(stream.writableCorked).toBe(0)
    expect(seen.writes).toBe(1)
    await alone

    // 40 calls in one turn: the first goes at once; the other 39 go 16 to a write, not all at the turn's
    // end (Redis, with nothing queued, would wait meanwhile), the last 7 when the turn ends.
    const calls = Array.from({ length: 40 }, (_, i) => store.apply('writes', `k${i}`, [rule], 1, 'consume'))
    expect(stream.writableCorked).toBe(1)
    expect(seen.batched).toEqual([16, 16])
    const decisions = await Promise.all(calls)
    expect(decisions.map((d) => d[0]!.remaining)).toEqual(Array(40).fill(999))
    expect(seen.writes).toBe(2)
    expect(seen.batched).toEqual([16, 16, 7])
  })
})

describe('RedisStore regressions', () => {
  it('a reset made while a denied call is on its way keeps that denial out of the denied-key cache', async () => {
    const client = await ioredis(server)
    const store = new RedisStore({ client })
    const rule = asRule(fixedWindow({ limit: 1, windowMs: 60_000 }))
    await store.apply('race', 'k', [rule], 1, 'consume')
    const denied = store.apply('race', 'k', [rule], 1, 'consume')
    const reset = store.reset('race', 'k', [rule])
    expect((await denied)[0]!.allowed).toBe(false)
    await reset
    // Redis holds nothing for the key now, so the next call is admitted, not answered by the cache.
    expect((await store.apply('race', 'k', [rule], 1, 'consume'))[0]!.allowed).toBe(true)
  })

  it('takes a fractional clock in whole ms, as Redis TIME is', async () => {
    const client = await ioredis(server)
    const store = new RedisStore({ client, clock: () => 1_000_000.75 })
    const rule = asRule(fixedWindow({ limit: 1, windowMs: 1000 }))
    expect((await store.apply('fraction', 'k', [rule], 1, 'consume'))[0]).toMatchObject({
      allowed: true,
      resetMs: 1000,
    })
  })

  it('refuses a store prefix with a colon, and timeouts no timer can hold', async () => {
    const client = await ioredis(server)
    for (const [option, value] of [
      ['prefix', 'a:b'],
      ['timeoutMs', 2 ** 31],
    ] as const) {
      expect(() => new RedisStore({ client, [option]: value })).toThrowError(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: `RedisStore.${option}` }),
      )
    }
  })
})
