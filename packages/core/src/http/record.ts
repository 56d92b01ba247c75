/**
 * @module The per-request record: which limits counted a request, their decisions, the headers sluice
 * wrote for them, and what must run when the response ends. One record per request, kept wherever the
 * adapter says (a decorated slot in Fastify, a WeakMap entry in Express), so both adapters count a request
 * once per limit, list stacked limits alike, and run the response-end phase alike.
 *
 * The usual request is counted by one limit: its figures sit in the record's own fields, and lists are
 * made only for a second limit or a second callback.
 */

import { ErrorCode, InvalidCostError, SluiceError } from '../errors.ts'
import type { RuleCosts } from '../limiter/limiter.ts'
import type { Decision } from '../types.ts'
import { type ResolvedHeaderOptions, stackedHeaders } from './headers.ts'

/** One limit's part in a response's headers, and what settling the request under it needs. */
export interface CountedLimit {
  readonly decision: Decision
  readonly headers: ResolvedHeaderOptions
  /**
   * The limit's end phase, when its decision reserved units a settle can change, with the key it was
   * counted under (the decision holds what it reserved): plain fields, not a closure, so a request nobody
   * settles allocates nothing for it. Not the request: a record kept in a WeakMap under its request must
   * not hold it (V8 then marks the pair as an ephemeron cycle on every collection); `shownFor` is given it
   * when the handler reads the record.
   */
  readonly settler?: Settler
  readonly key?: string
}

/** What settles one limit's reservation: its end phase. */
export interface Settler {
  settle(request: unknown, key: string, decision: Decision, trueCost: number | RuleCosts): Promise<void>
}

/**
 * What a handler sees of the limits that counted its request (`req.rateLimit`, `ctx.state.rateLimit`,
 * `c.get('rateLimit')`): the decision of the limit that counted it last, and `settle`.
 */
export type RequestRateLimit = Decision & {
  /**
   * Makes the request's reservation its true cost now, under every limit that admitted it: an integer, or
   * per rule by name (rules not named keep what they reserved; a limit none of whose rules is named is left
   * alone, so one call settles stacked limits with different rules; a name none of them has is an
   * `ERR_SLUICE_INVALID_COST` error, and nothing is settled). The limits' `settle` option is then not
   * asked. Resolves with nothing once every limit settled, as `limiter.settle` does. Rejects with
   * `ERR_SLUICE_INVALID_SETTLE` when called twice, `ERR_SLUICE_INVALID_COST` for a bad cost, and the store's
   * error when it fails. The limits settle side by side: one that rejects (its store down, a charge past
   * its bound) leaves the others settled.
   */
  settle(cost: number | RuleCosts): Promise<void>
}

/** Runs when the response ends: `finished` is false when the client went away before it was sent. */
export type EndCallback = (finished: boolean) => void

export class RequestRecord {
  /** What claimed the request (a limiter, or an adapter's registration): one, or a list of several. */
  #owners: object | object[] | undefined = undefined
  #first: CountedLimit | undefined = undefined
  #more: CountedLimit[] | undefined = undefined
  #ended: EndCallback | EndCallback[] | undefined = undefined
  /** How the response ended (`finished`), once it has: undefined while it runs. */
  #over: boolean | undefined = undefined
  /** The decision of the limit that last counted the request: what `req.rateLimit` shows (see `shown`). */
  decision: Decision | undefined = undefined
  /** True once the handler settled the request (`settle`): the limits' `settle` option is not asked then. */
  settled = false
  /** `shownFor`'s answer, made when first read, the decision it was made from, and its request. */
  #shown: RequestRateLimit | undefined = undefined
  #shownOf: Decision | undefined = undefined
  #request: unknown = undefined
  /** The rate-limit headers sluice has written for every limit that counted the request, in order. */
  headers: Readonly<Record<string, string>> | undefined = undefined

  /** True the first time `owner` claims the request, false after: one request is counted once per owner. */
  claim(owner: object): boolean {
    const owners = this.#owners
    if (owners === undefined) {
      this.#owners = owner
      return true
    }
    if (owners === owner) return false
    if (!Array.isArray(owners)) {
      this.#owners = [owners, owner]
      return true
    }
    if (owners.includes(owner)) return false
    owners.push(owner)
    return true
  }

