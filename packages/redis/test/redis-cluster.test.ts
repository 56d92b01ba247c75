/**
 * Redis Cluster, 3 masters + 3 replicas, with ioredis and node-redis: every rule (and all five at once on
 * one key) decides exactly as the memory store on keys spread over many slots, hostile keys stay inside
 * their hash tag and never share counts, and scripts reload by themselves after SCRIPT FLUSH on every node.
 */
import {
  concurrency,
  createLimiter,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { type RedisClientLike, RedisLimitTable, RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  ALL_CLIENT_KINDS,
  closeClients,
  clusterClientOf,
  ioredis,
  STORE_CLIENT_KINDS,
} from '../../../test/harness/clients.ts'
import { commandCalls, type RedisCluster, startCluster, stopAll } from '../../../test/harness/redis.ts'
import { slotOf } from '../src/keys.ts'

let cluster: RedisCluster

beforeAll(async () => {
  cluster = await startCluster()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

const asRule = (r: RuleInput): Rule => r as Rule

const RULES: Rule[] = [
  asRule(fixedWindow({ limit: 3, windowMs: 1000 })),
  asRule(slidingLog({ limit: 3, windowMs: 1000 })),
  asRule(slidingWindow({ limit: 4, windowMs: 1000, buckets: 4 })),
  asRule(tokenBucket({ capacity: 3, refillPerSecond: 2.5 })),
  leakyBucket({ ratePerSecond: 7, maxQueueMs: 300 }),
]

const KEYS = Array.from({ length: 24 }, (_, i) => `user-${i}`)

/** Which masters hold the slots of these keys (the hash tag is the key itself). */
async function mastersOf(keys: string[]): Promise<Set<string>> {
  const node = cluster.masters[0]!
  const slots = await Promise.all(
    keys.map(async (k) => Number(await node.cli('CLUSTER', 'KEYSLOT', `{${k}}`))),
  )
  const shards = await node.cli('CLUSTER', 'SLOTS')
  const ranges = [...shards.matchAll(/^(\d+)\n(\d+)\n127\.0\.0\.1\n(\d+)/gm)].map((m) =>
    m.slice(1).map(Number),
  )
  return new Set(
    slots.map((slot) => String(ranges.find(([from, to]) => slot >= from! && slot <= to!)?.[2] ?? 'none')),
  )
}

let run = 0

describe.each(STORE_CLIENT_KINDS)('RedisStore on a 3+3 cluster (%s)', (kind) => {
  it('decides like the memory store for every rule, alone and all together, on keys across slots', async () => {
    expect((await mastersOf(KEYS)).size).toBe(3)
    const client = await clusterClientOf(kind, cluster)
    const started = performance.now()
    let now = 1_800_000_000_000
    const clock = () => now
    const memory = new MemoryStore({ clock })
    const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
    const prefix = `cluster${run++}`
    const sets = [...RULES.map((r) => [r]), RULES]
    for (let step = 0; step < 12; step++) {
      now = Math.max(
        now + (step % 3 === 0 ? 97 : 0),
        1_800_000_000_000 + 4 * Math.floor(performance.now() - started),
      )
      for (const key of KEYS) {
        for (const rules of sets) {
          const expected = memory.apply(prefix, key, rules, 1, 'consume')
          const actual = await redis.apply(prefix, key, rules, 1, 'consume')
          expect(actual, `${key} ${rules.map((r) => r.id)} at step ${step}`).toEqual(expected)
        }
      }
    }
  })

  it('prefetches on every shard: batches counted on each key master, units given back there', async () => {
    const client = await clusterClientOf(kind, cluster)
    let now = 1_800_000_000_000
    const clock = () => now
    const store = new RedisStore({ client, clock, timeoutMs: 2000, prefetch: { units: 8, ms: 100 } })
    const plain = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
    const prefix = `prefetch${run++}`
    const rules = [asRule(fixedWindow({ limit: 1000, windowMs: 60_000 }))]
    for (const key of KEYS) {
      const reasons: string[] = []
      for (let i = 0; i < 5; i++) {
        const answer = await store.apply(prefix, key, rules, 1, 'consume')
        reasons.push(answer.reason ?? 'rules')
      }
      // Batches of 1 and 2 for the first two calls, then 4 fetched ahead: 7 counted for 5 calls, 2 left.
      expect(reasons).toEqual(['rules', 'rules', 'prefetch', 'prefetch', 'prefetch'])
      const [left] = await plain.apply(prefix, key, rules, 1, 'peek')
      expect(left!.remaining).toBe(1000 - 7 - 1)
    }
    now += 100
    store.close()
    await new Promise((resolve) => setTimeout(resolve, 100))
    for (const key of KEYS) {
      const [back] = await plain.apply(prefix, key, rules, 1, 'peek')
      expect(back!.remaining, key).toBe(1000 - 5 - 1)
    }
  })

  it('reloads its scripts after SCRIPT FLUSH on every master', async () => {
    const client = await clusterClientOf(kind, cluster)
    const store = new RedisStore({ client, deniedCache: false })
    const prefix = `flush${run++}`
    const rule = asRule(slidingLog({ limit: 2, windowMs: 60_000 }))
    for (const key of KEYS) await store.apply(prefix, key, [rule], 1, 'consume')
    await Promise.all(cluster.masters.map((m) => m.cli('SCRIPT', 'FLUSH')))
    for (const key of KEYS) {
      const [d] = await store.apply(prefix, key, [rule], 1, 'consume')
      expect(d!.allowed).toBe(true)
      expect(d!.remaining).toBe(0)
    }
  })

  it('keeps hostile keys inside their hash tag, each with its own count', async () => {
    const client = await clusterClientOf(kind, cluster)
    const store = new RedisStore({ client, deniedCache: false })
    const prefix = `hostile${run++}`
    const hostile = [
      '{',
      '}',
      '{}',
      '}{',
      'a}b',
      'a}c',
      '{a}',
      'a',
      '%7B',
      '%7Ba%7D',
      '%',
      'x:y',
      'x:y}:slidingLog:60000',
      '\u0000',
      '\u0000a',
      'ключ',
      '🔑',
      '\uD83D',
      '\uDD11',
      '\uD83D\uDD11x',
    ]
    const rules = [
      asRule(slidingLog({ limit: 2, windowMs: 60_000 })),
      asRule(fixedWindow({ limit: 2, windowMs: 600_000 })),
    ]
    for (const key of hostile) {
      const decisions = []
      for (let i = 0; i < 3; i++) decisions.push(await store.apply(prefix, key, rules, 1, 'consume'))
      expect(
        decisions.map((ds) => ds.every((d) => d.allowed)),
        JSON.stringify(key),
      ).toEqual([true, true, false])
    }
    // Every key the store wrote has exactly one hash tag, and it encloses one escaped user key.
    const written: string[] = []
    for (const master of cluster.masters) {
      // A plain connection to each master (redis-cli would print a key only up to its first NUL).
      const node = await ioredis(master)
      written.push(...(await node.keys(`sluice:${prefix}:*`)))
    }
    expect(written).toHaveLength(hostile.length * rules.length)
    for (const name of written) {
      expect(name).toMatch(/^sluice:hostile\d+:\{[^{}]+\}:(slidingLog|fixedWindow):[\d:]+$/)
    }
  })

  it('ends the leases released in one turn on keys across slots, in one script call per slot', async () => {
    const client = await clusterClientOf(kind, cluster)
    const store = new RedisStore({ client, deniedCache: false, timeoutMs: 2000 })
    const limiter = createLimiter({ rules: [concurrency({ limit: 1 })], store, prefix: `leases${run++}` })
    // Each of KEYS in its own slot, and one more key in the first one's.
    const keys = [...KEYS, sameSlotAs(KEYS[0]!)]
    const slots = new Set(keys.map((k) => slotOf(`{${k}}`)))
    expect(slots.size).toBe(keys.length - 1)
    const round = async () => {
      const held = await Promise.all(keys.map((k) => limiter.consume(k)))
      expect(held.every((d) => d.allowed)).toBe(true)
      expect((await Promise.all(keys.map((k) => limiter.consume(k)))).some((d) => d.allowed)).toBe(false)
      expect(await Promise.all(keys.map((k, i) => limiter.release(k, held[i]!)))).toEqual(
        keys.map(() => undefined),
      )
    }
    // The first round loads the scripts on every master; the second is counted.
    await round()
    for (const master of cluster.masters) await master.cli('CONFIG', 'RESETSTAT')
    await round()
    let calls = 0
    for (const master of cluster.masters) {
      calls += (await commandCalls(master, 'evalsha')) + (await commandCalls(master, 'eval'))
    }
    // Each key's two consumes, then one release call per slot.
    expect(calls).toBe(2 * keys.length + slots.size)
    expect((await Promise.all(keys.map((k) => limiter.consume(k)))).every((d) => d.allowed)).toBe(true)
  })
})

/** A key whose hash tag lands in the same slot as `key`'s. */
function sameSlotAs(key: string): string {
  const slot = slotOf(`{${key}}`)
  for (let i = 0; ; i++) if (slotOf(`{twin-${i}}`) === slot) return `twin-${i}`
}

/** The parts of a GLIDE cluster client this test watches. */
interface GlideCommands {
  customCommand(args: string[], options?: { route?: unknown }): Promise<unknown>
}

describe('RedisStore on a 3+3 cluster (glide, its class renamed)', () => {
  it('routes every call to its key’s primary when the GlideClusterClient class is renamed (minified or subclassed)', async () => {
    const client = (await clusterClientOf('glide', cluster)) as unknown as GlideCommands
    // As a bundler's minifier leaves it, or an application's subclass: the same class, under another name.
    const Base = Object.getPrototypeOf(client).constructor as new (...args: never[]) => object
    class G extends Base {}
    Object.setPrototypeOf(client, G.prototype)
    const routes: unknown[] = []
    const send = client.customCommand.bind(client)
    client.customCommand = (args, options) => {
      routes.push(options?.route)
      return send(args, options)
    }
    const store = new RedisStore({ client: client as unknown as RedisClientLike, deniedCache: false })
    const prefix = `renamed${run++}`
    const rule = asRule(fixedWindow({ limit: 2, windowMs: 60_000 }))
    for (const key of KEYS) {
      const [d] = await store.apply(prefix, key, [rule], 1, 'consume')
      expect(d!.remaining, key).toBe(1)
    }
    // Before: a class name without "Cluster" sent every call without a route. (A master's first call is
    // sent twice, EVALSHA then EVAL, each with its route.)
    const distinct = [...new Map(routes.map((r) => [JSON.stringify(r), r])).values()]
    expect(distinct).toEqual(
      KEYS.map((key) => ({ type: 'primarySlotKey', key: `sluice:${prefix}:{${key}}:${rule.id}` })),
    )
  })
})

describe.each(ALL_CLIENT_KINDS)('RedisLimitTable on a 3+3 cluster (%s)', (kind) => {
  it('keeps a table under one hash tag: changes, pub/sub across nodes, audit', async () => {
    const name = `cluster-${kind}`
    const open = (follow: boolean) =>
      clusterClientOf(kind, cluster).then((client) =>
        RedisLimitTable.open({ client, name, follow, checkMs: 0 }),
      )
    const a = await open(true)
    const b = await open(true)
    await a.set('PAYMENT:ALIPAY', [{ kind: 'slidingLog', limit: 5, windowMs: 1000 }], { actor: 'ops' })
    await a.set('{other}', null)
    // Through pub/sub only (the version check is off), whichever node each subscriber is on.
    const until = Date.now() + 1000
    while (b.version < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 10))
    expect(b.version).toBe(2)
    expect(JSON.stringify(b.get('PAYMENT:ALIPAY'))).toBe('[{"kind":"slidingLog","limit":5,"windowMs":1000}]')
    expect(b.get('{other}')).toBe(null)
    expect((await b.audit(5)).map((r) => [r.version, r.entry, r.actor])).toEqual([
      [2, '{other}', expect.any(String)],
      [1, 'PAYMENT:ALIPAY', 'ops'],
    ])
    const reader = await open(false)
    expect(reader.version).toBe(2)
    for (const t of [a, b, reader]) await t.close()
  })
})
