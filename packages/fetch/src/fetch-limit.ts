/**
 * @module fetchLimit: sluice for `Request → Response` servers (Bun.serve, Deno.serve, Next.js route
 * handlers). It tells core's HTTP kit how to read a `Request`, then writes out the outcome: the handler's
 * `Response` with the rate-limit headers added, a hold before the handler, or a 400/429 of its own.
 */
import type { Decision, Limiter } from '@sluice/core'
import {
  type HttpLimitOptions,
  type HttpOutcome,
  parseHttpOptions,
  type RequestRateLimit,
  type RequestView,
} from '@sluice/core/http'
import { functionOption } from '@sluice/core/options'
import {
  departedResponse,
  exchangeLimit,
  FetchExchange,
  type FetchSettle,
  fetchAdapter,
  jsonResponse,
  withHeaders,
} from './exchange.ts'

/**
 * Options of `fetchLimit`: every option core's HTTP kit knows (with `countWhen(request, response)` asked
 * about the handler's `Response`), plus `onLimited`. Rules, stores and `createLimiter` come from
 * `@sluice/core`.
 */
export interface FetchLimitOptions extends Omit<HttpLimitOptions<Request, Response>, 'settle'> {
  /**
   * Asked once when the response has ended (its body read to its end, or cancelled, or the request
   * aborted): the request's true cost, as core's `settle` option (`HttpLimitOptions.settle`); `response`
   * is undefined when the client left before the handler answered.
   */
  settle?: FetchSettle<Request>
  /**
   * Called for a denied request. It may answer with a `Response` of its own (sluice adds the rate-limit
   * headers to it); when it answers nothing, sluice sends its 429 as usual. A throw or a rejection rejects
   * `handle`.
   */
  onLimited?: (request: Request, decision: Decision) => Response | undefined | Promise<Response | undefined>
}

/** What the runtime knows of a request beyond the `Request` itself. */
export interface FetchRequestInfo {
  /**
   * The client's address, for `key: 'ip'`: `server.requestIP(request)?.address` in Bun,
   * `info.remoteAddr.hostname` in Deno. Behind a proxy, the address your proxy gives (never a
   * client-sent header you do not control).
   */
  ip?: string | undefined
  /**
   * The route's template (`'POST /pay/:id'`), for `key: 'route'` and the `sluice:http` channel.
   * Default: the method and the URL's path, and no template on the channel.
   */
  route?: string | undefined
}

/** A limit for `Request → Response` handlers. */
export interface FetchLimit {
  /** The limiter it counts on (for `peek` and `reset`). */
  readonly limiter: Limiter<Request>
  /**
   * Decides `request`, holds it when it is queued, calls `handler`, and answers its `Response` with the
   * rate-limit headers added; a denied request is answered 429 (or `statusCode`) with `Retry-After` and
   * problem details, without calling `handler`. The request's end (which releases a concurrency lease and
   * asks `countWhen`) is when the answer's body has been read to its end or cancelled, or the request's
   * `signal` aborted. Rejects when the store fails under `onStoreError: 'throw'`, when a user function
   * throws, or with what `handler` threw.
   */
  handle(request: Request, info: FetchRequestInfo, handler: FetchHandler): Promise<Response>
}

/**
 * What `handle` calls for an admitted request (or one no limit counts): `decision` is that of the sluice
 * limit that last counted the request (`remaining`, `waitMs`…), with `settle(cost)` (see `RequestRateLimit`),
 * undefined when none did (skipped).
 */
export type FetchHandler = (
  request: Request,
  decision: RequestRateLimit | undefined,
) => Response | Promise<Response>

type OnLimited = NonNullable<FetchLimitOptions['onLimited']>
const OWN_OPTIONS = { onLimited: functionOption }

/** What each request's `handle` was told, for the view. */
const infos = new WeakMap<Request, FetchRequestInfo>()

/**
 * How sluice reads a `Request`. `'ip'` is the address `handle` was given. Headers come from `Headers`,
 * which joins a header sent on several lines into one value with `", "`: the README says what that means
 * for header keys.
 */
const view: RequestView<Request> = {
  ip: (request) => infos.get(request)?.ip,
  route: (request) => infos.get(request)?.route ?? `${request.method} ${new URL(request.url).pathname}`,
  routeTemplate: (request) => infos.get(request)?.route,
  header: (request, name) => request.headers.get(name) ?? undefined,
}

const adapter = fetchAdapter(view)

/**
 * A limit for `Request → Response` handlers: `const limit = fetchLimit(o)`, then in the server,
 * `return limit.handle(request, { ip }, handler)`. Every option is checked here, once; an invalid or
 * unknown one throws `InvalidOptionError` naming it (`fetchLimit.<name>`).
 *
 * @example
 * ```ts
 * const limit = fetchLimit({ rules: [slidingWindow({ limit: 100, windowMs: 60_000 })] })
 * Bun.serve({
 *   fetch: (request, server) =>
 *     limit.handle(request, { ip: server.requestIP(request)?.address }, (_request, decision) =>
 *       Response.json({ remaining: decision?.remaining }),
 *     ),
 * })
 * ```
 */
export function fetchLimit(options: FetchLimitOptions): FetchLimit {
  const parsed = parseHttpOptions<Request, FetchExchange>('fetchLimit', options, OWN_OPTIONS)
  const onLimited = parsed.own.onLimited as OnLimited | undefined
  const limit = exchangeLimit(parsed, adapter)

  async function handle(request: Request, info: FetchRequestInfo, handler: FetchHandler): Promise<Response> {
    infos.set(request, info)
    const exchange = new FetchExchange(request)
    const decided = limit.consume(request, exchange)
    const outcome = decided instanceof Promise ? await decided : decided
    if (outcome.action === 'reject') return jsonResponse(outcome.status, outcome.body, outcome.contentType)
    if (outcome.action === 'deny') return limited(outcome, request)
    if (outcome.action === 'allow' && outcome.decision.waitMs > 0) {
      if (!(await limit.hold(request, exchange, outcome))) return departedResponse()
    }
    const record = adapter.recordOf(request)
    let response: Response
    try {
      response = await handler(request, record?.shown)
    } catch (error) {
      exchange.abandon()
      throw error
    }
    // Every limit's headers that counted the request so far, so an outer limit's do not hide an inner one's.
    return exchange.respond(response, record?.headers)
  }

  async function limited(
    outcome: Extract<HttpOutcome, { action: 'deny' }>,
    request: Request,
  ): Promise<Response> {
    const own = onLimited === undefined ? undefined : await onLimited(request, outcome.decision)
    if (own !== undefined) return withHeaders(own, outcome.headers)
    return jsonResponse(outcome.status, outcome.body, outcome.contentType, outcome.headers)
  }

  return { limiter: limit.limiter, handle }
}
