/**
 * @module Redis clients for the suites, one helper per library and major, closed by `closeClients()`.
 *
 * `ioredis` and `redis` are the majors a fresh install gets (6.x): every Redis suite runs on them
 * (`CLIENT_KINDS`). The previous majors (5.x, installed as `ioredis5` and `redis5`) run a focused subset:
 * conformance, faults and the cluster suites (`OTHER_MAJOR_KINDS`). @sluice/redis's peer ranges name
 * exactly these majors. Valkey's clients, iovalkey and Valkey GLIDE (`VALKEY_KINDS`, devDependencies of
 * packages/redis), run the store's conformance, faults and cluster suites (`STORE_CLIENT_KINDS`).
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import type { RedisClientLike } from '@sluice/redis'
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { Cluster as Cluster5, Redis as Redis5 } from 'ioredis5'
import { createClient, createCluster } from 'redis'
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5'
import type { RedisCluster, RedisServer } from './redis.ts'

type Closable = { close(): Promise<unknown> | unknown }
const open = new Set<Closable>()

export type ClientKind = 'ioredis' | 'node-redis' | 'ioredis@5' | 'node-redis@5' | 'iovalkey' | 'glide'
/** The default majors: every Redis suite. */
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'node-redis']
/** The previous majors, still in the peer ranges: the focused subset. */
export const OTHER_MAJOR_KINDS: readonly ClientKind[] = ['ioredis@5', 'node-redis@5']
export const ALL_CLIENT_KINDS: readonly ClientKind[] = [...CLIENT_KINDS, ...OTHER_MAJOR_KINDS]
/** Valkey's clients: the store's suites (conformance, faults, cluster). */
export const VALKEY_KINDS: readonly ClientKind[] = ['iovalkey', 'glide']
export const STORE_CLIENT_KINDS: readonly ClientKind[] = [...ALL_CLIENT_KINDS, ...VALKEY_KINDS]

const require = createRequire(import.meta.url)
/** Valkey's clients are devDependencies of packages/redis. */
const valkeyRequire = createRequire(new URL('../../packages/redis/package.json', import.meta.url))
const PACKAGES: Record<ClientKind, string> = {
  ioredis: 'ioredis',
  'node-redis': 'redis',
  'ioredis@5': 'ioredis5',
  'node-redis@5': 'redis5',
  iovalkey: 'iovalkey',
  glide: '@valkey/valkey-glide',
}

/** The installed version of the library behind `kind`. */
export function versionOf(kind: ClientKind): string {
  if (kind === 'glide') {
    // GLIDE's exports name no package.json: read it beside its entry (build-ts/index.js).
    const entry = valkeyRequire.resolve(PACKAGES[kind])
    return JSON.parse(readFileSync(new URL('../package.json', pathToFileURL(entry)), 'utf8')).version
  }
  const from = kind === 'iovalkey' ? valkeyRequire : require
  return (from(`${PACKAGES[kind]}/package.json`) as { version: string }).version
}

/** iovalkey's `Redis` and `Cluster`: ioredis's API. */
function iovalkey(): { Redis: typeof Redis; Cluster: typeof Cluster } {
  return valkeyRequire('iovalkey') as { Redis: typeof Redis; Cluster: typeof Cluster }
}

interface GlideClientLike {
  close(): unknown
}
interface GlideModule {
  GlideClient: { createClient(config: object): Promise<GlideClientLike> }
  GlideClusterClient: { createClient(config: object): Promise<GlideClientLike> }
}

/** A Valkey GLIDE client (standalone, or cluster from the nodes given), connected. */
async function glide(
  nodes: readonly { host: string; port: number }[],
  cluster: boolean,
): Promise<RedisClientLike> {
  const { GlideClient, GlideClusterClient } = valkeyRequire('@valkey/valkey-glide') as GlideModule
  const config = { addresses: nodes.map((n) => ({ host: n.host, port: n.port })), requestTimeout: 2000 }
  const client = await (cluster ? GlideClusterClient : GlideClient).createClient(config)
  open.add({ close: () => client.close() })
  return client as unknown as RedisClientLike
}

const isV5 = (kind: ClientKind) => kind.endsWith('@5')
const isIoredis = (kind: ClientKind) => kind.startsWith('ioredis')

/** An ioredis client, ready. Extra options override the suites' defaults. */
export async function ioredis(
  server: RedisServer,
  options: RedisOptions = {},
  major: 5 | 6 = 6,
  Class?: typeof Redis,
): Promise<Redis> {
  const Client = Class ?? (major === 5 ? (Redis5 as unknown as typeof Redis) : Redis)
  const client = new Client({ host: server.host, port: server.port, lazyConnect: true, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.disconnect() })
  await client.connect()
  return client
}

/** A node-redis client, connected. */
export async function nodeRedis(
  server: RedisServer,
  options: Parameters<typeof createClient>[0] = {},
  major: 5 | 6 = 6,
): Promise<ReturnType<typeof createClient>> {
  const create = major === 5 ? (createClient5 as unknown as typeof createClient) : createClient
  const client = create({ socket: { host: server.host, port: server.port }, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.destroy() })
  await client.connect()
  return client
}

export async function ioredisCluster(
  cluster: RedisCluster,
  options: ClusterOptions = {},
  major: 5 | 6 = 6,
  Class?: typeof Cluster,
): Promise<Cluster> {
  const Client = Class ?? (major === 5 ? (Cluster5 as unknown as typeof Cluster) : Cluster)
  const client = new Client([...cluster.startupNodes], { lazyConnect: true, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.disconnect() })
  await client.connect()
  return client
}

export async function nodeRedisCluster(
  cluster: RedisCluster,
  options: Omit<Parameters<typeof createCluster>[0], 'rootNodes'> = {},
  major: 5 | 6 = 6,
): Promise<ReturnType<typeof createCluster>> {
  const create = major === 5 ? (createCluster5 as unknown as typeof createCluster) : createCluster
  const client = create({
    rootNodes: cluster.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
    ...options,
  })
  client.on('error', () => {})
  open.add({ close: () => client.destroy() })
  await client.connect()
  return client
}

/** A client of `kind` on a standalone server. */
export function clientOf(kind: ClientKind, server: RedisServer): Promise<RedisClientLike> {
  const major = isV5(kind) ? 5 : 6
  if (kind === 'glide') return glide([server], false)
  if (kind === 'iovalkey') return ioredis(server, {}, 6, iovalkey().Redis)
  return isIoredis(kind) ? ioredis(server, {}, major) : nodeRedis(server, {}, major)
}

/** A client of `kind` on the cluster, with `options` for its library. */
export function clusterClientOf(
  kind: ClientKind,
  cluster: RedisCluster,
  options: {
    ioredis?: ClusterOptions
    nodeRedis?: Omit<Parameters<typeof createCluster>[0], 'rootNodes'>
  } = {},
): Promise<RedisClientLike> {
  const major = isV5(kind) ? 5 : 6
  if (kind === 'glide') return glide(cluster.startupNodes, true)
  if (kind === 'iovalkey') return ioredisCluster(cluster, options.ioredis, 6, iovalkey().Cluster)
  return isIoredis(kind)
    ? ioredisCluster(cluster, options.ioredis, major)
    : nodeRedisCluster(cluster, options.nodeRedis, major)
}

export async function closeClients(): Promise<void> {
  for (const c of open) {
    try {
      await c.close()
    } catch {}
  }
  open.clear()
}
