/**
 * @module Waiting out a queue slot: one timer, dropped the moment the wait is called off.
 * `acquire` and both HTTP adapters wait through here, so none of them can leave a timer behind.
 */

/**
 * Resolves `true` after `ms`, or `false` as soon as `signal` aborts (at once if it already has).
 * Leaves no timer and no listener behind either way.
 */
export function hold(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false)
    const onAbort = () => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** The part of Node's `ServerResponse` a held request needs. */
export interface ClosableResponse {
  readonly destroyed: boolean
  readonly closed?: boolean
  once(event: 'close', listener: () => void): unknown
  removeListener(event: 'close', listener: () => void): unknown
}

/**
 * Holds a queued request `ms`. Resolves `false` when the client went away first (the response's `close`:
 * the request's own `close` only says its body was read), and removes its listener either way.
 */
export async function holdResponse(res: ClosableResponse, ms: number): Promise<boolean> {
  if (res.destroyed || res.closed === true) return false
  const gone = new AbortController()
  const abort = () => gone.abort()
  res.once('close', abort)
  try {
    return await hold(ms, gone.signal)
  } finally {
    res.removeListener('close', abort)
  }
}
