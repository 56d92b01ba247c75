/**
 * @module A limit's response-end phase: what runs once a request's response has ended (or its client
 * left), through the request's record: `countWhen` asked and a refund of the request's own units, a
 * concurrency lease released, a queued slot given back (at once, for a request refused after its rules
 * admitted it). These acts run beside the response, so a failure is reported once per limit as a process
 * warning, never thrown at the request.
 */
import type { Limiter } from '../limiter/limiter.ts'
import { isPromise } from '../options.ts'
import type { Decision } from '../types.ts'
import type { HttpAdapter } from './adapter.ts'
import { endSignal } from './adapter.ts'
import { type EndCallback, RequestRecord } from './record.ts'

export class EndPhase<Req, Res> {
  readonly #limiter: Limiter<Req>
  readonly #adapter: HttpAdapter<Req, Res>
  readonly #countWhen: ((request: Req, response: Res) => boolean) | undefined
  readonly #onEnd: (res: Res, ended: (finished: boolean) => void) => void
  /** Warnings already emitted for this limit, so a broken callback cannot flood the process's output. */
  readonly #warned = new Set<string>()

  constructor(
    limiter: Limiter<Req>,
    adapter: HttpAdapter<Req, Res>,
    countWhen: ((request: Req, response: Res) => boolean) | undefined,
  ) {
    this.#limiter = limiter
    this.#adapter = adapter
    this.#countWhen = countWhen
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

  /** Asks `countWhen` when the response has been sent, and refunds the request's own units when it says false. */
  countWhen(req: Req, res: Res, key: string, cost: number | undefined, decision: Decision): void {
    // Only a decision that counted units in the store has any to give back (not a store-error or unlimited pass).
    if (this.#countWhen === undefined || (decision.reason !== 'rules' && decision.reason !== 'prefetch'))
      return
    this.onResponseEnd(req, res, (finished) => {
      if (finished && !this.#asked(req, res)) this.#refund(key, cost, req, decision)
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
  unqueue(req: Req, key: string, cost: number | undefined, decision: Decision): void {
    this.#limiter.unqueue(key, decision, { cost, context: req }).catch((error: unknown) => {
      this.#warnOnce('unqueue', `giving a queued slot back failed: ${String(error)}`)
    })
  }

  /**
   * Gives back what the rules counted for a request sluice then refused (the overload guard shed it after its
   * client's limits admitted it): a queued slot, or the call's units when the limiter can refund.
   */
  giveBack(req: Req, key: string, cost: number | undefined, decision: Decision): void {
    if (decision.waitMs > 0) this.unqueue(req, key, cost, decision)
    else if (typeof this.#limiter.refund === 'function') this.#refund(key, cost, req, decision)
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

  /** Gives back the request's own units: the decision names its call, so a late refund takes no newer one's. */
  #refund(key: string, cost: number | undefined, req: Req, decision: Decision): void {
    this.#limiter.refund(key, { decision, cost, context: req }).catch((error: unknown) => {
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
