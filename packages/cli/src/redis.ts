/**
 * @module The command's Redis connection: ioredis, failing fast. A Redis that cannot be reached within
 * the timeout is a `StoreError` (exit 2), never a hang: no retries, no offline queue.
 */
import { ErrorCode, StoreError } from '@sluice/core'
import { Redis } from 'ioredis'

export async function connect(url: string, timeoutMs: number): Promise<Redis> {
  let client: Redis
  try {
    client = new Redis(url, {
      lazyConnect: true,
      connectTimeout: timeoutMs,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
  } catch (error) {
    throw new StoreError(ErrorCode.STORE_ERROR, `Cannot use Redis URL ${url}: ${(error as Error).message}`)
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
    throw new StoreError(ErrorCode.STORE_ERROR, `Cannot reach Redis at ${url}: ${(error as Error).message}`)
  } finally {
    clearTimeout(timer)
  }
}
