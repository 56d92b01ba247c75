/**
 * @module The command's Redis connection: ioredis, failing fast. A Redis that cannot be reached within
 * the timeout is a `StoreError` (exit 2), never a hang. A one-shot command (`limits`) gets no retries and
 * no offline queue; a long-running one (`dashboard`, `reconnect: true`) must reach Redis at start just the
 * same, and afterwards reconnects by itself when Redis goes away.
 */
import { ErrorCode, StoreError } from '@sluice/core'
import { Redis, type RedisOptions } from 'ioredis'

export async function connect(url: string, timeoutMs: number, reconnect = false): Promise<Redis> {
  const options: RedisOptions = reconnect
    ? { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 1 }
    : {
        lazyConnect: true,
        connectTimeout: timeoutMs,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      }
  let client: Redis
  try {
    client = new Redis(url, options)
  } catch (error) {
    throw new StoreError(
      ErrorCode.STORE_ERROR,
      `Cannot use Redis URL ${shownUrl(url)}: ${(error as Error).message}`,
    )
  }
  client.on('error', () => {})
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
    return client
  } catch (error) {
    client.disconnect()
    throw new StoreError(
      ErrorCode.STORE_ERROR,
      `Cannot reach Redis at ${shownUrl(url)}: ${(error as Error).message}`,
    )
  } finally {
    clearTimeout(timer)
  }
}

/** A Redis URL as printed: a password in it (`redis://user:secret@host`) is never shown. */
export function shownUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//…@')
}
