/**
 * @module rateLimit: the Express middleware. It tells core's HTTP kit how to read an Express request and
 * where the request's record lives, then writes out the outcome: headers and `next()`, a hold, or 400/429.
 * Everything a limit decides lives in `@sluice/core`; this file only translates for Express 4 and 5.
 */
import type { Decision, Limiter } from '@sluice/core'
import {
  buildRequestLimit,
  type HttpAdapterBase,
  type HttpLimitOptions,
  headerValues,
  type NodeResponse,
  parseHttpOptions,
  type RequestRateLimit,
  type RequestRecord,
  type RequestView,
  respondOnNode,
} from '@sluice/core/http'
import { functionOption } from '@sluice/core/options'
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { mountTemplate } from './route.ts'

declare global {
  // Express types its request through this global namespace; merging here types `req.rateLimit`.
  namespace Express {
    interface Request {
      /**
       * The decision of the sluice limit that last counted this request (allowed or denied), with
       * `settle(cost)`: the request's true cost, settled now (see `RequestRateLimit`).
       * `undefined` when no limit counted it: skipped, or a missing key part under `onMissingKey: 'skip'`.
       */
      rateLimit?: RequestRateLimit
    }
  }
}

/**
 * Options of `rateLimit`: every option core's HTTP kit knows, plus `onLimited`.
 * Rules (`fixedWindow`, `slidingLog`, `slidingWindow`, `tokenBucket`, `leakyBucket`, `concurrency`, `warmUp`), `MemoryStore`
 * and `createLimiter` come from `@sluice/core`.
 */
export interface ExpressRateLimitOptions extends HttpLimitOptions<Request, Response> {
  /**
   * Called for a denied request, with the status (`statusCode`, default 429) and the rate-limit headers
   * already set on `res`. It may send a response of its own; when it has not sent one by the time it
   * returns (or its promise settles), sluice sends its 429 as usual, so a callback that only logs never
   * leaves a request hanging. A throw or a rejection goes to `next(err)`.
   */
  onLimited?: (req: Request, res: Response, decision: Decision) => void | Promise<void>
}

/** The middleware, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitMiddleware = RequestHandler & { readonly limiter: Limiter<Request> }

type OnLimited = NonNullable<ExpressRateLimitOptions['onLimited']>

const OWN_OPTIONS = { onLimited: functionOption }

/**
 * How sluice reads an Express request for the middleware `self`. `'ip'` is `req.ip`, so Express's
 * `trust proxy` setting decides whether `X-Forwarded-For` counts. `'route'` is the matched route's template
 * under its mounts' templates (route.ts: never the raw text a client's letter case or parameter values
 * chose) when a route has matched (per-route use), else, at `app.use` level, the mount template plus the
 * path without its query string. Headers are read line by line (`headersDistinct`).
 */
function viewOf(self: object): RequestView<Request> {
  return {
    ip: (req) => req.ip,
    route: (req) => {
      const route = req.route as { path?: unknown } | undefined
      // A mount this cannot read keeps the raw text (route.ts says when).
      const mount = mountTemplate(req, route ?? self) ?? req.baseUrl
      return `${req.method} ${mount}${route === undefined ? req.path : String(route.path)}`
    },
    routeTemplate: (req) => {
      const route = req.route as { path?: unknown } | undefined
      const mount = route === undefined ? undefined : mountTemplate(req, route)
      return mount === undefined ? undefined : `${req.method} ${mount}${String(route!.path)}`
    },
    header: (req, name) => headerValues(req, name),
  }
}

/**
 * Each request's record, in a WeakMap rather than a property on the request: Express gives each request
 * its app's prototype after Node has built it, and V8 then makes a new hidden class for every property
 * added to that request (about 2 us and a class's worth of garbage per request).
 */
const records = new WeakMap<object, RequestRecord>()

const adapter: Omit<HttpAdapterBase<Request>, 'view'> & { responseOf(res: Response): NodeResponse } = {
  recordOf: (req) => records.get(req),
  keepRecord(req, record) {
    records.set(req, record)
    if (!servedByAccessor(req)) {
      // A request without an app's prototype (one made by hand) gets a getter of its own.
      Object.defineProperty(req, 'rateLimit', {
        get: () => record.shown,
        configurable: true,
        enumerable: true,
      })
    }
  },
  responseOf: (res) => res,
}

/**
 * Express middleware limiting the requests that reach it: `app.use(rateLimit(o))`, `router.use(...)`,
 * or per route, `app.post('/pay', rateLimit(o), handler)`. Every option is checked here, once; an
 * invalid or unknown one throws `InvalidOptionError` naming it (`rateLimit.<name>`).
 */
export function rateLimit(options: ExpressRateLimitOptions): RateLimitMiddleware {
  const parsed = parseHttpOptions<Request, Response>('rateLimit', options, OWN_OPTIONS)
  const onLimited = parsed.own.onLimited as OnLimited | undefined
  const limit = buildRequestLimit(parsed, { ...adapter, view: viewOf(sluiceRateLimit) })
  const respond = respondOnNode(limit, onLimited)

  /**
   * Not an async function: on a memory store the outcome is there at once, and `next()` runs in the same
   * tick, as it would for a request no limit applies to.
   */
  function sluiceRateLimit(req: Request, res: Response, next: NextFunction): void {
    const outcome = limit.consume(req, res)
    if (outcome instanceof Promise) outcome.then((o) => respond(o, req, res, next), next)
    else respond(outcome, req, res, next)
  }

  return Object.assign(sluiceRateLimit, { limiter: limit.limiter })
}

/**
 * Whether `req.rateLimit` is served by the accessor on the prototype every app's request prototype
 * inherits from (`express.request`), defined once, reading the request's record: the decision is then seen
 * from every app the request passes (a mounted app swaps the prototype back and forth). False for a request
 * without an app prototype (one made by hand), or one whose `rateLimit` something else defines.
 */
function servedByAccessor(req: Request): boolean {
  const own: object | null = Object.getPrototypeOf(req)
  if (own === null) return false
  let ours = served.get(own)
  if (ours === undefined) {
    ours = installAccessor(own)
    served.set(own, ours)
  }
  return ours
}

/** Defines the accessor above the app's request prototype `own`; true when it (this copy's) serves `own`. */
function installAccessor(own: object): boolean {
  // An app's request prototype is the one holding `app`; a mounted app's inherits from its parent's.
  // Above the outermost one sits `express.request`.
  let shared: object | null = own
  while (shared !== null && Object.hasOwn(shared, 'app')) shared = Object.getPrototypeOf(shared)
  if (shared === own || shared === null || shared === Object.prototype) return false
  const existing = Object.getOwnPropertyDescriptor(shared, 'rateLimit')
  if (existing !== undefined) return existing.get === readDecision
  if ('rateLimit' in shared) return false
  Object.defineProperty(shared, 'rateLimit', {
    configurable: true,
    enumerable: false,
    get: readDecision,
    set(this: object, decision: Decision) {
      const record = records.get(this)
      if (record !== undefined) record.decision = decision
      else Object.defineProperty(this, 'rateLimit', { value: decision, writable: true, configurable: true })
    },
  })
  return true
}

function readDecision(this: object): RequestRateLimit | undefined {
  return records.get(this)?.shown
}

/** For each request prototype seen, whether the accessor serves it. */
const served = new WeakMap<object, boolean>()
