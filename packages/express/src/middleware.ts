/**
 * @module rateLimit: the Express middleware. It reads an Express request through a `RequestView`,
 * asks core's HTTP kit for an outcome, writes the headers and calls `next()`, or answers 400/429.
 * Everything a limit decides lives in `@sluice/core`; this file only translates for Express 4 and 5.
 */
import {
  type CountedBy,
  combineHeaders,
  type Decision,
  HTTP_OPTION_NAMES,
  type HttpLimitOptions,
  type HttpOutcome,
  holdResponse,
  InvalidOptionError,
  isPromise,
  knownOptions,
  type Limiter,
  type RequestView,
  type ResponseBody,
  resolveHttpLimit,
  withCounted,
} from '@sluice/core'
import type { NextFunction, Request, RequestHandler, Response } from 'express'

declare global {
  // Express types its request through this global namespace; merging here types `req.rateLimit`.
  namespace Express {
    interface Request {
      /**
       * The decision of the sluice limit that last counted this request (allowed or denied).
       * Absent when no limit counted it: skipped, or a missing key part under `onMissingKey: 'skip'`.
       */
      rateLimit?: Decision
    }
  }
}

/**
 * Options of `rateLimit`: every option core's HTTP kit knows, plus `onLimited`.
 * Rules (`fixedWindow`, `slidingLog`, `slidingWindow`, `tokenBucket`, `leakyBucket`), `MemoryStore`
 * and `createLimiter` come from `@sluice/core`.
 */
export interface ExpressRateLimitOptions extends HttpLimitOptions<Request> {
  /**
   * Sends the response for a denied request instead of the default problem-details JSON. It is called
   * with the status (`statusCode`, default 429) and the rate-limit headers already set on `res`, and
   * must end the response. A throw or a rejection goes to `next(err)`.
   */
  onLimited?: (req: Request, res: Response, decision: Decision) => void | Promise<void>
}

/** The middleware, with the limiter it counts on (for `peek` and `reset`). */
export type RateLimitMiddleware = RequestHandler & { readonly limiter: Limiter<Request> }

type Denied = Extract<HttpOutcome, { action: 'deny' }>

const OPTION_NAMES: readonly string[] = [...HTTP_OPTION_NAMES, 'onLimited']

/**
 * How sluice reads an Express request. `'ip'` is `req.ip`, so Express's `trust proxy` setting decides
 * whether `X-Forwarded-For` counts. `'route'` is the matched route's template under its mount path
 * when a route has matched (per-route use), else, at `app.use` level, the mount path plus the path
 * without its query string.
 */
const view: RequestView<Request> = {
  ip: (req) => req.ip,
  route: (req) => {
    const route = req.route as { path?: unknown } | undefined
    return `${req.method} ${req.baseUrl}${route === undefined ? req.path : String(route.path)}`
  },
  header: (req, name) => req.headers[name],
  countOnce(req, limiter) {
    const record = recordOf(req)
    const counted = withCounted(record.counted, limiter)
    if (counted === false) return false
    record.counted = counted
    return true
  },
}

/**
 * Express middleware limiting the requests that reach it: `app.use(rateLimit(o))`, `router.use(...)`,
 * or per route, `app.post('/pay', rateLimit(o), handler)`. Every option is checked here, once; an
 * invalid or unknown one throws `InvalidOptionError` naming it (`rateLimit.<name>`).
 */
