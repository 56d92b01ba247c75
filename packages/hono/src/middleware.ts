/**
 * @module rateLimit: the Hono middleware, on Node, Bun, Deno and every runtime Hono runs on. It reads a
 * Hono `Context` for core's HTTP kit and writes out the outcome through `@sluice/fetch`: the rate-limit
 * headers added to `c.res` (also an immutable one), a hold before `next()`, or a 400/429 of its own.
 */
import { type Decision, InvalidOptionError, type Limiter } from '@sluice/core'
import {
  type HttpLimitOptions,
  type HttpOutcome,
  type KeySpec,
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
} from '@sluice/fetch'
import type { Context, Env, MiddlewareHandler } from 'hono'
import type { GetConnInfo } from 'hono/conninfo'
import { routePath } from 'hono/route'

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * The decision of the sluice limit that last counted this request (allowed or denied), at
     * `c.get('rateLimit')`, with `settle(cost)`: the request's true cost, settled now (see
     * `RequestRateLimit`). `undefined` when no limit counted it.
     */
    rateLimit?: RequestRateLimit
  }
}

/**
 * Options of `rateLimit`: every option core's HTTP kit knows (`key`, `cost`, `skip`, `message` and
 * `rules` functions are given the `Context`; `countWhen(c, response)` the `Response` sent), plus
 * `getConnInfo` and `onLimited`. Rules, stores and `createLimiter` come from `@sluice/core`.
 */
export interface HonoRateLimitOptions<E extends Env = Env>
  extends Omit<HttpLimitOptions<Context<E>, Response>, 'settle'> {
  /**
   * Asked once when the response has ended (its body read to its end, or cancelled, or the request
   * aborted): the request's true cost, as core's `settle` option (`HttpLimitOptions.settle`); `response`
   * is undefined when the client left before the handler answered.
   */
  settle?: FetchSettle<Context<E>>
  /**
   * Your runtime's `getConnInfo` (from `hono/bun`, `hono/deno`, `@hono/node-server/conninfo`,
   * `hono/cloudflare-workers`…): how `key: 'ip'` reads the client's address. Required when the key
   * uses `'ip'` (the default key); without it `rateLimit` throws `InvalidOptionError` naming
   * `rateLimit.getConnInfo`.
   */
  getConnInfo?: GetConnInfo
  /**
   * Called for a denied request, with the rate-limit headers written. It may answer with a `Response`
   * of its own (`c.json(…, 429)`); when it answers nothing, sluice sends its 429 as usual. A throw or a
   * rejection goes to Hono's error handler.
   */
  onLimited?: (c: Context<E>, decision: Decision) => Response | undefined | Promise<Response | undefined>
}

/** The middleware, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitMiddleware<E extends Env = Env> = MiddlewareHandler<E> & {
  readonly limiter: Limiter<Context<E>>
}

type OnLimited = NonNullable<HonoRateLimitOptions['onLimited']>
const OWN_OPTIONS = { getConnInfo: functionOption, onLimited: functionOption }

/** Each request's `getConnInfo`, as the limit that saw it was given it. */
const connInfos = new WeakMap<Context, GetConnInfo>()

/**
 * How sluice reads a Hono request. `'ip'` is `getConnInfo(c).remote.address`; `'route'` the method and
 * the matched route's template (`routePath(c, -1)`: the route the request is going to, also from an
 * `app.use` middleware). Headers come from `Headers`, which joins a header sent on several lines with
 * `", "` (the README says what that means for header keys).
 */
const view: RequestView<Context> = {
  ip: (c) => connInfos.get(c)?.(c).remote.address,
  route: (c) => `${c.req.method} ${routePath(c, -1)}`,
  routeTemplate: (c) => `${c.req.method} ${routePath(c, -1)}`,
  header: (c, name) => c.req.raw.headers.get(name) ?? undefined,
}

const adapter = fetchAdapter(view)

/**
 * Hono middleware limiting the requests that reach it: `app.use(rateLimit(o))`, or per route,
 * `app.post('/pay', rateLimit(o), handler)`. Every option is checked here, once; an invalid or unknown
 * one throws `InvalidOptionError` naming it (`rateLimit.<name>`).
 *
 * @example
 * ```ts
 * import { getConnInfo } from 'hono/bun'
 * app.use(rateLimit({ rules: [slidingWindow({ limit: 100, windowMs: 60_000 })], getConnInfo }))
 * ```
 */
export function rateLimit<E extends Env = Env>(options: HonoRateLimitOptions<E>): RateLimitMiddleware<E> {
  const parsed = parseHttpOptions<Context, FetchExchange>('rateLimit', options, OWN_OPTIONS)
  const getConnInfo = parsed.own.getConnInfo as GetConnInfo | undefined
  if (getConnInfo === undefined && usesIp(parsed.key ?? 'ip')) {
    throw new InvalidOptionError(
      'rateLimit.getConnInfo',
      undefined,
      "your runtime's getConnInfo (hono/bun, hono/deno, @hono/node-server/conninfo) when the key uses 'ip', the default",
    )
  }
  const onLimited = parsed.own.onLimited as OnLimited | undefined
  const limit = exchangeLimit(parsed, adapter)

  async function sluiceRateLimit(c: Context, next: () => Promise<void>): Promise<Response | undefined> {
    if (getConnInfo !== undefined) connInfos.set(c, getConnInfo)
    const exchange = new FetchExchange(c.req.raw)
    const decided = limit.consume(c, exchange)
    const outcome = decided instanceof Promise ? await decided : decided
    if (outcome.action === 'reject') return jsonResponse(outcome.status, outcome.body, outcome.contentType)
    const record = adapter.recordOf(c)
    const shown = record?.shown
    if (shown !== undefined) c.set('rateLimit', shown)
    if (outcome.action === 'deny') return limited(outcome, c)
    if (outcome.action === 'allow' && outcome.decision.waitMs > 0) {
      if (!(await limit.hold(c, exchange, outcome))) return departedResponse()
    }
    try {
      await next()
    } catch (error) {
      // Hono answers errors itself (app.onError) and never throws past its middleware; a runtime that does
      // has no response for this request.
      exchange.abandon()
      throw error
    }
    const sent = c.res
    const answer = exchange.respond(sent, record?.headers)
    // Setting c.res makes Hono copy the response once more: only when it is a new one.
    if (answer !== sent) c.res = answer
    return undefined
  }

  async function limited(outcome: Extract<HttpOutcome, { action: 'deny' }>, c: Context): Promise<Response> {
    const own = onLimited === undefined ? undefined : await onLimited(c, outcome.decision)
    if (own !== undefined) return withHeaders(own, outcome.headers)
    return jsonResponse(outcome.status, outcome.body, outcome.contentType, outcome.headers)
  }

  return Object.assign(sluiceRateLimit as MiddlewareHandler<E>, {
    limiter: limit.limiter as Limiter<Context<E>>,
  })
}

/** Whether a key reads the client's address. */
function usesIp(key: KeySpec<Context>): boolean {
  return key === 'ip' || (Array.isArray(key) && key.includes('ip'))
}
