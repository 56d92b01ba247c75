/**
 * @module @sluice/redis: the sluice store for Redis and Redis Cluster. Re-exports only.
 */
export { type RedisClientLike, RedisStore, type RedisStoreOptions } from './redis-store.ts'
