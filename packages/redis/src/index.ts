/**
 * The sluice store for Redis and Redis Cluster, and limit tables kept in Redis. Re-exports only.
 *
 * @module @sluice/redis
 */
export {
  type LimitTableAuditRecord,
  type LimitTableChangeOptions,
  RedisLimitTable,
  type RedisLimitTableOptions,
} from './limit-table.ts'
export { type RedisClientLike, RedisStore, type RedisStoreOptions } from './redis-store.ts'
