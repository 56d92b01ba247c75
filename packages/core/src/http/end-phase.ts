/**
 * @module A limit's response-end phase: what runs once a request's response has ended (or its client
 * left), through the request's record: `countWhen` asked and a refund of the request's own units, or the
 * `settle` option asked and the reservation settled, a concurrency lease released, a queued slot given back
 * (at once, for a request refused after its rules admitted it). These acts run beside the response, so a
 * failure is reported once per limit as a process warning, never thrown at the request. A handler's own
 * settle (`req.rateLimit.settle`) goes through `settle` here too, and its failure is the handler's to hear.
 */
import type { Limiter, RuleCosts } from '../limiter/limiter.ts'
import { isPromise } from '../options.ts'
import type { Decision } from '../types.ts'
import type { HttpAdapter } from './adapter.ts'
import { endSignal } from './adapter.ts'
import { type EndCallback, RequestRecord } from './record.ts'

/** A request's cost as the limit counted it: an integer, per rule by name, or undefined for 1. */
export type Cost = number | RuleCosts | undefined

/** The `settle` option, as the end phase asks it. */
type SettleOption<Req, Res> = (
  request: Req,
  response: Res,
  finished: boolean,
) => number | RuleCosts | undefined | Promise<number | RuleCosts | undefined>

/** What a settle changed, per rule by name: published on `sluice:http` with `action: 'settle'`. */
export interface SettledCosts {
  readonly reserved: Readonly<Record<string, number>>
  readonly cost: Readonly<Record<string, number>>
}

/** Whether the store counted this decision's units (not a store failure's pass, not an unlimited key). */
export function reserved(decision: Decision): boolean {
  return decision.allowed && (decision.reason === 'rules' || decision.reason === 'prefetch')
}

export class EndPhase<Req, Res> {
  readonly #limiter: Limiter<Req>
  readonly #adapter: HttpAdapter<Req, Res>
  readonly #countWhen: ((request: Req, response: Res) => boolean) | undefined
  readonly #settle: SettleOption<Req, Res> | undefined
  readonly #settled: (req: Req, key: string, decision: Decision, costs: SettledCosts) => void
  readonly #onEnd: (res: Res, ended: (finished: boolean) => void) => void
  /** Warnings already emitted for this limit, so a broken callback cannot flood the process's output. */
  readonly #warned = new Set<string>()

  constructor(
    limiter: Limiter<Req>,
    adapter: HttpAdapter<Req, Res>,
    countWhen: ((request: Req, response: Res) => boolean) | undefined,
    settle: SettleOption<Req, Res> | undefined,
    settled: (req: Req, key: string, decision: Decision, costs: SettledCosts) => void,
  ) {
    this.#limiter = limiter
    this.#adapter = adapter
    this.#countWhen = countWhen
    this.#settle = settle
    this.#settled = settled
    this.#onEnd = endSignal(adapter)
  }

  /** The request's record, made and kept on first use. */
  recordOf(req: Req): RequestRecord {
    let record = this.#adapter.recordOf(req)
    if (record === undefined) {
      record = new RequestRecord()
      this.#adapter.keepRecord(req, record)
    }
    return record
  }

  /** Runs `callback` once when the response to `req` ends (the record listens to the adapter's signal once). */
  onResponseEnd(req: Req, res: Res, callback: EndCallback): void {
    const record = this.recordOf(req)
    if (record.onEnd(callback)) this.#onEnd(res, (finished) => record.end(finished))
  }

