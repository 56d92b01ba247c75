/**
 * @module Waiting out a queue slot: one timer, dropped the moment the wait is called off.
 * `acquire` and the HTTP kit (`RequestLimit.hold` in http/limit.ts) wait through here, so none of them can leave a timer behind.
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
