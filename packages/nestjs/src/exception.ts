/**
 * @module RateLimitedException: what the guard throws for a denied request, so the app's exception filters
 * see it as they see every other refusal. Nest's own filter answers with its status and its body (the
 * problem details); the rate-limit headers and `content-type: application/problem+json` are already on the
 * response when it is thrown.
 */

import { HttpException } from '@nestjs/common'
import { type Decision, ErrorCode } from '@sluice/core'
import { limitedDetail, type ResponseBody } from '@sluice/core/http'

export class RateLimitedException extends HttpException {
  /** `ERR_SLUICE_RATE_LIMITED`, for logs and filters. */
  readonly code = ErrorCode.RATE_LIMITED
  /** The decision that denied the request. */
  readonly decision: Decision
  /**
   * The rate-limit headers set on the response, and its `content-type`. A filter that answers with a
   * body of its own keeps them, or sets its own content type.
   */
  readonly headers: Readonly<Record<string, string>>

  constructor(
    decision: Decision,
    status: number,
    body: ResponseBody,
    headers: Readonly<Record<string, string>>,
  ) {
    super(body, status)
    this.decision = decision
    this.headers = headers
    // One line for logs, e.g. "Rate limit 100-per-60s exceeded; retry in 12 s."
    this.message = limitedDetail(decision)
  }
}
