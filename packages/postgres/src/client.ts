/**
 * @module The one seam between the store and a PostgreSQL client: a `pg` Pool (or anything with its
 * `query`) or a postgres.js `sql`. The store asks two things of it: run a parameterised statement and give
 * back its rows, and run a script of several statements (the migration) in one round trip.
 */
import { InvalidOptionError } from '@sluice/core'

/** A `pg` Pool (or Client): `query({ text, values, name })` resolving to `{ rows }`. */
export interface PgPoolLike {
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: unknown[] }>
}

/** A postgres.js `sql`: `sql.unsafe(text, params, { prepare })`, a promise of the rows. */
export interface PostgresJsLike {
  unsafe(text: string, params?: unknown[], options?: { prepare?: boolean }): PromiseLike<readonly unknown[]>
}

/** What `PostgresStore`'s `client` accepts. */
export type PostgresClientLike = PgPoolLike | PostgresJsLike

/** The store's view of a client. */
export interface Connection {
  /** Runs a statement (prepared once per connection under `name`) and resolves to its rows. */
  rows(name: string, text: string, values: unknown[]): Promise<readonly Record<string, unknown>[]>
  /** Runs a script of statements, no params, in one round trip. */
  script(text: string): Promise<void>
}

export function connectionFor(client: unknown, option: string): Connection {
  const sql = client as PostgresJsLike | undefined
  if (typeof client === 'function' && typeof sql?.unsafe === 'function') {
    return {
      rows: async (_name, text, values) =>
        (await sql.unsafe(text, values, { prepare: true })) as readonly Record<string, unknown>[],
      script: async (text) => {
        await sql.unsafe(text)
      },
    }
  }
  if (client !== null && typeof client === 'object' && typeof (client as PgPoolLike).query === 'function') {
    const pool = client as PgPoolLike
    return {
      rows: async (name, text, values) =>
        (await pool.query({ name, text, values })).rows as Record<string, unknown>[],
      script: async (text) => {
        await pool.query({ text })
      },
    }
  }
  throw new InvalidOptionError(option, client, 'a pg Pool (or Client) or a postgres.js sql')
}
