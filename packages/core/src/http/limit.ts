/**
 * @module A request limit: parsed options built into a limiter and a key, and the one act an adapter asks
 * of it per request, `consume`, which answers an outcome (outcome.ts) the adapter only has to write
 * out. The way down reads in order: the overload guard (`enter`), `skip`, the request's record (counted
 * once per limit), the key, the cost, the limiter, then the outcome. A request the guard would shed but
 * marks critical goes down the same way, and takes the guard's critical headroom only once its client's
 * own limits admitted it: a client over its limit is answered 429 and never takes the headroom. What
 * runs when the response ends lives in end-phase.ts; the request's record (record.ts) keeps what the limit
 * counted, so a request passing a limit twice (app and router, or two hooks) is counted once, and stacked
 * limits' headers are rendered together.
 *
 * Over 300 lines: the way down is one class read in order, from the guard to the outcome; split, one
 * request's path would be spread over several files.
 */
import { httpChannel } from '../channels.ts'
import { InvalidOptionError } from '../errors.ts'
import { hold } from '../limiter/hold.ts'
import { createLimiter, type Limiter } from '../limiter/limiter.ts'
import { isPromise } from '../options.ts'
import type { Overload } from '../overload.ts'
import type { Decision } from '../types.ts'
import type { HttpAdapter, RequestView } from './adapter.ts'
import { type Cost, EndPhase, reserved, type SettledCosts } from './end-phase.ts'
import { DEFAULT_HEADERS, NO_HEADERS, type ResolvedHeaderOptions } from './headers.ts'
import { HeldRequests } from './held.ts'
import { compileKey, type KeyResult } from './keys/keys.ts'
import type { ParsedHttpOptions } from './options.ts'
import {
  bodyResolver,
  type DeniedBody,
  type HttpOutcome,
  missingKeyBody,
  PASS,
  PROBLEM_JSON,
  queueFull,
  shed,
} from './outcome.ts'
import type { CountedLimit, EndCallback, RequestRecord } from './record.ts'

export { type HttpOutcome, JSON_TYPE, limitedBody, limitedDetail, PROBLEM_JSON } from './outcome.ts'

export interface RequestLimit<Req, Res> {
  readonly limiter: Limiter<Req>
  /**
   * Decides a request: the outcome itself when the store answered synchronously (a memory store), so the
   * adapter can go on in the same tick, else a promise of it. Never throws: it rejects when the store
   * fails under `onStoreError: 'throw'`, on a cost no rule can admit, and when a user function (key,
   * cost, skip, rules, message) throws; adapters pass that on to their framework's error path.
   */
  consume(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome>
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

/** How many of one client's requests one key's queue holds at once, unless `queuePerClient` says. */
export const DEFAULT_QUEUE_PER_CLIENT = 16

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
  return new HttpLimit(parsed, adapter, options.owner)
}

type AllowOutcome = Extract<HttpOutcome, { action: 'allow' }>

/** What `#enter` answers for a request the guard would shed but marks critical: ask its limits first. */
const CRITICAL = Symbol('critical')

/** One request limit: the options it was built from, resolved once, and the way down per request. */
class HttpLimit<Req, Res> implements RequestLimit<Req, Res> {
  readonly limiter: Limiter<Req>
  readonly #view: RequestView<Req>
  readonly #keyOf: (req: Req) => KeyResult | Promise<KeyResult>
  readonly #costOf: (req: Req) => Cost | Promise<Cost>
  readonly #skip: ((req: Req) => boolean | Promise<boolean>) | undefined
  readonly #shadow: boolean
  readonly #headers: ResolvedHeaderOptions
  readonly #status: number
  readonly #blockedStatus: number
  /** A denial by the rules of a limiter that blocks began a block: it is answered as a blocked request. */
  readonly #blocks: boolean
  readonly #bodyOf: (req: Req, decision: Decision, status: number) => DeniedBody
  readonly #owner: object | undefined
  readonly #guard: Overload<Req> | undefined
  readonly #shedDecision: Decision | undefined
  readonly #held: HeldRequests
  readonly #end: EndPhase<Req, Res>

