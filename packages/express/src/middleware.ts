/**
 * @module rateLimit: the Express middleware. It reads an Express request through a `RequestView`,
 * asks core's HTTP kit for an outcome, writes the headers and calls `next()`, or answers 400/429.
 * Everything a limit decides lives in `@sluice/core`; this file only translates for Express 4 and 5.
 */
import {
  type Decision,
  HTTP_OPTION_NAMES,
  type HttpLimitOptions,
  holdResponse,
  InvalidOptionError,
  knownOptions,
  type Limiter,
  type RequestView,
  type ResponseBody,
  resolveHttpLimit,
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

  async function sluiceRateLimit(req: Request, res: Response, next: NextFunction): Promise<void> {
    try {
      const outcome = await limit.check(req)
      if (outcome.action === 'pass') return next()
      if (outcome.action === 'reject') return sendJson(res, outcome.status, outcome.body, outcome.contentType)
      req.rateLimit = outcome.decision
      const headers = outcome.headers
      for (const name in headers) res.setHeader(name, headers[name]!)
      if (outcome.action === 'allow') {
        const waitMs = outcome.decision.waitMs
        if (waitMs > 0 && !(await holdResponse(res, waitMs))) return
        return next()
      }
      if (onLimited === undefined) return sendJson(res, outcome.status, outcome.body, outcome.contentType)
      res.statusCode = outcome.status
      await onLimited(req, res, outcome.decision)
    } catch (error) {
      // Express catches what later handlers throw, so an error here is sluice's or a user callback's.
      next(error)
    }
  }

  return Object.assign(sluiceRateLimit, { limiter: limit.limiter })
}

function sendJson(res: Response, status: number, body: ResponseBody, contentType: string): void {
  const json = JSON.stringify(body)
  res.statusCode = status
  res.setHeader('Content-Type', contentType)
  res.setHeader('Content-Length', Buffer.byteLength(json))
  res.end(json)
}
