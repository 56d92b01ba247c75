/**
 * @module SluiceGuard: the per-request act. It looks up the route's limit (built at init, route-limits.ts),
 * asks core's HTTP kit for an outcome, and writes it out through the platform: headers and `true`, a hold
 * (a leaky-bucket queue, inside the guard), or a thrown `RateLimitedException` (or a 400 for a missing key
 * part) that the app's exception filters see. A guard cannot stop a request without an answer but by
 * never settling: it does so only when the response is already gone (its client left while it was held)
 * or already sent (by `onLimited`).
 */

import {
  BadRequestException,
  type CanActivate,
  type ExecutionContext,
  Inject,
  Injectable,
} from '@nestjs/common'
import type { Decision } from '@sluice/core'
import type { HttpOutcome } from '@sluice/core/http'
import { isPromise } from '@sluice/core/options'
import { RateLimitedException } from './exception.ts'
import type { PlatformRequest, PlatformResponse } from './options.ts'
import { type Platform, showDecision } from './platform.ts'
import { type RouteLimit, SluiceLimits } from './route-limits.ts'

/**
 * Limits the routes it guards. `SluiceModule.forRoot` registers it globally; with `global: false`, put
 * it where you want it: `@UseGuards(SluiceGuard)` on a controller or a handler.
 */
@Injectable()
export class SluiceGuard implements CanActivate {
  readonly #limits: SluiceLimits

  constructor(@Inject(SluiceLimits) limits: SluiceLimits) {
    this.#limits = limits
  }

  /**
   * Not an async function: on a memory store the outcome is there at once, and the route goes on in the
   * same tick.
   */
  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const limits = this.#limits
    let req: PlatformRequest
    let res: PlatformResponse
    if (context.getType() === 'http') {
      const http = context.switchToHttp()
      req = http.getRequest()
      res = http.getResponse()
    } else {
      const found = limits.getRequestResponse?.(context)
      if (found === undefined) return true
      req = found.req
      res = found.res
    }
    const route = limits.limitOf(context.getClass(), context.getHandler())
    if (route === null) return true
    const platform = limits.platform
    const outcome = route.limit.consume(req, res)
    if (outcome instanceof Promise) return outcome.then((o) => respond(platform, route, o, req, res))
    return respond(platform, route, outcome, req, res)
  }
}

/** Never settles: the request stops here, its response already sent or its client gone. */
function stopped(): Promise<boolean> {
  return new Promise<boolean>(() => {})
}

function respond(
  platform: Platform,
  route: RouteLimit,
  outcome: HttpOutcome,
  req: PlatformRequest,
  res: PlatformResponse,
): boolean | Promise<boolean> {
  if (outcome.action === 'pass') {
    // A shadowed limit counted the request without a word: its decision is still shown.
    const record = platform.recordOf(req)
    if (record?.decision !== undefined) showDecision(req, record)
    return true
  }
  if (outcome.action === 'reject') {
    platform.setHeader(res, 'content-type', outcome.contentType)
    throw new BadRequestException(outcome.body)
  }
  const { decision, headers } = outcome
  for (const name in headers) platform.setHeader(res, name, headers[name]!)
  showDecision(req, platform.recordOf(req))
  if (outcome.action === 'allow') {
    if (decision.waitMs === 0) return true
    return route.limit.hold(req, res, outcome).then((waited) => waited || stopped())
  }
  platform.setStatus(res, outcome.status)
  platform.setHeader(res, 'content-type', outcome.contentType)
  const denied = new RateLimitedException(decision, outcome.status, outcome.body, {
    ...headers,
    'content-type': outcome.contentType,
  })
  const onLimited = route.onLimited
  if (onLimited === undefined) throw denied
  return limited(platform, onLimited, denied, req, res, decision)
}

/** Asks `onLimited`; throws the denial unless it answered. */
function limited(
  platform: Platform,
  onLimited: NonNullable<RouteLimit['onLimited']>,
  denied: RateLimitedException,
  req: PlatformRequest,
  res: PlatformResponse,
  decision: Decision,
): boolean | Promise<boolean> {
  const answered = (): Promise<boolean> => {
    if (platform.answered(res)) return stopped()
    throw denied
  }
  const done = onLimited(req, res, decision)
  if (isPromise(done)) return Promise.resolve(done).then(answered)
  return answered()
}
