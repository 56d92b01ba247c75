/**
 * The sluice store for Redis and Redis Cluster, and limit tables kept in Redis. Re-exports only.
 *
 * @module @sluice/redis
 */

/** The one client seam, shared with @sluice/metrics' `publishStats`: not for applications. */
export { connectionFor, type RedisClientLike, type RedisConnection } from './client.ts'
export {
  type LimitTableAuditRecord,
  type LimitTableChangeOptions,
  RedisLimitTable,
  type RedisLimitTableOptions,
} from './limit-table.ts'
export { RedisStore, type RedisStoreOptions } from './redis-store.ts'
