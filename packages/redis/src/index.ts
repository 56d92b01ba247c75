/**
 * The sluice store for Redis and Redis Cluster. Re-exports only.
 *
 * @module @sluice/redis
 */
export { type RedisClientLike, RedisStore, type RedisStoreOptions } from './redis-store.ts'
