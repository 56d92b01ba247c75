/**
 * @module What an adapter does with one request (`HttpOutcome`), and the bodies it writes: sluice's problem
 * details for a 429 (RFC 9457), the user's `message`, the 400 of a missing key part.
 */
import { STATUS_CODES } from 'node:http'
import type { RuleCosts } from '../limiter/limiter.ts'
import type { Decision } from '../types.ts'
import { retryAfterSeconds } from './headers.ts'
import type { ParsedHttpOptions, ResponseBody } from './options.ts'

export const PROBLEM_JSON = 'application/problem+json'
export const JSON_TYPE = 'application/json'

/** What an adapter does with one request. */
export type HttpOutcome =
  /**
   * Go on, nothing to write here: skipped, a missing key under `'skip'`, already counted by this limit, or
   * counted by a shadowed limit.
   */
  | { readonly action: 'pass' }
  /** A key part is missing and the policy is `'reject'`: answer 400 with this problem. */
  | {
      readonly action: 'reject'
      readonly status: 400
      readonly body: ResponseBody
      readonly contentType: typeof PROBLEM_JSON
    }
  /**
   * Admitted: write `headers` (every sluice limit's that counted the request), hold the request
   * `decision.waitMs` when it is above 0, then go on.
   */
  | {
      readonly action: 'allow'
      readonly decision: Decision
      readonly headers: Readonly<Record<string, string>>
      /** The key and cost the request was counted under, for `RequestLimit.hold`. */
      readonly key: string
      readonly cost: number | RuleCosts | undefined
    }
  /** Denied: answer `status` with `headers` and `body`. */
  | {
      readonly action: 'deny'
      readonly decision: Decision
      readonly status: number
      readonly headers: Readonly<Record<string, string>>
      readonly body: ResponseBody
      /** `application/problem+json` for sluice's problem details, `application/json` for a body the user built. */
      readonly contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
    }

/** The outcome of a request this limit lets by without counting it. */
export const PASS: HttpOutcome = Object.freeze({ action: 'pass' })

/** The decision of a request an overload guard shed: no rule decided, come back in one bucket. */
export function shed(bucketMs: number): Decision {
  return Object.freeze({
    allowed: false,
    limit: 0,
    remaining: 0,
    resetMs: bucketMs,
    retryAfterMs: bucketMs,
    waitMs: 0,
    rule: '',
    rules: [],
    reason: 'overload',
  })
}

/** The answer to a queued request refused because its client holds too many places: come back when this one's slot comes. */
export function queueFull(decision: Decision): Decision {
  return { ...decision, allowed: false, retryAfterMs: decision.waitMs, waitMs: 0 }
}

/** The body of a 429 when the user gave no `message`: problem details naming the rule and the wait. */
export function limitedBody(decision: Decision, status = 429, detail?: string): ResponseBody {
  return {
    type: 'about:blank',
    // With type about:blank, the title is the status's own reason phrase (RFC 9457).
    title: STATUS_CODES[status] ?? 'Too Many Requests',
    status,
    detail: detail ?? limitedDetail(decision),
    retryAfter: retryAfterSeconds(decision),
  }
}

/** One sentence on a denial: the rule and the wait (or the store, when it failed; or the block). */
export function limitedDetail(decision: Decision): string {
  const seconds = retryAfterSeconds(decision)
  if (decision.reason === 'overload') return `The server is overloaded; retry in ${seconds} s.`
  if (decision.reason === 'store-error') return `The rate-limit store is unavailable; retry in ${seconds} s.`
  if (decision.reason === 'blocked')
    return `Blocked after exceeding rate limit ${decision.rule}; retry in ${seconds} s.`
  return `Rate limit ${decision.rule} exceeded; retry in ${seconds} s.`
}

/** The 400 for a missing key part: the detail says what a client can do about it (keys.ts words it). */
export function missingKeyBody(detail: string): ResponseBody {
  return { type: 'about:blank', title: 'Bad Request', status: 400, detail }
}

export interface DeniedBody {
  body: ResponseBody
  contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
}

/** Builds the denied body: sluice's problem details (around the user's text, if any), or the user's own object. */
export function bodyResolver<R>(
  message: ParsedHttpOptions<R>['message'],
): (request: R, decision: Decision, status: number) => DeniedBody {
  const problem = (decision: Decision, status: number, detail?: string): DeniedBody => ({
    body: limitedBody(decision, status, detail),
    contentType: PROBLEM_JSON,
  })
  const own = (body: ResponseBody): DeniedBody => ({ body, contentType: JSON_TYPE })
  if (message === undefined) return (_request, decision, status) => problem(decision, status)
  if (typeof message === 'string') return (_request, decision, status) => problem(decision, status, message)
  if (typeof message === 'function') {
    return (request, decision, status) => {
      const built = message(request, decision)
      return typeof built === 'string' ? problem(decision, status, built) : own(built)
    }
  }
  return () => own(message)
}
