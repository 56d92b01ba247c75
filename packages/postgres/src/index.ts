/**
 * @sluice/postgres: `PostgresStore`, rule state in PostgreSQL, exact across processes.
 *
 * @module @sluice/postgres
 */
export type { PgPoolLike, PostgresClientLike, PostgresJsLike } from './client.ts'
export { PostgresStore, type PostgresStoreOptions } from './postgres-store.ts'
