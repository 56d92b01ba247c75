/**
 * Redis Cluster failover under load: a 3 masters + 3 replicas cluster (node timeout 1 s, so a dead master
 * is failed over in about two; full coverage not required, so the healthy shards keep serving meanwhile).
 * A master is SIGKILLed while limiters keep calling keys on every shard; the cluster promotes its replica.
 *
 * What is asserted, for the ioredis Cluster and the node-redis cluster, each in both majors, and for
 * Valkey's cluster clients (an iovalkey Cluster, a GLIDE GlideClusterClient): every call
 * settles within the store's timeout plus a margin (none stuck) and nothing rejects unhandled; no call ever
 * fails with CROSSSLOT; keys on the healthy shards never fail and stay exact (each admits exactly its
 * limit); the replica is promoted and every live node reports `cluster_state:ok`; then, while the old
 * master is still down, calls on the failed-over shard are decided by Redis again through the same client
 * (node-redis 5 only because the store asks it to refresh its slot map), and exactly.
 * The old master is restarted last and rejoins as a replica.
 */
import { createLimiter, type Decision, ErrorCode, type Limiter, SluiceError, slidingLog } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ClientKind, closeClients, clusterClientOf, STORE_CLIENT_KINDS } from './harness/clients.ts'
import { type RedisCluster, type RedisServer, sleep, startCluster, stopAll } from './harness/redis.ts'

let cluster: RedisCluster
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled)
  cluster = await startCluster({
    nodeTimeoutMs: 1000,
    // Replicas sync at once (a replica that never synced is never promoted), and healthy shards serve on.
    extraArgs: ['--repl-diskless-sync-delay', '0', '--cluster-require-full-coverage', 'no'],
  })
})

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled)
  await closeClients()
  await stopAll()
})

const TIMEOUT_MS = 150
/**
 * Slack for timers and the event loop on a loaded 2-core machine; the store's own bound is TIMEOUT_MS. A call
 * that waited for the failover would take at least the cluster node timeout (1 s), past this bound.
 */
const MARGIN_MS = 600
/** Each key's limit; every healthy key is called well past it. */
const LIMIT = 20

/** CRC16/XMODEM, as Redis Cluster hashes a key's hash tag to one of 16384 slots. */
function slotOf(tag: string): number {
  let crc = 0
  for (const byte of Buffer.from(tag)) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16384
}

interface Node {
  id: string
  port: number
  master: boolean
  failed: boolean
  /** For a replica, its master's id. */
  masterId: string | undefined
  slots: [number, number][]
}

/** The cluster as `node` sees it (CLUSTER NODES). */
async function topology(node: RedisServer): Promise<Node[]> {
  const text = await node.cli('CLUSTER', 'NODES')
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, masterId, , , , , ...slots] = line.split(' ')
      return {
        id: id!,
        port: Number(address!.split(':')[1]!.split('@')[0]),
        master: flags!.split(',').includes('master'),
        failed: /fail(?!\?)/.test(flags!),
        masterId: masterId === '-' ? undefined : masterId,
        slots: slots
          .filter((s) => /^\d+(-\d+)?$/.test(s))
          .map((s) => {
            const [from, to] = s.split('-').map(Number)
            return [from!, to ?? from!] as [number, number]
          }),
      }
    })
}

/** `count` keys named `<label>-<n>` whose slots `master` serves. */
function keysOn(master: Node, label: string, count: number): string[] {
  const keys: string[] = []
  for (let n = 0; keys.length < count; n++) {
    const key = `${label}-${n}`
    const slot = slotOf(key)
    if (master.slots.some(([from, to]) => slot >= from && slot <= to)) keys.push(key)
  }
  return keys
}

const serverOf = (port: number): RedisServer => cluster.nodes.find((n) => n.port === port)!

interface Call {
  key: string
  at: number
  ms: number
  decision?: Decision
  error?: unknown
}

/** Every message in an error's cause chain, to look for a Redis error reply such as CROSSSLOT. */
function messages(error: unknown): string {
  const out: string[] = []
  for (let e = error; e instanceof Error; e = e.cause) out.push(e.message)
  return out.join(' <- ')
}

/** `LIMIT + 3` calls at once on `key`: exactly LIMIT admitted (and none failed: the limiter throws). */
async function expectExact(limiter: Limiter, key: string): Promise<void> {
  const decisions = await Promise.all(Array.from({ length: LIMIT + 3 }, () => limiter.consume(key)))
  expect(decisions.filter((d) => d.allowed)).toHaveLength(LIMIT)
}

/** Polls `check` every 50 ms until it holds; throws naming `what` after `ms`. */
async function until(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + ms
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`Not within ${ms} ms: ${what}`)
    await sleep(50)
  }
}

async function client(kind: ClientKind) {
  // The settings the @sluice/redis README recommends.
  return clusterClientOf(kind, cluster, {
    ioredis: { enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } },
  })
}

let run = 0

