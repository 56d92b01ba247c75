/**
 * @module The command's Redis connection: ioredis, failing fast. A Redis that cannot be reached within
 * the timeout is a `StoreError` (exit 2), never a hang. A one-shot command (`limits`) gets no retries and
 * no offline queue; a long-running one (`dashboard`, `reconnect: true`) must reach Redis at start just the
 * same, and afterwards reconnects by itself when Redis goes away.
 */
import { ErrorCode, InvalidOptionError, StoreError } from '@sluice/core'
import { Redis, type RedisOptions } from 'ioredis'

export async function connect(url: string, timeoutMs: number, reconnect = false): Promise<Redis> {
  // Nothing the command waits for is pending when it disconnects: a Redis that never answers the
  // connection's close (stopped) must not hold the process for ioredis's default 2 s.
  const options: RedisOptions = reconnect
    ? { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 1, disconnectTimeout: 0 }
    : {
        lazyConnect: true,
        connectTimeout: timeoutMs,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        disconnectTimeout: 0,
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
  // The reason Redis gave (a wrong password, a database it does not have), which ioredis reports as an
  // 'error' event before it closes the connection; connect() itself then only says the connection closed.
  let reason: Error | undefined
  client.on('error', (error: Error) => {
    reason ??= error
  })
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
  } catch (error) {
    client.disconnect()
    throw new StoreError(
      ErrorCode.STORE_ERROR,
      `Cannot reach Redis at ${shownUrl(url)}: ${(reason ?? (error as Error)).message}`,
    )
  } finally {
    clearTimeout(timer)
  }
  // ioredis selects the URL's database as it connects, and a refusal there leaves the connection on
  // database 0: select it again and wait for Redis's answer, so nothing is written anywhere else.
  const db = client.options.db ?? 0
  try {
    await client.select(db)
  } catch (error) {
    client.disconnect()
    throw new InvalidOptionError(
      '--redis',
      shownUrl(url),
      `a database this Redis has (${(error as Error).message.replace(/^ERR /, '')})`,
    )
  }
  return client
}

/**
 * The Redis URL that `--redis` or `SLUICE_REDIS_URL` names; `InvalidOptionError` when neither does: a
 * command never guesses which Redis to read or write.
 */
export function requiredUrl(given: string | true | undefined): string {
  const url = redisUrl(given)
  if (url === undefined) {
    throw new InvalidOptionError(
      '--redis',
      given === true ? '' : given,
      'a Redis URL: pass --redis redis://HOST:PORT[/DB], or set SLUICE_REDIS_URL in the environment',
    )
  }
  return url
}

/**
 * Resolves as `work` does, or rejects with `StoreError` `ERR_SLUICE_STORE_TIMEOUT` once `timeoutMs` has
 * passed: one deadline for a whole command, however many steps it takes.
 */
export async function withinTimeout<T>(work: Promise<T>, timeoutMs: number, url: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new StoreError(
                ErrorCode.STORE_TIMEOUT,
                `Redis at ${shownUrl(url)} did not answer within ${timeoutMs} ms.`,
              ),
            ),
          timeoutMs,
        )
      }),
    ])
  } finally {
    clearTimeout(timer)
    // The work given up on may still fail later (its connection closed under it): nobody waits for it.
    work.catch(() => {})
  }
}

/** The Redis URL: `--redis`, else the environment's `SLUICE_REDIS_URL`; undefined when neither says. */
export function redisUrl(given: string | true | undefined): string | undefined {
  if (typeof given === 'string') return given === '' ? undefined : given
  const env = process.env.SLUICE_REDIS_URL
  return env === undefined || env === '' ? undefined : env
}

/** A Redis URL as printed: a password in it (`redis://user:secret@host`) is never shown. */
export function shownUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//…@')
}
