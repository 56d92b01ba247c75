/**
 * @module The per-request record: which limits counted a request, their decisions, the headers sluice
 * wrote for them, and what must run when the response ends. One record per request, kept wherever the
 * adapter says (a decorated slot in Fastify, a WeakMap entry in Express), so both adapters count a request
 * once per limit, list stacked limits alike, and run the response-end phase alike.
 *
 * The usual request is counted by one limit: its figures sit in the record's own fields, and lists are
 * made only for a second limit or a second callback.
 */

import type { Decision } from '../types.ts'
import { type ResolvedHeaderOptions, stackedHeaders } from './headers.ts'

/** One limit's part in a response's headers. */
export interface CountedLimit {
  readonly decision: Decision
  readonly headers: ResolvedHeaderOptions
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
  /** The decision of the limit that last counted the request: what `req.rateLimit` shows. */
  decision: Decision | undefined = undefined
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

function runEnd(callback: EndCallback, finished: boolean): void {
  try {
    callback(finished)
  } catch (error) {
    // The response is gone, so nobody can be answered; a server must not crash over its bookkeeping.
    process.emitWarning(`sluice: a response-end callback failed: ${String(error)}`, 'SluiceWarning')
  }
}