describe('Redis Cluster: a master killed under load, its replica promoted', () => {
  // In turn, on one cluster: each test kills a master that has a synced replica, then brings it back.
  it.each<ClientKind>(STORE_CLIENT_KINDS)(
    '%s: every call settles within the timeout, never CROSSSLOT; healthy shards never fail and stay exact; the failed-over shard decides again, exactly',
    async (kind) => {
      // Gossip may not have told every node every replica yet: ask until a master with a replica shows.
      let nodes: Node[] = []
      const withReplica = (m: Node) => nodes.some((n) => n.masterId === m.id && !n.failed)
      const live = cluster.nodes.find((n) => n.pid !== undefined)!
      await until('a master with a replica', 10_000, async () => {
        nodes = await topology(live)
        return nodes.some((m) => m.master && !m.failed && m.slots.length > 0 && withReplica(m))
      })
      const masters = nodes.filter((n) => n.master && !n.failed && n.slots.length > 0)
      const victim = masters.find(withReplica)!
      const replica = nodes.find((n) => n.masterId === victim.id && !n.failed)!
      const label = `${kind}${run++}`
      const victimKeys = keysOn(victim, `${label}-v`, 4)
      const healthyKeys = masters.filter((m) => m !== victim).flatMap((m) => keysOn(m, `${label}-h`, 4))
      const keys = [...victimKeys, ...healthyKeys]

      // The replica must have synced, or the cluster has nothing to promote.
      await until(`replica ${replica.port} synced`, 10_000, async () =>
        (await serverOf(replica.port).cli('INFO', 'replication')).includes('master_link_status:up'),
      )

      const limiter = createLimiter({
        rules: [slidingLog({ limit: LIMIT, windowMs: 600_000 })],
        store: new RedisStore({ client: await client(kind), timeoutMs: TIMEOUT_MS }),
        prefix: label,
        onStoreError: 'throw',
      })
      // A call on every shard first, so the script is loaded on every master before the fault.
      for (const key of keys) await limiter.consume(`warm-${key}`)

      // 6 lanes over all the keys, bounded in time and count, until the end of the scenario.
      const calls: Call[] = []
      let stop = false
      const deadline = performance.now() + 20_000
      const lane = async (offset: number) => {
        for (let n = offset; !stop && performance.now() < deadline && calls.length < 50_000; n += 6) {
          const key = keys[n % keys.length]!
          const at = performance.now()
          try {
            const decision = await limiter.consume(key)
            calls.push({ key, at, ms: performance.now() - at, decision })
          } catch (error) {
            calls.push({ key, at, ms: performance.now() - at, error })
          }
          await sleep(3)
        }
      }
      const lanes = Array.from({ length: 6 }, (_, i) => lane(i))
      const decidedSince = (since: number) => (key: string) =>
        calls.some((c) => c.key === key && c.at > since && c.decision !== undefined)

      try {
        await sleep(100)
        await serverOf(victim.port).kill()
        const survivors = cluster.nodes.filter((n) => n.pid !== undefined)
        await until('replica promoted, cluster_state:ok on every live node', 10_000, async () => {
          const role = await serverOf(replica.port).cli('ROLE')
          const infos = await Promise.all(survivors.map((n) => n.cli('CLUSTER', 'INFO')))
          return role.startsWith('master') && infos.every((i) => i.includes('cluster_state:ok'))
        })
        const promotedAt = performance.now()
        // The same client finds the promoted master while the old one is still down: ioredis refreshes its
        // slot map when a node drops; a node-redis cluster refreshes it when the store, seeing a shard keep
        // failing, asks it to (without that it kept calling the dead address until the old master came back).
        await until('Redis decides the failed-over keys again', 5000, async () =>
          victimKeys.every(decidedSince(promotedAt)),
        )
        // The old master comes back, as a process manager would restart it, and rejoins as a replica.
        await serverOf(victim.port).start()
        await until('the old master rejoined as a replica', 10_000, async () =>
          (await serverOf(victim.port).cli('ROLE')).startsWith('slave'),
        )
        // Enough calls on every healthy key to see its limit reached and held.
        await until('every healthy key called past its limit', 10_000, async () =>
          healthyKeys.every((key) => calls.filter((c) => c.key === key).length > LIMIT + 5),
        )
      } finally {
        stop = true
        await Promise.all(lanes)
      }

      for (const c of calls) expect(c.ms, c.key).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS)
      expect(unhandled).toEqual([])
      const errors = calls.filter((c) => c.error !== undefined)
      for (const c of errors) {
        expect(c.error).toBeInstanceOf(SluiceError)
        expect([ErrorCode.STORE_TIMEOUT, ErrorCode.STORE_ERROR]).toContain((c.error as SluiceError).code)
        expect(messages(c.error)).not.toMatch(/CROSSSLOT/)
      }
      // Only the failed-over shard's keys ever failed; the healthy shards' keys admitted exactly their limit.
      expect(errors.length).toBeGreaterThan(0)
      expect(errors.filter((c) => !victimKeys.includes(c.key))).toEqual([])
      for (const key of healthyKeys) {
        const mine = calls.filter((c) => c.key === key)
        expect(mine.length, key).toBeGreaterThan(LIMIT)
        expect(mine.filter((c) => c.decision?.allowed).length, key).toBe(LIMIT)
        expect((await limiter.peek(key)).remaining, key).toBe(0)
      }

      // The promoted master holds the shard now, without the script: a fresh key on it is exact, through
      // the same client (it loads the script on the promoted master: EVALSHA, NOSCRIPT, EVAL).
      const promoted = (await topology(serverOf(replica.port))).find((n) => n.port === replica.port)!
      expect(promoted.master).toBe(true)
      await expectExact(limiter, keysOn(promoted, `${label}-fresh`, 1)[0]!)
    },
    40_000,
  )
})
