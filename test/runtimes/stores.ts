/**
 * @module The stores the shared suites run on, in every runtime: a `MemoryStore`, and a `RedisStore` on a
 * real redis-server through ioredis (Node, Bun, Deno) and node-redis (Deno). Each case gets a fresh store
 * and a prefix of its own, so one server serves every run.
 */
import { MemoryStore, type Store } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'

/**
 * A call may take this long before the store gives up on it (and `onStoreError` answers, with no headers):
 * so a loaded machine slows the suites down without changing a decision.
 */
const TIMEOUT_MS = 5000

export type StoreKind = 'memory' | 'ioredis' | 'node-redis'

export interface StoreSource {
  readonly kind: StoreKind
  store(): Store
  close(): Promise<void>
}

/** A store source of `kind`; the Redis kinds connect to 127.0.0.1:`port`. */
export async function storeSource(kind: StoreKind, port?: number): Promise<StoreSource> {
  if (kind === 'memory') {
    const stores: MemoryStore[] = []
    return {
      kind,
      store: () => {
        const store = new MemoryStore()
        stores.push(store)
        return store
      },
      close: async () => {
        for (const store of stores) store.close()
      },
    }
  }
  if (port === undefined || !Number.isInteger(port))
    throw new Error(`a ${kind} store needs a redis-server port`)
  if (kind === 'ioredis') {
    const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 })
    await client.ping()
    return {
      kind,
      store: () => new RedisStore({ client, timeoutMs: TIMEOUT_MS }),
      close: async () => void client.disconnect(),
    }
  }
  const client = createClient({ url: `redis://127.0.0.1:${port}` })
  await client.connect()
  return {
    kind,
    store: () => new RedisStore({ client, timeoutMs: TIMEOUT_MS }),
    close: async () => void (await client.quit()),
  }
}
