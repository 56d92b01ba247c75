/**
 * @module A request limit: parsed options built into a limiter and a key, and the one act an adapter asks
 * of it per request, `limitRequest`, which answers an outcome the adapter only has to write out. The
 * request's record (record.ts) keeps what the limit counted, so a request passing a limit twice (app and
 * router, or two hooks) is counted once, and stacked limits' headers are rendered together.
 */
import { STATUS_CODES } from 'node:http'
import { httpChannel } from '../channels.ts'
import { InvalidOptionError } from '../errors.ts'
import { hold } from '../limiter/hold.ts'
import { createLimiter, type Limiter } from '../limiter/limiter.ts'
import { isPromise } from '../options.ts'
import type { Decision } from '../types.ts'
import { endSignal, type HttpAdapter } from './adapter.ts'
import { DEFAULT_HEADERS, NO_HEADERS, retryAfterSeconds } from './headers.ts'
import { HeldRequests } from './held.ts'
import { compileKey, type KeyResult } from './keys/keys.ts'
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
      /** The key and cost the request was counted under, for `RequestLimit.hold`. */
      readonly key: string
      readonly cost: number | undefined
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
  /**
   * Holds an admitted request for its `decision.waitMs` (a leaky-bucket queue). Resolves `true` when the
   * request may go on, `false` when its client went away first (the adapter's end signal said so: Node's
   * `close`, a Fetch request's `signal`): the request stops there, and its slot is given back if nobody
   * queued behind it.
   */
  hold(req: Req, res: Res, outcome: Extract<HttpOutcome, { action: 'allow' }>): Promise<boolean>
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
  parsed: ParsedHttpOptions<Req, Res>,
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
  const bodyOf = bodyResolver<Req>(parsed.message)
  const limiter = parsed.limiter ?? limiterFrom(parsed)
  const owner = options.owner
  const prefix = limiter.prefix
  // A denial by the rules of a limiter that blocks began a block: it is answered as a blocked request.
  const blocks = limiter.block !== undefined
  const blockedStatus = parsed.blockedStatusCode ?? 429
  const countWhen = parsed.countWhen as ((request: Req, response: Res) => boolean) | undefined
  if (countWhen !== undefined && typeof limiter.refund !== 'function') {
    throw new InvalidOptionError(
      `${where}.countWhen`,
      countWhen,
      'a limiter that can refund (built by createLimiter)',
    )
  }
  const guard = parsed.overload
  const critical = guard?.critical
  const shedDecision = guard === undefined ? undefined : shed(guard.bucketMs)
  const held = new HeldRequests(parsed.queuePerClient ?? DEFAULT_QUEUE_PER_CLIENT)
  const onEnd = endSignal(adapter)
  /** Warnings already emitted for this limit, so a broken callback cannot flood the process's output. */
  const warned = new Set<string>()

  function recordOf(req: Req): RequestRecord {
    let record = adapter.recordOf(req)
    if (record === undefined) {
      record = new RequestRecord()
      adapter.keepRecord(req, record)
    }
    return record
  }

  function count(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome> {
    const record = recordOf(req)
    if ((owner !== undefined && !record.claim(owner)) || !record.claim(limiter)) return PASS
    const key = keyOf(req)
    // A key or cost function that answers by promise waits for it; a synchronous one stays in the tick.
    if (key instanceof Promise) return key.then((k) => counted(req, res, record, k))
    return counted(req, res, record, key)
  }

  function counted(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: KeyResult,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (!key.ok) {
      if (key.policy === 'skip') return PASS
      if (httpChannel.hasSubscribers) publish(req, '', undefined, 'reject')
      return { action: 'reject', status: 400, body: missingKeyBody(key.detail), contentType: PROBLEM_JSON }
    }
    const cost = costOf(req)
    if (typeof cost === 'object') return cost.then((c) => consumed(req, res, record, key.key, c))
    return consumed(req, res, record, key.key, cost)
  }

  function consumed(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: string,
    cost: number | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const decision = limiter.consumeNow(key, { cost, context: req })
    if (decision instanceof Promise) {
      return decision.then((d) => outcomeOf(req, res, record, key, cost, d))
    }
    return outcomeOf(req, res, record, key, cost, decision)
  }

  /**
   * Enters the request into the overload guard, once per guard however many limits share it: undefined when
   * it is admitted (it leaves the guard when its response ends), else the outcome of a shed request. A shed
   * request counts against no client: no key is built and no rule is asked.
   */
  function enter(req: Req, res: Res): HttpOutcome | undefined {
    const record = recordOf(req)
    if (!record.claim(guard!)) return undefined
    const ticket = guard!.enter(critical === undefined ? undefined : { critical: critical(req) === true })
    if (ticket.admitted) {
      limitOnEnd(req, res, ticket.done)
      return undefined
    }
    if (!shadow) return deny(req, record, '', shedDecision!, guard!.status)
    if (httpChannel.hasSubscribers) publish(req, '', shedDecision, 'shadow')
    return PASS
  }

  function outcomeOf(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: string,
    cost: number | undefined,
    decision: Decision,
  ): HttpOutcome {
    // A concurrency lease is held while the request runs: it ends with the response, or when the client leaves.
    if (decision.lease !== undefined) limitOnEnd(req, res, () => release(req, key, decision))
    if (shadow) {
      if (countWhen !== undefined && decision.allowed) whenEnded(req, res, key, cost, decision)
      record.counted({ decision, headers: headerOptions })
      // Counted as usual; never denied or held.
      if (httpChannel.hasSubscribers) {
        publish(req, key, decision, decision.allowed && decision.waitMs === 0 ? 'allow' : 'shadow')
      }
      return PASS
    }
    if (decision.allowed) {
      if (decision.waitMs > 0) {
        if (!held.take(key, view.ip(req), req)) {
          // One client holds too many places in this key's queue: this one is refused now, its slot given back.
          giveBack(req, key, cost, decision)
          return deny(req, record, key, queueFull(decision), status)
        }
      }
      if (countWhen !== undefined) whenEnded(req, res, key, cost, decision)
      const headers = record.counted({ decision, headers: headerOptions })
      if (httpChannel.hasSubscribers) publish(req, key, decision, decision.waitMs > 0 ? 'queue' : 'allow')
      return { action: 'allow', decision, headers, key, cost }
    }
    const blocked = decision.reason === 'blocked' || (blocks && decision.reason === 'rules')
    return deny(req, record, key, decision, blocked ? blockedStatus : status)
  }

  function deny(req: Req, record: RequestRecord, key: string, decision: Decision, code: number): HttpOutcome {
    const headers = record.counted({ decision, headers: headerOptions })
    if (httpChannel.hasSubscribers) publish(req, key, decision, 'deny')
    const { body, contentType } = bodyOf(req, decision, code)
    return { action: 'deny', decision, status: code, headers, body, contentType }
  }

  /** Asks `countWhen` when the response has been sent, and refunds when it says false. */
  function whenEnded(req: Req, res: Res, key: string, cost: number | undefined, decision: Decision): void {
    if (!counts(decision)) return
    limitOnEnd(req, res, (finished) => {
      if (finished && !asked(req, res)) refund(key, cost, req, decision)
    })
  }

  function limitOnEnd(req: Req, res: Res, callback: EndCallback): void {
    const record = recordOf(req)
    if (record.onEnd(callback)) onEnd(res, (finished) => record.end(finished))
  }

  /** `countWhen`'s answer: only `false` refunds; a throw or a promise counts the request, with a warning. */
  function asked(req: Req, res: Res): boolean {
    let answer: unknown
    try {
      answer = countWhen!(req, res)
    } catch (error) {
      warnOnce('throw', `countWhen threw (the request stays counted): ${String(error)}`)
      return true
    }
    if (isPromise(answer)) {
      // Nobody waits for it: it may still reject, and that must not be an unhandled rejection.
      Promise.resolve(answer).catch(() => {})
      warnOnce(
        'promise',
        'countWhen returned a promise; it must answer synchronously (the request stays counted)',
      )
      return true
    }
    return answer !== false
  }

  /** Gives back the request's own units: the decision names its call, so a late refund takes no newer one's. */
  function refund(key: string, cost: number | undefined, req: Req, decision: Decision): void {
    limiter.refund(key, { decision, cost, context: req }).catch((error: unknown) => {
      warnOnce('refund', `a refund (countWhen) failed, so the request stays counted: ${String(error)}`)
    })
  }

  function release(req: Req, key: string, decision: Decision): void {
    limiter.release(key, decision, { context: req }).catch((error: unknown) => {
      warnOnce(
        'release',
        `releasing a concurrency lease failed (it ends by itself after leaseMs): ${String(error)}`,
      )
    })
  }

  function giveBack(req: Req, key: string, cost: number | undefined, decision: Decision): void {
    limiter.unqueue(key, decision, { cost, context: req }).catch((error: unknown) => {
      warnOnce('unqueue', `giving a queued slot back failed: ${String(error)}`)
    })
  }

  function warnOnce(what: string, message: string): void {
    if (warned.has(what)) return
    warned.add(what)
    process.emitWarning(
      `sluice (${prefix}): ${message}. Further such failures of this limit are not reported.`,
      'SluiceWarning',
    )
  }

  function publish(req: Req, key: string, decision: Decision | undefined, action: string): void {
    const route = view.routeTemplate?.(req)
    httpChannel.publish({ limiter: prefix, key, request: req, decision, action, route })
  }

  /** Decides a request under the limit's rules (skip, key, cost, the limiter). */
  function decide(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome> {
    try {
      if (skip === undefined) return count(req, res)
      const skipped = skip(req)
      if (!isPromise(skipped)) return skipped ? PASS : count(req, res)
      // A native promise, whatever thenable `skip` answered with.
      return Promise.resolve(skipped).then((s) => (s ? PASS : count(req, res)))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** The overload guard first; a request it admits is then decided as usual. */
  function guarded(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome> {
    try {
      const shedding = enter(req, res)
      if (shedding !== undefined) return shedding
    } catch (error) {
      return Promise.reject(error)
    }
    return decide(req, res)
  }

  return {
    limiter,
    // Without a guard, a request runs exactly the code it ran before the option existed.
    limitRequest: guard === undefined ? decide : guarded,
    onResponseEnd: limitOnEnd,
    hold(req, res, outcome) {
      const { decision, key, cost } = outcome
      // The wait is called off when the response ends before it is over: only a client leaving does that.
      const left = new AbortController()
      limitOnEnd(req, res, () => left.abort())
      return hold(decision.waitMs, left.signal).then((waited) => {
        held.release(req)
        if (!waited) giveBack(req, key, cost, decision)
        return waited
      })
    },
  }
}

/** How many of one client's requests one key's queue holds at once, unless `queuePerClient` says. */
export const DEFAULT_QUEUE_PER_CLIENT = 16

/** Whether an admitted decision counted units a refund can give back (not a store-error or unlimited pass). */
function counts(decision: Decision): boolean {
  return decision.reason === 'rules' || decision.reason === 'prefetch'
}

/** The decision of a request an overload guard shed: no rule decided, come back in one bucket. */
function shed(bucketMs: number): Decision {
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
function queueFull(decision: Decision): Decision {
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
function missingKeyBody(detail: string): ResponseBody {
  return { type: 'about:blank', title: 'Bad Request', status: 400, detail }
}

function limiterFrom<R, S>(parsed: ParsedHttpOptions<R, S>): Limiter<R> {
  if (parsed.rules === undefined) {
    throw new InvalidOptionError(`${parsed.where}.rules`, undefined, 'rules, or a limiter')
  }
  return createLimiter<R>({
    rules: parsed.rules,
    store: parsed.store,
    prefix: parsed.prefix,
    onStoreError: parsed.onStoreError,
    block: parsed.block,
  })
}

/** A request's cost: a number at once, or a native promise of one when the function answered by promise. */
function costResolver<R>(
  cost: number | ((request: R) => number | Promise<number>) | undefined,
): (request: R) => number | undefined | Promise<number> {
  if (cost === undefined) return () => undefined
  if (typeof cost === 'function') {
    return (request) => {
      const answer = cost(request)
      return typeof answer === 'number' || !isPromise(answer) ? answer : Promise.resolve(answer)
    }
  }
  return () => cost
}

interface DeniedBody {
  body: ResponseBody
  contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
}

/** Builds the denied body: sluice's problem details (around the user's text, if any), or the user's own object. */
function bodyResolver<R>(
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