export function rateLimit(options: ExpressRateLimitOptions): RateLimitMiddleware {
  const { onLimited, ...shared } = knownOptions<ExpressRateLimitOptions>('rateLimit', options, OPTION_NAMES)
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw new InvalidOptionError('rateLimit.onLimited', onLimited, 'a function')
  }
  const limit = resolveHttpLimit<Request>('rateLimit', shared, view)

  /**
   * Not an async function: on a memory store the outcome is there at once, and `next()` runs in the same
   * tick, as it would for a request no limit applies to.
   */
  function sluiceRateLimit(req: Request, res: Response, next: NextFunction): void {
    const outcome = limit.check(req)
    if (outcome instanceof Promise) outcome.then((o) => respond(o, req, res, next), next)
    else respond(outcome, req, res, next)
  }

  /** Writes out an outcome. Never throws: whatever fails goes to `next(err)`. */
  function respond(outcome: HttpOutcome, req: Request, res: Response, next: NextFunction): void {
    if (outcome.action === 'pass') {
      next()
      return
    }
    try {
      if (outcome.action === 'reject') {
        sendJson(res, outcome.status, outcome.body, outcome.contentType)
        return
      }
      const record = keepDecision(req, outcome.decision)
      // When another sluice limit counted this request first, the response lists both limits.
      const headers =
        record.headers === undefined ? outcome.headers : combineHeaders(record.headers, outcome.headers)
      record.headers = headers
      for (const name in headers) res.setHeader(name, headers[name]!)
      if (outcome.action === 'deny') {
        limited(outcome, req, res, next)
        return
      }
    } catch (error) {
      next(error)
      return
    }
    const waitMs = outcome.decision.waitMs
    if (waitMs === 0) next()
    else holdResponse(res, waitMs).then((waited) => waited && next(), next)
  }

  /** Answers a denied request: sluice's JSON, or the user's `onLimited` (whose failure goes to `next`). */
  function limited(outcome: Denied, req: Request, res: Response, next: NextFunction): void {
    if (onLimited === undefined) {
      sendJson(res, outcome.status, outcome.body, outcome.contentType)
      return
    }
    res.statusCode = outcome.status
    const done = onLimited(req, res, outcome.decision)
    if (isPromise(done)) done.then(undefined, next)
  }

  return Object.assign(sluiceRateLimit, { limiter: limit.limiter })
}

/**
 * What sluice keeps for a request Express serves: the limiters that counted it, the decision behind
 * `req.rateLimit`, and the headers written. One WeakMap entry per request, not properties on it:
 * Express gives each request its app's prototype after Node has built it, and V8 then makes a new hidden
 * class for every property added to that request (about 2 us and a class's worth of garbage per request).
 */
interface RequestRecord {
  counted: CountedBy
  decision: Decision | undefined
  /** The rate-limit headers sluice has written on the response, for a later limit to add to. */
  headers: Readonly<Record<string, string>> | undefined
}

const records = new WeakMap<object, RequestRecord>()

/**
 * Puts the decision on `req.rateLimit` and answers the request's record. `req.rateLimit` is an accessor
 * on the prototype every app's request prototype inherits from (`express.request`), defined once,
 * reading the request's record; the decision is then seen from every app the request passes (a mounted
 * app swaps the prototype back and forth). A request without an app prototype (one made by hand), or
 * one whose `rateLimit` something else defines, gets an ordinary assignment.
 */
function keepDecision(req: Request, decision: Decision): RequestRecord {
  const own: object | null = Object.getPrototypeOf(req)
  let ours = own === null ? false : servedByAccessor.get(own)
  if (ours === undefined && own !== null) {
    ours = installAccessor(own)
    servedByAccessor.set(own, ours)
  }
  const record = recordOf(req)
  if (ours === true) record.decision = decision
  else req.rateLimit = decision
  return record
}

function recordOf(req: object): RequestRecord {
  let record = records.get(req)
  if (record === undefined) {
    record = { counted: undefined, decision: undefined, headers: undefined }
    records.set(req, record)
  }
  return record
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
      recordOf(this).decision = decision
    },
  })
  return true
}

function readDecision(this: object): Decision | undefined {
  return records.get(this)?.decision
}

/** For each request prototype seen, whether the accessor serves it. */
const servedByAccessor = new WeakMap<object, boolean>()

function sendJson(res: Response, status: number, body: ResponseBody, contentType: string): void {
  const json = JSON.stringify(body)
  res.statusCode = status
  res.setHeader('Content-Type', contentType)
  res.setHeader('Content-Length', Buffer.byteLength(json))
  res.end(json)
}