  /**
   * For an admitted request, when its response ends: `countWhen` asked (when it was sent in full), and the
   * request's own units given back when it says false; else the `settle` option asked (sent or not) and
   * the reservation settled at what it answers. Neither is asked once the handler settled the request.
   */
  atEnd(req: Req, res: Res, record: RequestRecord, key: string, cost: Cost, decision: Decision): void {
    // Only a decision that counted units in the store has any to give back (not a store-error or unlimited pass).
    if ((this.#countWhen === undefined && this.#settle === undefined) || !reserved(decision)) return
    this.onResponseEnd(req, res, (finished) => {
      if (record.settled) return
      if (finished && this.#countWhen !== undefined && !this.#asked(req, res)) {
        this.#giveBackUnits(key, cost, req, decision)
        return
      }
      if (this.#settle !== undefined) this.#settleAtEnd(req, res, finished, key, cost, decision)
    })
  }

  /** Asks the `settle` option and settles at its answer; a throw, a rejection or a failed settle warns. */
  #settleAtEnd(req: Req, res: Res, finished: boolean, key: string, cost: Cost, decision: Decision): void {
    let answer: ReturnType<SettleOption<Req, Res>>
    try {
      answer = this.#settle!(req, res, finished)
    } catch (error) {
      this.#warnOnce('settle-throw', `settle threw (the reservation stays): ${String(error)}`)
      return
    }
    Promise.resolve(answer).then(
      (trueCost) => {
        if (trueCost === undefined) return
        this.settle(req, key, cost, decision, trueCost).catch((error: unknown) => {
          this.#warnOnce('settle', `settling a reservation failed, so it stays: ${String(error)}`)
        })
      },
      (error: unknown) => {
        this.#warnOnce('settle-throw', `settle rejected (the reservation stays): ${String(error)}`)
      },
    )
  }

  /**
   * Settles the reservation `decision` made at `cost` to `trueCost`, naming only the rules this limit has
   * (a limit none of whose rules is named is left alone: undefined), and publishes what it changed.
   */
  settle(
    req: Req,
    key: string,
    cost: Cost,
    decision: Decision,
    trueCost: number | RuleCosts,
  ): Promise<Decision | undefined> {
    let own: number | RuleCosts = trueCost
    if (typeof trueCost === 'object' && trueCost !== null) {
      const named: Record<string, number> = {}
      let any = false
      for (const rule of decision.rules) {
        if (Object.hasOwn(trueCost, rule.rule)) {
          named[rule.rule] = trueCost[rule.rule]!
          any = true
        }
      }
      if (!any) return Promise.resolve(undefined)
      own = named
    }
    let settling: Promise<Decision>
    try {
      settling = this.#limiter.settle(key, { decision, cost: own, context: req })
    } catch (error) {
      return Promise.reject(error)
    }
    return settling.then((after) => {
      this.#settled(req, key, after, settledCosts(decision, cost, own))
      return after
    })
  }

  /** Ends the request's concurrency lease when its response ends, or its client leaves. */
  releaseOnEnd(req: Req, res: Res, key: string, decision: Decision): void {
    this.onResponseEnd(req, res, () => {
      this.#limiter.release(key, decision, { context: req }).catch((error: unknown) => {
        this.#warnOnce(
          'release',
          `releasing a concurrency lease failed (it ends by itself after leaseMs): ${String(error)}`,
        )
      })
    })
  }

  /** Gives a queued request's slot back (its client left, or it was refused a place). */
  unqueue(req: Req, key: string, cost: Cost, decision: Decision): void {
    this.#limiter.unqueue(key, decision, { cost, context: req }).catch((error: unknown) => {
      this.#warnOnce('unqueue', `giving a queued slot back failed: ${String(error)}`)
    })
  }

  /**
   * Gives back what the rules counted for a request sluice then refused (the overload guard shed it after its
   * client's limits admitted it): a queued slot, or the call's units when the limiter can refund.
   */
  giveBack(req: Req, key: string, cost: Cost, decision: Decision): void {
    if (decision.waitMs > 0) this.unqueue(req, key, cost, decision)
    else if (typeof this.#limiter.refund === 'function') this.#giveBackUnits(key, cost, req, decision)
  }

  /** `countWhen`'s answer: only `false` refunds; a throw or a promise counts the request, with a warning. */
  #asked(req: Req, res: Res): boolean {
    let answer: unknown
    try {
      answer = this.#countWhen!(req, res)
    } catch (error) {
      this.#warnOnce('throw', `countWhen threw (the request stays counted): ${String(error)}`)
      return true
    }
    if (isPromise(answer)) {
      // Nobody waits for it: it may still reject, and that must not be an unhandled rejection.
      Promise.resolve(answer).catch(() => {})
      this.#warnOnce(
        'promise',
        'countWhen returned a promise; it must answer synchronously (the request stays counted)',
      )
      return true
    }
    return answer !== false
  }

  /**
   * Gives back the request's own units: the decision names its call, so a late refund takes no newer one's.
   * Units counted per rule go back as a settle at 0 does (every rule's own units, one store call).
   */
  #giveBackUnits(key: string, cost: Cost, req: Req, decision: Decision): void {
    const given =
      typeof cost === 'object'
        ? this.settle(req, key, cost, decision, 0)
        : this.#limiter.refund(key, { decision, cost, context: req })
    given.catch((error: unknown) => {
      this.#warnOnce('refund', `a refund failed, so the request stays counted: ${String(error)}`)
    })
  }

  #warnOnce(what: string, message: string): void {
    if (this.#warned.has(what)) return
    this.#warned.add(what)
    process.emitWarning(
      `sluice (${this.#limiter.prefix}): ${message}. Further such failures of this limit are not reported.`,
      'SluiceWarning',
    )
  }
}

/** Per rule by name, what the call reserved and what it settled at (rules not named in `trueCost` keep theirs). */
function settledCosts(decision: Decision, cost: Cost, trueCost: number | RuleCosts): SettledCosts {
  const reserved: Record<string, number> = {}
  const settled: Record<string, number> = {}
  for (const { rule } of decision.rules) {
    const held = cost === undefined ? 1 : typeof cost === 'number' ? cost : (cost[rule] ?? 1)
    reserved[rule] = held
    settled[rule] = typeof trueCost === 'number' ? trueCost : (trueCost[rule] ?? held)
  }
  return { reserved, cost: settled }
}
