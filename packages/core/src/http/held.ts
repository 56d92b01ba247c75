/**
 * @module Requests held in a queue, per key and client, in this process: so that one client cannot take
 * every place in a key's queue (a leakyBucket with `maxQueueMs`) by opening requests and walking away.
 * Bounded: counts for at most `MAX_HELD_ENTRIES` key-and-client pairs at once, each dropped when its last
 * request stops waiting. Past that bound (as many clients holding at once), requests are not tracked.
 * Other processes' queues and their clients are not seen here; the store's queue is shared all the same.
 * A request enters when its outcome is decided and leaves in `RequestLimit.hold`, which adapters
 * call for every admitted outcome with `waitMs > 0` (no listener is added per request for it).
 */

/** Key-and-client pairs counted at once. */
export const MAX_HELD_ENTRIES = 10_000

export class HeldRequests {
  readonly #perClient: number
  readonly #counts = new Map<string, number>()
  /** The pair each held request counts under, so its leaving needs nothing else. */
  readonly #pairs = new WeakMap<object, string>()

  constructor(perClient: number) {
    this.#perClient = perClient
  }

  /** Pairs counted now. */
  get size(): number {
    return this.#counts.size
  }

  /** Counts `request` as held on `key` for client `ip`; false when that client already holds its share. */
  enter(key: string, ip: string | undefined, request: unknown): boolean {
    const pair = `${key}\u0000${ip ?? ''}`
    const n = this.#counts.get(pair) ?? 0
    if (n >= this.#perClient) return false
    if (n === 0 && this.#counts.size >= MAX_HELD_ENTRIES) return true
    this.#counts.set(pair, n + 1)
    this.#pairs.set(request as object, pair)
    return true
  }

  /** The request stopped waiting (it goes on, or its client left). Idempotent. */
  leave(request: unknown): void {
    const pair = this.#pairs.get(request as object)
    if (pair === undefined) return
    this.#pairs.delete(request as object)
    const n = (this.#counts.get(pair) ?? 1) - 1
    if (n <= 0) this.#counts.delete(pair)
    else this.#counts.set(pair, n)
  }
}
