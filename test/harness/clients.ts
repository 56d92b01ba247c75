/**
 * @module Redis clients for the suites, one helper per library, closed by `closeClients()`.
 */
import type { RedisClientLike } from '@sluice/redis'
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { createClient, createCluster } from 'redis'
import type { RedisCluster, RedisServer } from './redis.ts'

type Closable = { close(): Promise<unknown> | unknown }
const open = new Set<Closable>()

export type ClientKind = 'ioredis' | 'node-redis'
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'node-redis']

/** An ioredis client, ready. Extra options override the suites' defaults. */
export async function ioredis(server: RedisServer, options: RedisOptions = {}): Promise<Redis> {
  const client = new Redis({ host: server.host, port: server.port, lazyConnect: true, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.disconnect() })
  await client.connect()
  return client
}

/** A node-redis client, connected. */
export async function nodeRedis(
  server: RedisServer,
  options: Parameters<typeof createClient>[0] = {},
): Promise<ReturnType<typeof createClient>> {
  const client = createClient({ socket: { host: server.host, port: server.port }, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.destroy() })
  await client.connect()
  return client
}

export async function ioredisCluster(cluster: RedisCluster, options: ClusterOptions = {}): Promise<Cluster> {
  const client = new Cluster([...cluster.startupNodes], { lazyConnect: true, ...options })
  client.on('error', () => {})
  open.add({ close: () => client.disconnect() })
  await client.connect()
  return client
}

export async function nodeRedisCluster(
  cluster: RedisCluster,
  options: Omit<Parameters<typeof createCluster>[0], 'rootNodes'> = {},
): Promise<ReturnType<typeof createCluster>> {
  const client = createCluster({
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
  return kind === 'ioredis' ? ioredis(server) : nodeRedis(server)
}

/** A client of `kind` on the cluster. */
export function clusterClientOf(kind: ClientKind, cluster: RedisCluster): Promise<RedisClientLike> {
  return kind === 'ioredis' ? ioredisCluster(cluster) : nodeRedisCluster(cluster)
}

export async function closeClients(): Promise<void> {
  for (const c of open) {
    try {
      await c.close()
    } catch {}
  }
  open.clear()
}