  constructor(
    parsed: ParsedHttpOptions<Req, Res>,
    adapter: HttpAdapter<Req, Res>,
    owner: object | undefined,
  ) {
    const where = parsed.where
    this.#view = adapter.view
    this.#keyOf = compileKey<Req>(
      parsed.key ?? 'ip',
      adapter.view,
      { ipv6Subnet: parsed.ipv6Subnet, onMissingKey: parsed.onMissingKey },
      where,
    )
    this.#costOf = costResolver(parsed.cost)
    this.#skip = parsed.skip
    this.#shadow = parsed.shadow === true
    // A shadowed limit sends no headers: it does not advertise a policy it does not enforce.
    this.#headers = this.#shadow ? NO_HEADERS : (parsed.headers ?? DEFAULT_HEADERS)
    this.#status = parsed.statusCode ?? 429
    this.#blockedStatus = parsed.blockedStatusCode ?? 429
    this.#bodyOf = bodyResolver<Req>(parsed.message)
    const limiter = parsed.limiter ?? limiterFrom(parsed)
    this.limiter = limiter
    this.#blocks = limiter.block !== undefined
    this.#owner = owner
    const countWhen = parsed.countWhen as ((request: Req, response: Res) => boolean) | undefined
    if (countWhen !== undefined && typeof limiter.refund !== 'function') {
      throw new InvalidOptionError(
        `${where}.countWhen`,
        countWhen,
        'a limiter that can refund (built by createLimiter)',
      )
    }
    this.#guard = parsed.overload
    this.#shedDecision = this.#guard === undefined ? undefined : shed(this.#guard.bucketMs)
    this.#held = new HeldRequests(parsed.queuePerClient ?? DEFAULT_QUEUE_PER_CLIENT)
    this.#end = new EndPhase(limiter, adapter, countWhen, parsed.settle, (req, key, decision, message) =>
      this.#publishSettle(req, key, decision, message),
    )
  }

  consume(req: Req, res: Res): HttpOutcome | Promise<HttpOutcome> {
    try {
      // Without a guard, a request runs exactly the code it ran before the option existed.
      if (this.#guard === undefined) return this.#limit(req, res, undefined)
      const entered = this.#enter(req, res, this.#guard)
      if (entered === CRITICAL) return this.#limit(req, res, this.#guard)
      return entered ?? this.#limit(req, res, undefined)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  onResponseEnd(req: Req, res: Res, callback: EndCallback): void {
    this.#end.onResponseEnd(req, res, callback)
  }

  hold(req: Req, res: Res, outcome: AllowOutcome): Promise<boolean> {
    const { decision, key, cost } = outcome
    // The wait is called off when the response ends before it is over: only a client leaving does that.
    const left = new AbortController()
    this.#end.onResponseEnd(req, res, () => left.abort())
    return hold(decision.waitMs, left.signal).then((waited) => {
      this.#held.leave(req)
      if (!waited) this.#end.unqueue(req, key, cost, decision)
      return waited
    })
  }

  /**
   * Enters the request into the overload guard, once per guard however many limits share it: undefined when
   * it is admitted (it leaves the guard when its response ends) or entered it before, `CRITICAL` when the
   * guard sheds it but marks it critical, else the outcome of a shed request. A shed request counts against
   * no client: no key is built and no rule is asked.
   */
  #enter(req: Req, res: Res, guard: Overload<Req>): HttpOutcome | typeof CRITICAL | undefined {
    const record = this.#end.recordOf(req)
    if (!record.claim(guard)) return undefined
    const ticket = guard.enter()
    if (ticket.admitted) {
      this.#end.onResponseEnd(req, res, ticket.done)
      return undefined
    }
    if (guard.critical?.(req) === true) return CRITICAL
    return this.#shed(req, record, guard)
  }

  /** Answers a request the guard shed: the guard's status, or in shadow a pass published as such. */
  #shed(req: Req, record: RequestRecord, guard: Overload<Req>): HttpOutcome {
    if (!this.#shadow) return this.#deny(req, record, '', this.#shedDecision!, guard.status)
    if (httpChannel.hasSubscribers) this.#publish(req, '', this.#shedDecision, 'shadow')
    return PASS
  }

  /**
   * The per-client limits: `skip`, then the count. `critical` is the guard whose critical headroom the
   * request may take once its limits admit it; one they let by uncounted (skipped, counted before, a
   * missing key skipped) was never asked of them, and is shed as any other.
   */
  #limit(req: Req, res: Res, critical: Overload<Req> | undefined): HttpOutcome | Promise<HttpOutcome> {
    const skip = this.#skip
    if (skip === undefined) return this.#count(req, res, critical)
    const skipped = skip(req)
    if (!isPromise(skipped)) return skipped ? this.#pass(req, critical) : this.#count(req, res, critical)
    // A native promise, whatever thenable `skip` answered with.
    return Promise.resolve(skipped).then((s) =>
      s ? this.#pass(req, critical) : this.#count(req, res, critical),
    )
  }

  /** A request this limit lets by uncounted: it passes, or it is shed when it was waiting for the headroom. */
  #pass(req: Req, critical: Overload<Req> | undefined): HttpOutcome {
    return critical === undefined ? PASS : this.#shed(req, this.#end.recordOf(req), critical)
  }

  /** Counts the request once per limit (and once per owner): a request seen before passes. */
  #count(req: Req, res: Res, critical: Overload<Req> | undefined): HttpOutcome | Promise<HttpOutcome> {
    const record = this.#end.recordOf(req)
    const owner = this.#owner
    if ((owner !== undefined && !record.claim(owner)) || !record.claim(this.limiter)) {
      return this.#pass(req, critical)
    }
    const key = this.#keyOf(req)
    // A key or cost function that answers by promise waits for it; a synchronous one stays in the tick.
    if (key instanceof Promise) return key.then((k) => this.#keyed(req, res, record, k, critical))
    return this.#keyed(req, res, record, key, critical)
  }

  #keyed(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: KeyResult,
    critical: Overload<Req> | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (!key.ok) {
      if (key.policy === 'skip') return this.#pass(req, critical)
      if (httpChannel.hasSubscribers) this.#publish(req, '', undefined, 'reject')
      return { action: 'reject', status: 400, body: missingKeyBody(key.detail), contentType: PROBLEM_JSON }
    }
    const cost = this.#costOf(req)
    if (cost instanceof Promise)
      return cost.then((c) => this.#consume(req, res, record, key.key, c, critical))
    return this.#consume(req, res, record, key.key, cost, critical)
  }

  #consume(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: string,
    cost: Cost,
    critical: Overload<Req> | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const decision = this.limiter.consumeNow(key, { cost, context: req })
    if (decision instanceof Promise) {
      return decision.then((d) => this.#outcomeOf(req, res, record, key, cost, d, critical))
    }
    return this.#outcomeOf(req, res, record, key, cost, decision, critical)
  }

  #outcomeOf(
    req: Req,
    res: Res,
    record: RequestRecord,
    key: string,
    cost: Cost,
    decision: Decision,
    critical: Overload<Req> | undefined,
  ): HttpOutcome {
    // A concurrency lease lasts while the request runs: it ends with the response, or when the client leaves.
    if (decision.lease !== undefined) this.#end.releaseOnEnd(req, res, key, decision)
    // Admitted by its client's limits, a critical request may take the headroom; shed, it gives its units back.
    if (critical !== undefined && decision.allowed && !this.#headroom(req, res, critical)) {
      this.#end.giveBack(req, key, cost, decision)
      return this.#shed(req, record, critical)
    }
    if (this.#shadow) {
      if (decision.allowed) this.#end.atEnd(req, res, record, key, cost, decision)
      record.counted(this.#counted(req, key, cost, decision))
      // Counted as usual; never denied or held.
      if (httpChannel.hasSubscribers) {
        this.#publish(req, key, decision, decision.allowed && decision.waitMs === 0 ? 'allow' : 'shadow')
      }
      return PASS
    }
    if (decision.allowed) {
      if (decision.waitMs > 0 && !this.#held.enter(key, this.#view.ip(req), req)) {
        // One client holds too many places in this key's queue: this one is refused now, its slot given back.
        this.#end.unqueue(req, key, cost, decision)
        return this.#deny(req, record, key, queueFull(decision), this.#status)
      }
      this.#end.atEnd(req, res, record, key, cost, decision)
      const headers = record.counted(this.#counted(req, key, cost, decision))
      if (httpChannel.hasSubscribers)
        this.#publish(req, key, decision, decision.waitMs > 0 ? 'queue' : 'allow')
      return { action: 'allow', decision, headers, key, cost }
    }
    const blocked = decision.reason === 'blocked' || (this.#blocks && decision.reason === 'rules')
    return this.#deny(req, record, key, decision, blocked ? this.#blockedStatus : this.#status)
  }

  /**
   * The record's entry for an admitted decision: its headers, and the settle of its reservation when the
   * store counted it (not a store failure's pass, not an unlimited key).
   */
  #counted(req: Req, key: string, cost: Cost, decision: Decision): CountedLimit {
    if (!reserved(decision)) return { decision, headers: this.#headers }
    return { decision, headers: this.#headers, settler: this.#end, request: req, key, cost }
  }

  /** Enters the request into the guard's critical headroom: true when admitted (it leaves with its response). */
  #headroom(req: Req, res: Res, guard: Overload<Req>): boolean {
    const ticket = guard.enter({ critical: true })
    if (ticket.admitted) this.#end.onResponseEnd(req, res, ticket.done)
    return ticket.admitted
  }

  #deny(req: Req, record: RequestRecord, key: string, decision: Decision, status: number): HttpOutcome {
    const headers = record.counted({ decision, headers: this.#headers })
    if (httpChannel.hasSubscribers) this.#publish(req, key, decision, 'deny')
    const { body, contentType } = this.#bodyOf(req, decision, status)
    return { action: 'deny', decision, status, headers, body, contentType }
  }

  #publish(req: Req, key: string, decision: Decision | undefined, action: string): void {
    const route = this.#view.routeTemplate?.(req)
    httpChannel.publish({ limiter: this.limiter.prefix, key, request: req, decision, action, route })
  }

  #publishSettle(req: Req, key: string, decision: Decision, costs: SettledCosts): void {
    if (!httpChannel.hasSubscribers) return
    const route = this.#view.routeTemplate?.(req)
    const { reserved, cost } = costs
    const limiter = this.limiter.prefix
    httpChannel.publish({ limiter, key, request: req, decision, action: 'settle', route, reserved, cost })
  }
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

/**
 * A request's cost: a number or per-rule costs at once, or a native promise of one when the function
 * answered by promise. The limiter checks what it answered, as it checks any call's cost.
 */
function costResolver<R>(cost: ParsedHttpOptions<R>['cost']): (request: R) => Cost | Promise<Cost> {
  if (cost === undefined) return () => undefined
  if (typeof cost === 'function') {
    return (request) => {
      const answer = cost(request)
      return typeof answer === 'number' || !isPromise(answer) ? answer : Promise.resolve(answer)
    }
  }
  return () => cost
}
