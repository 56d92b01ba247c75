/**
 * @module rateLimit and withRateLimit: sluice for servers with no framework, or with one that speaks Node's
 * own request and response (Connect, Polka, a Next.js custom server). It tells core's HTTP kit how to read
 * an `IncomingMessage` (the socket's address, or `X-Forwarded-For` through the proxies the user trusts; the
 * route template from the user's `route`) and writes the outcome out on the `ServerResponse`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type Decision, InvalidOptionError, type Limiter } from '@sluice/core'
import {
  buildRequestLimit,
  type HttpAdapter,
  type HttpLimitOptions,
  headerValues,
  parseHttpOptions,
  type RequestRateLimit,
  type RequestRecord,
  type RequestView,
  respondOnNode,
} from '@sluice/core/http'
import { functionOption } from '@sluice/core/options'
import { type AddressOf, socketAddress, trustProxyOption } from './proxy.ts'

declare module 'node:http' {
  interface IncomingMessage {
    /**
     * The decision of the sluice limit that last counted this request (allowed or denied), with
     * `settle(cost)`: the request's true cost, settled now (see `RequestRateLimit`).
     * `undefined` when no limit counted it: skipped, or a missing key part under `onMissingKey: 'skip'`.
     */
    rateLimit?: RequestRateLimit
  }
}

/** Options of `rateLimit` and `withRateLimit`: every option core's HTTP kit knows, plus the three below. */
export interface NodeRateLimitOptions extends HttpLimitOptions<IncomingMessage, ServerResponse> {
  /**
   * The addresses and CIDRs of your own proxies (`['127.0.0.1', '10.0.0.0/8']`). The client's address is
   * the socket's; when that is a trusted proxy, `X-Forwarded-For` is read from the right up to the first
   * address that is not one of them. `true` is refused (`ERR_SLUICE_INVALID_OPTION`): it would let any client
   * choose its address. Default: none, the socket's address.
   */
  trustProxy?: readonly string[]
  /**
   * The request's route template, without the method (`(req) => '/users/:id'`): node:http has no router,
   * so `key: 'route'` needs it (and is refused without it); `sluice:http` and the metrics label requests
   * with it. Never the raw URL: ids in it would give every resource a limit of its own.
   */
  route?: (req: IncomingMessage) => string
  /**
   * Called for a denied request, with the status (`statusCode`, default 429) and the rate-limit headers
   * already set on `res`. It may send a response of its own; when it has not sent one by the time it
   * returns (or its promise settles), sluice sends its 429. A throw or a rejection goes to `next(err)`.
   */
  onLimited?: (req: IncomingMessage, res: ServerResponse, decision: Decision) => void | Promise<void>
}

/** Connect's `next`: called with nothing to go on, or with an error. */
export type NextFunction = (error?: unknown) => void

/** The connect-style middleware, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitMiddleware = ((
  req: IncomingMessage,
  res: ServerResponse,
  next: NextFunction,
) => void) & {
  readonly limiter: Limiter<IncomingMessage>
}

/** A `http.createServer` listener, with the limiter it counts on. */
export type RateLimitedListener = ((req: IncomingMessage, res: ServerResponse) => void) & {
  readonly limiter: Limiter<IncomingMessage>
}

type OnLimited = NonNullable<NodeRateLimitOptions['onLimited']>

const OWN_OPTIONS = { trustProxy: trustProxyOption, route: functionOption, onLimited: functionOption }

/** Each request's record: shared by every limit the request meets, so stacked limits list their headers together. */
const records = new WeakMap<IncomingMessage, RequestRecord>()

function adapterFor(address: AddressOf, route: ((req: IncomingMessage) => string) | undefined) {
  const template = route === undefined ? undefined : (req: IncomingMessage) => `${req.method} ${route(req)}`
  const view: RequestView<IncomingMessage> = {
    ip: address,
    // Without `route` this is never a key ('route' is refused then); the path without its query.
    route: template ?? ((req) => `${req.method} ${(req.url ?? '').split('?', 1)[0]}`),
    routeTemplate: template,
    header: headerValues,
  }
  const adapter: HttpAdapter<IncomingMessage, ServerResponse> = {
    view,
    recordOf: (req) => records.get(req),
    keepRecord(req, record) {
      records.set(req, record)
      Object.defineProperty(req, 'rateLimit', {
        get: () => record.shown,
        configurable: true,
        enumerable: true,
      })
    },
    responseOf: (res) => res,
  }
  return adapter
}

/**
 * Connect-style middleware, `rateLimit(o)(req, res, next)`, for Connect, Polka and anything that calls a
 * middleware that way. Every option is checked here, once; an invalid or unknown one throws
 * `InvalidOptionError` naming it (`rateLimit.<name>`).
 */
export function rateLimit(options: NodeRateLimitOptions): RateLimitMiddleware {
  const parsed = parseHttpOptions<IncomingMessage, ServerResponse>('rateLimit', options, OWN_OPTIONS)
  const route = parsed.own.route as ((req: IncomingMessage) => string) | undefined
  if (route === undefined && usesRoute(parsed.key)) {
    throw new InvalidOptionError(
      'rateLimit.route',
      undefined,
      "a function (req) => route template, such as (req) => '/users/:id', which key: 'route' needs: " +
        'node:http has no router to name the route, and the raw URL would give every id a limit of its own',
    )
  }
  const address = (parsed.own.trustProxy as AddressOf | undefined) ?? socketAddress
  const onLimited = parsed.own.onLimited as OnLimited | undefined
  const limit = buildRequestLimit(parsed, adapterFor(address, route))
  const respond = respondOnNode(limit, onLimited)

  /** Not an async function: on a memory store `next()` runs in the same tick. */
  function sluiceRateLimit(req: IncomingMessage, res: ServerResponse, next: NextFunction): void {
    const outcome = limit.consume(req, res)
    if (outcome instanceof Promise) outcome.then((o) => respond(o, req, res, next), next)
    else respond(outcome, req, res, next)
  }

  return Object.assign(sluiceRateLimit, { limiter: limit.limiter })
}

/**
 * A `http.createServer` listener that runs `handler` for the requests the limit lets through:
 * `http.createServer(withRateLimit(o, handler))`. An error before the handler (a store under
 * `onStoreError: 'throw'`, a throwing key function or `onLimited`) has no framework to go to: it is
 * answered 500 and reported as a `SluiceWarning`. Use `rateLimit(o)(req, res, next)` to handle it yourself.
 */
export function withRateLimit(
  options: NodeRateLimitOptions,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): RateLimitedListener {
  const middleware = rateLimit(options)
  function listener(req: IncomingMessage, res: ServerResponse): void {
    middleware(req, res, (error) => {
      if (error === undefined) handler(req, res)
      else failed(res, error)
    })
  }
  return Object.assign(listener, { limiter: middleware.limiter })
}

function failed(res: ServerResponse, error: unknown): void {
  process.emitWarning(`sluice: a request failed before its handler: ${String(error)}`, 'SluiceWarning')
  if (res.headersSent || res.writableEnded) {
    res.destroy()
    return
  }
  res.statusCode = 500
  res.end()
}

/** Whether a key spec (one part or a list) has a `'route'` part. */
function usesRoute(key: unknown): boolean {
  return key === 'route' || (Array.isArray(key) && key.includes('route'))
}
