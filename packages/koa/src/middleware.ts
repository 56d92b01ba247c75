/**
 * @module rateLimit: the Koa middleware. It tells core's HTTP kit how to read a Koa context and where the
 * request's record lives, then writes the outcome out through `ctx`: headers and `next()`, a hold, or a
 * 400/429 with its problem body. Everything a limit decides lives in `@sluice/core`.
 */
import type { Decision, Limiter } from '@sluice/core'
import {
  buildRequestLimit,
  type HttpAdapter,
  type HttpLimitOptions,
  type HttpOutcome,
  headerValues,
  parseHttpOptions,
  type RequestRateLimit,
  type RequestRecord,
  type RequestView,
  type ResponseBody,
} from '@sluice/core/http'
import { functionOption } from '@sluice/core/options'
import type { Context, Middleware, Next } from 'koa'

declare module 'koa' {
  interface DefaultState {
    /**
     * The decision of the sluice limit that last counted this request (allowed or denied), with
     * `settle(cost)`: the request's true cost, settled now (see `RequestRateLimit`).
     * `undefined` when no limit counted it: skipped, or a missing key part under `onMissingKey: 'skip'`.
     */
    rateLimit?: RequestRateLimit
  }
}

/**
 * Options of `rateLimit`: every option core's HTTP kit knows, each function taking the Koa context
 * (`key: (ctx) => …`, `countWhen: (ctx) => ctx.status >= 400`), plus `onLimited`. Rules, `MemoryStore`
 * and `createLimiter` come from `@sluice/core`.
 */
export interface KoaRateLimitOptions extends HttpLimitOptions<Context, Context> {
  /**
   * Called for a denied request, with `ctx.status` (`statusCode`, default 429) and the rate-limit headers
   * already set. It may answer through `ctx` (set `ctx.body`); when it has not by the time it returns (or
   * its promise settles), sluice sends its problem body as usual. A throw (`ctx.throw(429)`) goes to the
   * app's error handling, like any error of a middleware; Koa's own handler then sends the error's
   * `headers` only, so put the rate-limit headers you need on the error.
   */
  onLimited?: (ctx: Context, decision: Decision) => void | Promise<void>
}

/** The middleware, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitMiddleware = Middleware & { readonly limiter: Limiter<Context> }

type OnLimited = NonNullable<KoaRateLimitOptions['onLimited']>

const OWN_OPTIONS = { onLimited: functionOption }

/**
 * How sluice reads a Koa context. `'ip'` is `ctx.ip`, so Koa's `app.proxy` (with `proxyIpHeader` and
 * `maxIpsCount`) decides whether `X-Forwarded-For` counts. `'route'` is the method and the template
 * `@koa/router` matched (`ctx._matchedRoute`) when the limit runs on a router (a route, or `router.use`),
 * else, at `app.use` level, the method and the path without its query string. Headers are read line by line.
 */
const view: RequestView<Context> = {
  ip: (ctx) => ctx.ip,
  route: (ctx) => `${ctx.method} ${templateOf(ctx) ?? ctx.path}`,
  routeTemplate: (ctx) => {
    const template = templateOf(ctx)
    return template === undefined ? undefined : `${ctx.method} ${template}`
  },
  header: (ctx, name) => headerValues(ctx.req, name),
}

/** A layer of `@koa/router`, as far as sluice reads it. */
interface RouterLayer {
  readonly methods?: readonly string[]
  readonly path?: unknown
}

/**
 * The template of the route `@koa/router` matched: the last layer matched that serves the request's method
 * (what it sets `ctx._matchedRoute` to before it runs the route), so a limit on `router.use()` gets the
 * route's template too, where `ctx._matchedRoute` still names the `use` layer's path pattern.
 */
function templateOf(ctx: Context): string | undefined {
  const matched: unknown = ctx['matched']
  if (Array.isArray(matched)) {
    for (let i = matched.length - 1; i >= 0; i--) {
      const layer = matched[i] as RouterLayer
      if (typeof layer.path === 'string' && layer.methods?.includes(ctx.method) === true) return layer.path
    }
  }
  const route: unknown = ctx['_matchedRoute']
  return typeof route === 'string' ? route : undefined
}

/** Each request's record, by its context: a context lives as long as its request. */
const records = new WeakMap<Context, RequestRecord>()

const adapter: HttpAdapter<Context, Context> = {
  view,
  recordOf: (ctx) => records.get(ctx),
  keepRecord(ctx, record) {
    records.set(ctx, record)
    Object.defineProperty(ctx.state, 'rateLimit', {
      get: () => record.shown,
      configurable: true,
      enumerable: true,
    })
  },
  responseOf: (ctx) => ctx.res,
}

/**
 * Koa middleware limiting the requests that reach it: `app.use(rateLimit(o))`, `router.use(...)`, or per
 * route with `@koa/router`, `router.post('/pay', rateLimit(o), handler)`. Every option is checked here,
 * once; an invalid or unknown one throws `InvalidOptionError` naming it (`rateLimit.<name>`). A denial is
 * answered through `ctx` (status, headers, problem body), never thrown, unless `onLimited` throws.
 */
export function rateLimit(options: KoaRateLimitOptions): RateLimitMiddleware {
  const parsed = parseHttpOptions<Context, Context>('rateLimit', options, OWN_OPTIONS)
  const onLimited = parsed.own.onLimited as OnLimited | undefined
  const limit = buildRequestLimit(parsed, adapter)

  async function sluiceRateLimit(ctx: Context, next: Next): Promise<void> {
    const decided = limit.consume(ctx, ctx)
    const outcome = decided instanceof Promise ? await decided : decided
    if (outcome.action === 'pass') return next()
    if (outcome.action === 'reject') return answer(ctx, outcome.status, outcome.body, outcome.contentType)
    ctx.set(outcome.headers)
    if (outcome.action === 'deny') return limited(outcome, ctx)
    // A held request whose client left stops here: nothing downstream runs for nobody.
    if (outcome.decision.waitMs > 0 && !(await limit.hold(ctx, ctx, outcome))) return
    return next()
  }

  /** Answers a denied request: the user's `onLimited` first, if any; sluice's body unless it has answered. */
  async function limited(outcome: Extract<HttpOutcome, { action: 'deny' }>, ctx: Context): Promise<void> {
    ctx.status = outcome.status
    if (onLimited !== undefined) {
      await onLimited(ctx, outcome.decision)
      if (ctx.body != null || ctx.respond === false || ctx.headerSent) return
    }
    answer(ctx, outcome.status, outcome.body, outcome.contentType)
  }

  return Object.assign(sluiceRateLimit, { limiter: limit.limiter })
}

function answer(ctx: Context, status: number, body: ResponseBody, contentType: string): void {
  ctx.status = status
  ctx.type = contentType
  ctx.body = JSON.stringify(body)
}
