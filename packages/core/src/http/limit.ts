/**
 * @module A request limit: parsed options built into a limiter and a key, and the one act an adapter asks
 * of it per request, `limitRequest`, which answers an outcome the adapter only has to write out. The
 * request's record (record.ts) keeps what the limit counted, so a request passing a limit twice (app and
 * router, or two hooks) is counted once, and stacked limits' headers are rendered together.
 */
import { STATUS_CODES } from 'node:http'
import { httpChannel } from '../channels.ts'
import { InvalidOptionError } from '../errors.ts'
import { DEFAULT_HEADERS, NO_HEADERS, retryAfterSeconds } from '../headers.ts'
import { compileKey } from '../keys/keys.ts'
import { createLimiter, type Limiter } from '../limiter.ts'
import { isPromise } from '../options.ts'
import type { Decision } from '../types.ts'
import { type HttpAdapter, whenResponseEnds } from './adapter.ts'
import type { ParsedHttpOptions, ResponseBody } from './options.ts'
import { type EndCallback, RequestRecord } from './record.ts'

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

export interface RequestLimit<Req, Res> {
  readonly limiter: Limiter<Req>
  /**
   * Decides a request: the outcome itself when the store answered synchronously (a memory store), so the
   * adapter can go on in the same tick, else a promise of it. Never throws: it rejects when the store
   * fails under `onStoreError: 'throw'`, on a cost no rule can admit, and when a user function (key,
   * cost, skip, rules, message) throws; adapters pass that on to their framework's error path.
   */
  limitRequest(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome>
  /** Runs `callback` once when the response to `req` ends (see `RequestRecord.onEnd`). */
  onResponseEnd(req: Req, res: Res, callback: EndCallback): void
}

export interface BuildOptions {
  /**
   * A token shared by several limits (all of one Fastify registration's) so that only the first of them
   * to see a request counts it. Whatever the owner, one limiter counts a request once however many limits
   * built on it the request passes.
   */
  readonly owner?: object
}

const PASS: HttpOutcome = Object.freeze({ action: 'pass' })

/**
 * Builds a limit from parsed options: the limiter (from `limiter`, or from `rules` and the options beside
 * it, claiming its prefix on the store), the key, cost, body and headers. Throws `InvalidOptionError` when
 * neither `rules` nor `limiter` was given.
 */
export function buildRequestLimit<Req, Res>(
  parsed: ParsedHttpOptions<Req>,
  adapter: HttpAdapter<Req, Res>,
  options: BuildOptions = {},
): RequestLimit<Req, Res> {
  const { where, view } = { where: parsed.where, view: adapter.view }
  const keyOf = compileKey<Req>(
    parsed.key ?? 'ip',
    view,
    { ipv6Subnet: parsed.ipv6Subnet, onMissingKey: parsed.onMissingKey },
    where,
  )
  const costOf = costResolver(parsed.cost)
  const skip = parsed.skip
  const shadow = parsed.shadow === true
  // A shadowed limit sends no headers: it does not advertise a policy it does not enforce.
  const headerOptions = shadow ? NO_HEADERS : (parsed.headers ?? DEFAULT_HEADERS)
  const status = parsed.statusCode ?? 429
  const bodyOf = bodyResolver<Req>(parsed.message, status)
  const limiter = parsed.limiter ?? limiterFrom(parsed)
  const owner = options.owner
  const prefix = limiter.prefix

  function recordOf(req: Req): RequestRecord {
    let record = adapter.recordOf(req)
    if (record === undefined) {
      record = new RequestRecord()
      adapter.keepRecord(req, record)
    }
    return record
  }

  function count(req: Req): HttpOutcome | Promise<HttpOutcome> {
    const record = recordOf(req)
    if ((owner !== undefined && !record.claim(owner)) || !record.claim(limiter)) return PASS
    const key = keyOf(req)
    if (!key.ok) {
      if (key.policy === 'skip') return PASS
      if (httpChannel.hasSubscribers) publish(req, '', undefined, 'reject')
      return { action: 'reject', status: 400, body: missingKeyBody(key.missing), contentType: PROBLEM_JSON }
    }
    const decision = limiter.consumeNow(key.key, { cost: costOf(req), context: req })
    if (decision instanceof Promise) return decision.then((d) => outcomeOf(req, record, key.key, d))
    return outcomeOf(req, record, key.key, decision)
  }

  function outcomeOf(req: Req, record: RequestRecord, key: string, decision: Decision): HttpOutcome {
    const headers = record.counted({ decision, headers: headerOptions })
    if (shadow) {
      // Counted as usual; never denied or held.
      if (httpChannel.hasSubscribers) {
        publish(req, key, decision, decision.allowed && decision.waitMs === 0 ? 'allow' : 'shadow')
      }
      return PASS
    }
    if (decision.allowed) {
      if (httpChannel.hasSubscribers) publish(req, key, decision, decision.waitMs > 0 ? 'queue' : 'allow')
      return { action: 'allow', decision, headers }
    }
    if (httpChannel.hasSubscribers) publish(req, key, decision, 'deny')
    const { body, contentType } = bodyOf(req, decision)
    return { action: 'deny', decision, status, headers, body, contentType }
  }

  function publish(req: Req, key: string, decision: Decision | undefined, action: string): void {
    const route = view.routeTemplate?.(req)
    httpChannel.publish({ limiter: prefix, key, request: req, decision, action, route })
  }

  return {
    limiter,
    limitRequest(req) {
      try {
        if (skip === undefined) return count(req)
        const skipped = skip(req)
        if (!isPromise(skipped)) return skipped ? PASS : count(req)
        // A native promise, whatever thenable `skip` answered with.
        return Promise.resolve(skipped).then((s) => (s ? PASS : count(req)))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    onResponseEnd(req, res, callback) {
      const record = recordOf(req)
      if (record.onEnd(callback))
        whenResponseEnds(adapter.responseOf(res), (finished) => record.end(finished))
    },
  }
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

/** One sentence on a denial: the rule and the wait (or the store, when it failed). */
export function limitedDetail(decision: Decision): string {
  const seconds = retryAfterSeconds(decision)
  if (decision.reason === 'store-error') return `The rate-limit store is unavailable; retry in ${seconds} s.`
  return `Rate limit ${decision.rule} exceeded; retry in ${seconds} s.`
}

function missingKeyBody(missing: string): ResponseBody {
  return {
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: `This request needs ${missing} to be rate limited.`,
  }
}

function limiterFrom<R>(parsed: ParsedHttpOptions<R>): Limiter<R> {
  if (parsed.rules === undefined) {
    throw new InvalidOptionError(`${parsed.where}.rules`, undefined, 'rules, or a limiter')
  }
  return createLimiter<R>({
    rules: parsed.rules,
    store: parsed.store,
    prefix: parsed.prefix,
    onStoreError: parsed.onStoreError,
  })
}

function costResolver<R>(
  cost: number | ((request: R) => number) | undefined,
): (request: R) => number | undefined {
  if (cost === undefined) return () => undefined
  if (typeof cost === 'function') return cost
  return () => cost
}

interface DeniedBody {
  body: ResponseBody
  contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
}

/** Builds the denied body: sluice's problem details (around the user's text, if any), or the user's own object. */
function bodyResolver<R>(
  message: ParsedHttpOptions<R>['message'],
  status: number,
): (request: R, decision: Decision) => DeniedBody {
  const problem = (decision: Decision, detail?: string): DeniedBody => ({
    body: limitedBody(decision, status, detail),
    contentType: PROBLEM_JSON,
  })
  const own = (body: ResponseBody): DeniedBody => ({ body, contentType: JSON_TYPE })
  if (message === undefined) return (_request, decision) => problem(decision)
  if (typeof message === 'string') return (_request, decision) => problem(decision, message)
  if (typeof message === 'function') {
    return (request, decision) => {
      const built = message(request, decision)
      return typeof built === 'string' ? problem(decision, built) : own(built)
    }
  }
  return () => own(message)
}
