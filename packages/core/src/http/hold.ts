/**
 * @module Holding a queued request: the wait of limiter/hold.ts, called off when the client goes away.
 */
import { hold } from '../limiter/hold.ts'

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
