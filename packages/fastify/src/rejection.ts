/**
 * @module What sluice hands to Fastify's error path when it turns a request away: a denial (429, or the
 * `statusCode` option) or a key part that is missing (400).
 *
 * It is deliberately not an `Error`. Fastify gives it to your `setErrorHandler` first, as it does every
 * error of the lifecycle (check `error.statusCode === 429` or `error.code`); without one, Fastify's default
 * handler sets its `statusCode` and `headers` and sends it as a plain payload, so the body is exactly
 * `toJSON()`: the problem-details object. An `Error` would be rendered as Fastify's own
 * `{ statusCode, code, error, message }` instead. This is how @fastify/rate-limit answers too.
 */
import { type Decision, ErrorCode } from '@sluice/core'
import { limitedDetail, type ResponseBody } from '@sluice/core/http'

export class RateLimitRejection {
  /** `'RateLimitRejection'`, as on an error, for logs. */
  readonly name = 'RateLimitRejection'
  /**
   * `ERR_SLUICE_RATE_LIMITED` for a denial; `ERR_SLUICE_OVERLOADED` for a request the `overload` guard shed;
   * `ERR_SLUICE_INVALID_KEY` when a key part is missing.
   */
  readonly code: ErrorCode
  /** The response status: the limit's `statusCode` (default 429), or 400 for a missing key part. */
  readonly statusCode: number
  /** One line for logs, e.g. `Rate limit 100-per-60s exceeded; retry in 12 s.` */
  readonly message: string
  /** The decision that denied the request; undefined for a missing key part. */
  readonly decision: Decision | undefined
  /**
   * The response's headers: the rate-limit headers (already set on the reply, so they survive a custom
   * error handler) and the body's `content-type` (`application/problem+json` for sluice's bodies).
   */
  readonly headers: Readonly<Record<string, string>>
  /** The response body: problem details (RFC 9457) unless `message` gave an object of your own. */
  readonly body: ResponseBody

  constructor(
    code: ErrorCode,
    statusCode: number,
    message: string,
    decision: Decision | undefined,
    headers: Readonly<Record<string, string>>,
    body: ResponseBody,
  ) {
    this.code = code
    this.statusCode = statusCode
    this.message = message
    this.decision = decision
    this.headers = headers
    this.body = body
  }

  /** The body: what Fastify serializes when this is sent as a payload. */
  toJSON(): ResponseBody {
    return this.body
  }
}

/** The rejection for a denied request. */
export function denial(
  decision: Decision,
  statusCode: number,
  headers: Record<string, string>,
  body: ResponseBody,
  contentType: string,
): RateLimitRejection {
  return new RateLimitRejection(
    decision.reason === 'overload' ? ErrorCode.OVERLOADED : ErrorCode.RATE_LIMITED,
    statusCode,
    limitedDetail(decision),
    decision,
    { ...headers, 'content-type': contentType },
    body,
  )
}

/** The rejection for a request whose key could not be built (a part missing, policy `'reject'`). */
export function missingKey(body: ResponseBody, contentType: string): RateLimitRejection {
  const detail = typeof body.detail === 'string' ? body.detail : 'A rate-limit key part is missing.'
  return new RateLimitRejection(
    ErrorCode.INVALID_KEY,
    400,
    detail,
    undefined,
    { 'content-type': contentType },
    body,
  )
}
