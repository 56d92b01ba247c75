/**
 * @module Writing an outcome out on Node's own response (`ServerResponse`, or a framework's response built
 * on it, as Express's is), connect-style: `next()` to go on, `next(error)` for whatever fails. An adapter
 * on such a response needs only to read its request (`RequestView`) and to call what `respondOnNode` gives.
 */
import { isPromise } from '../options.ts'
import type { Decision } from '../types.ts'
import type { RequestLimit } from './limit.ts'
import type { ResponseBody } from './options.ts'
import type { HttpOutcome } from './outcome.ts'

/** The part of Node's `ServerResponse` an outcome is written to. */
export interface WritableResponse {
  statusCode: number
  readonly headersSent: boolean
  readonly writableEnded: boolean
  setHeader(name: string, value: string | number): unknown
  end(chunk: string): unknown
}

/** Connect's `next`: called with nothing to go on, or with an error. */
export type Next = (error?: unknown) => void

/**
 * The user's answer to a denied request, called with the status and the rate-limit headers already set; it
 * may send a response of its own (else sluice sends its 429 once it returns or its promise settles).
 */
export type OnDenied<Req, Res> = (req: Req, res: Res, decision: Decision) => void | Promise<void>

/**
 * What writes `limit`'s outcomes on a Node response: pass goes on; an admitted request gets its headers,
 * then goes on (after its hold, when queued; a request whose client left stops there); a missing key part
 * is answered 400; a denied one gets its headers and status, `onDenied` first if given, then sluice's body
 * unless a response was sent. Never throws: a failure (a throwing `onDenied`, a write) goes to `next`.
 */
export function respondOnNode<Req, Res extends WritableResponse>(
  limit: RequestLimit<Req, Res>,
  onDenied?: OnDenied<Req, Res>,
): (outcome: HttpOutcome, req: Req, res: Res, next: Next) => void {
  /** Answers a denied request: the user's `onDenied` first, if any; sluice's body unless it has answered. */
  function denied(outcome: Extract<HttpOutcome, { action: 'deny' }>, req: Req, res: Res, next: Next): void {
    res.statusCode = outcome.status
    const answer = () => {
      if (!res.headersSent && !res.writableEnded)
        sendJson(res, outcome.status, outcome.body, outcome.contentType)
    }
    if (onDenied === undefined) {
      answer()
      return
    }
    const done = onDenied(req, res, outcome.decision)
    if (isPromise(done)) Promise.resolve(done).then(answer, next)
    else answer()
  }

  return (outcome, req, res, next) => {
    if (outcome.action === 'pass') {
      next()
      return
    }
    try {
      if (outcome.action === 'reject') {
        sendJson(res, outcome.status, outcome.body, outcome.contentType)
        return
      }
      const headers = outcome.headers
      for (const name in headers) res.setHeader(name, headers[name]!)
      if (outcome.action === 'deny') {
        denied(outcome, req, res, next)
        return
      }
    } catch (error) {
      next(error)
      return
    }
    if (outcome.decision.waitMs === 0) next()
    else limit.hold(req, res, outcome).then((waited) => waited && next(), next)
  }
}

/** Sends `body` as JSON with `status` and `contentType`, and ends the response. */
function sendJson(res: WritableResponse, status: number, body: ResponseBody, contentType: string): void {
  const json = JSON.stringify(body)
  res.statusCode = status
  res.setHeader('Content-Type', contentType)
  res.setHeader('Content-Length', Buffer.byteLength(json))
  res.end(json)
}