  /**
   * Records a limit's decision, and answers the headers the response carries now: this limit's alone, or
   * when others counted the request first, every limit's, rendered from their decisions in order.
   */
  counted(limit: CountedLimit): Readonly<Record<string, string>> {
    this.decision = limit.decision
    if (this.#first === undefined) {
      this.#first = limit
      this.headers = limit.headers.build(limit.decision)
    } else {
      this.#more ??= []
      this.#more.push(limit)
      this.headers = stackedHeaders([this.#first, ...this.#more])
    }
    return this.headers
  }

  /**
   * What the handler of `request` sees (`req.rateLimit`): `decision` with a `settle` method that settles
   * every limit that counted the request (asking rules functions with `request`). Made when first read (a
   * handler that never reads it costs nothing), again when another limit has counted the request since;
   * undefined when no limit counted it.
   */
  shownFor(request: unknown): RequestRateLimit | undefined {
    const decision = this.decision
    if (decision === undefined) return undefined
    this.#request = request
    if (this.#shownOf !== decision) {
      // `settle` is not enumerable: the shown object reads, spreads and serializes as the decision does.
      const shown = Object.defineProperty({ ...decision }, 'settle', {
        value: (cost: number | RuleCosts) => this.settle(cost),
      }) as RequestRateLimit
      this.#shownOf = decision
      this.#shown = shown
    }
    return this.#shown
  }

  /** `req.rateLimit.settle(cost)`: see `RequestRateLimit.settle`. Reached only through `shownFor`. */
  settle(cost: number | RuleCosts): Promise<void> {
    if (this.settled) {
      return Promise.reject(new SluiceError(ErrorCode.INVALID_SETTLE, 'This request was settled already.'))
    }
    const counted = this.#first === undefined ? [] : [this.#first, ...(this.#more ?? [])]
    // Only limits whose decisions reserved units have anything to settle.
    const limits = counted.filter((limit) => limit.settler !== undefined)
    const unknown = limits.length === 0 ? undefined : unnamedRule(cost, limits)
    if (unknown !== undefined) {
      const all = limits.flatMap((limit) => limit.decision.rules.map((rule) => rule.rule)).join(', ')
      const reason = `${unknown} names no rule of this request's limits (their rules: ${all})`
      return Promise.reject(new InvalidCostError(cost, reason))
    }
    this.settled = true
    const settling = limits.map((limit) => {
      const own = ownCost(cost, limit.decision)
      return own === undefined
        ? undefined
        : limit.settler!.settle(this.#request, limit.key!, limit.decision, own)
    })
    return Promise.all(settling).then(nothing)
  }

  /**
   * Adds a callback for the response's end. Answers true for the first one, when the adapter's kit must
   * start watching the response; callbacks added after the end run at once.
   */
  onEnd(callback: EndCallback): boolean {
    if (this.#over !== undefined) {
      runEnd(callback, this.#over)
      return false
    }
    const ended = this.#ended
    if (ended === undefined) {
      this.#ended = callback
      return true
    }
    if (Array.isArray(ended)) ended.push(callback)
    else this.#ended = [ended, callback]
    return false
  }

  /** The response ended: runs every callback once, in order. A callback's throw does not stop the others. */
  end(finished: boolean): void {
    if (this.#over !== undefined) return
    this.#over = finished
    const ended = this.#ended
    this.#ended = undefined
    if (ended === undefined) return
    if (Array.isArray(ended)) for (const callback of ended) runEnd(callback, finished)
    else runEnd(ended, finished)
  }
}

/**
 * The first name in a per-rule cost that no limit counting the request has a rule of: a typo must not
 * settle nothing in silence. (Each limit then settles only the names it has.)
 */
function unnamedRule(cost: number | RuleCosts, limits: readonly CountedLimit[]): string | undefined {
  if (typeof cost !== 'object' || cost === null) return undefined
  for (const name of Object.keys(cost)) {
    if (!limits.some((limit) => limit.decision.rules.some((rule) => rule.rule === name))) return name
  }
  return undefined
}

/** `cost` as one limit settles it: only the names its decision's rules have; undefined when it has none. */
function ownCost(cost: number | RuleCosts, decision: Decision): number | RuleCosts | undefined {
  if (typeof cost !== 'object' || cost === null) return cost
  let own: Record<string, number> | undefined
  for (const rule of decision.rules) {
    if (Object.hasOwn(cost, rule.rule)) {
      own ??= {}
      own[rule.rule] = cost[rule.rule]!
    }
  }
  return own
}

function runEnd(callback: EndCallback, finished: boolean): void {
  try {
    callback(finished)
  } catch (error) {
    // The response is gone, so nobody can be answered; a server must not crash over its bookkeeping.
    process.emitWarning(`sluice: a response-end callback failed: ${String(error)}`, 'SluiceWarning')
  }
}

const nothing = (): undefined => undefined
