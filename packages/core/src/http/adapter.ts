/**
 * @module What an HTTP adapter supplies to core: how to read its framework's request, where a request's
 * record lives, and when its response ended. Everything else (options, keys, the decision, headers,
 * bodies, holding a queued request, the response-end phase) is core's, so an adapter stays a translation.
 */
import type { RequestRecord } from './record.ts'

/** How an adapter reads its framework's request. */
export interface RequestView<R> {
  /** The client's address as the framework sees it (after its proxy trust settings). */
  ip(req: R): string | undefined
  /** Method + route template, e.g. "POST /pay/:id" (never the raw URL with ids); the adapter picks it. */
  route(req: R): string
  /**
   * The matched route's template when the framework knows one (`GET /users/:id`), else undefined; what
   * metrics label requests with, so never a raw URL. Default: none.
   */
  routeTemplate?(req: R): string | undefined
  /**
   * A header's values by lower-case name, each line apart, as Node's `headersDistinct` gives them: a
   * header sent twice must not read as one value joined by `", "`. A single string is taken as one value.
   */
  header(req: R, name: string): string | readonly string[] | undefined
}

/** The part of a framework's response core needs to hold a queued request and see the response end. */
export interface NodeResponse {
  readonly destroyed: boolean
  readonly closed?: boolean
  readonly writableFinished?: boolean
  once(event: 'close' | 'finish', listener: () => void): unknown
  removeListener(event: 'close' | 'finish', listener: () => void): unknown
}

/**
 * An adapter, as core's HTTP kit sees it. `Req` is the framework's request; `Res` what its hook is given
 * to answer with (Express's `res`, Fastify's `reply`, a Fetch adapter's per-request exchange). The
 * response's end reaches the kit through `onEnd`; an adapter on Node's `ServerResponse` may give
 * `responseOf` instead, and the kit watches that response's `finish` and `close`.
 */
export type HttpAdapter<Req, Res> = HttpAdapterBase<Req> &
  (
    | { onEnd(res: Res, ended: (finished: boolean) => void): void; responseOf?(res: Res): NodeResponse }
    | { responseOf(res: Res): NodeResponse; onEnd?(res: Res, ended: (finished: boolean) => void): void }
  )

/** What every adapter supplies, whatever its response is. */
export interface HttpAdapterBase<Req> {
  readonly view: RequestView<Req>
  /** The record kept for `req`, or undefined before any limit has seen it. */
  recordOf(req: Req): RequestRecord | undefined
  /** Keeps `record` for `req` (a decorated slot, a WeakMap entry), where `recordOf` finds it. */
  keepRecord(req: Req, record: RequestRecord): void
}

/**
 * The end signal of an adapter: calls `ended(finished)` once, when the response to `res` ends, `true` when
 * it was sent in full, `false` when the client went away first (Node's `close` before `finish`; a Fetch
 * request's `signal` aborting, or its response body cancelled). A client that leaves before there is a
 * response ends it too, `false`: that is what stops a held request waiting. At once when it has ended.
 */
export function endSignal<Req, Res>(
  adapter: HttpAdapter<Req, Res>,
): (res: Res, ended: (finished: boolean) => void) => void {
  if (adapter.onEnd !== undefined) return adapter.onEnd
  const responseOf = adapter.responseOf!
  return (res, ended) => whenResponseEnds(responseOf(res), ended)
}

/** The part of Node's `IncomingMessage` that holds its headers. */
export interface NodeRequest {
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>
  readonly headersDistinct?: Readonly<Record<string, readonly string[] | undefined>>
}

/**
 * A header's values, each line apart (`headersDistinct`), for a view's `header`. A request object that is
 * not Node's own (an injected test request) falls back to `headers`.
 */
export function headerValues(req: NodeRequest, name: string): string | readonly string[] | undefined {
  const distinct = req.headersDistinct
  return distinct === undefined ? req.headers[name] : distinct[name]
}

/**
 * Calls `ended(finished)` once, when `res` ends: `true` on `finish` (the response was sent in full),
 * `false` on `close` before it (the client went away). At once when it has already ended.
 */
export function whenResponseEnds(res: NodeResponse, ended: (finished: boolean) => void): void {
  if (res.writableFinished === true || res.destroyed || res.closed === true) {
    ended(res.writableFinished === true)
    return
  }
  const finish = () => {
    res.removeListener('close', close)
    ended(true)
  }
  const close = () => {
    res.removeListener('finish', finish)
    ended(res.writableFinished === true)
  }
  res.once('finish', finish)
  res.once('close', close)
}
