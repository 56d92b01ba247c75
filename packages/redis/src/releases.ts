/**
 * @module Releases, batched: the leases a store is asked to end go to Redis together, one script call for
 * all those made in one turn of the event loop (one per cluster slot on a cluster), so a request's release
 * costs no script call of its own.
 *
 * What a release promises, as when each went alone:
 * - Its promise settles with its call's reply: it resolves once the script has run (the lease ended, or it
 *   had ended already or was never known: release is idempotent), and rejects with a `StoreError` when the
 *   call fails (Redis down or erring, `maxInFlight` reached) or times out. Every release in a call settles
 *   alike, so a failure rejects each of them.
 * - Within the store's timeout, counted from the first release of its call, so never later than from its
 *   own. The call carries that deadline in Redis's clock: a script that starts after it ends no lease.
 * - Each lease ends by the code a single release runs (concurrency.lua's `concurrencyRelease`), which reads
 *   no clock: the lease goes from its key's set whether or not it has ended, as in the memory store.
 * - Order on a key: the store sends the waiting releases before any later call of its own on one of their
 *   keys (`before`), so a consume made after a release finds the lease ended, as it did before batching.
 * - Bounded: a call carries at most `MAX_LEASES` leases, and a full one goes at once.
 * - When: at the end of the turn (`setImmediate`), so every release made while the turn's replies and
 *   responses were handled shares one call. The client then writes it with the next calls.
 */
import type { ScriptCalls } from './calls.ts'
import { releasesScript } from './compose.ts'
import type { PendingCall } from './deadlines.ts'
import { slotOf } from './keys.ts'
import { addRelease, expectOk, type ReleasesCall, releasesCall, releasesWire } from './wire.ts'

/** Most leases one call ends: the work one script does in Redis, which runs nothing else meanwhile. */
export const MAX_LEASES = 64

/** The releases that will share one script call. */
interface Batch {
  readonly call: PendingCall<undefined>
  readonly wire: ReleasesCall
}

export class Releases {
  readonly #calls: ScriptCalls
  readonly #cluster: boolean
  /** The batches being filled, by cluster slot (all under 0 on a standalone Redis). */
  readonly #batches = new Map<number, Batch>()
  /**
   * The keys of the releases waiting (the caller's, whatever the limiter's prefix: a key under another
   * prefix only sends them sooner), for `before`. The caller's string, whose hash V8 keeps once computed.
   */
  readonly #keys = new Set<string>()
  #scheduled = false

  /** `cluster`: the client is a cluster's, where one call's keys must share a slot. */
  constructor(calls: ScriptCalls, cluster: boolean) {
    this.#calls = calls
    this.#cluster = cluster
  }

  /**
   * Ends one call's leases on `key` (`leases[i]` on `keys[i]`, the rule keys of its concurrency rules) with
   * the next batch.
   */
  add(key: string, keys: readonly string[], leases: readonly string[]): Promise<undefined> {
    const slot = this.#cluster ? slotOf(keys[0]!) : 0
    let batch = this.#batches.get(slot)
    // A full batch goes now; one whose timeout passed while it filled (a turn longer than the timeout) has
    // been answered, and goes nowhere: a release made now starts its own.
    if (batch !== undefined && (batch.call.done || batch.wire.keys.length + keys.length > MAX_LEASES)) {
      this.#batches.delete(slot)
      this.#send(batch)
      batch = undefined
    }
    if (batch === undefined) {
      batch = { call: this.#calls.start<undefined>(), wire: releasesCall() }
      this.#batches.set(slot, batch)
    }
    for (let i = 0; i < keys.length; i++) addRelease(batch.wire, keys[i]!, leases[i]!)
    this.#keys.add(key)
    if (batch.wire.keys.length >= MAX_LEASES) {
      this.#batches.delete(slot)
      this.#send(batch)
    } else if (!this.#scheduled) {
      this.#scheduled = true
      setImmediate(this.flush)
    }
    return batch.call.promise
  }

  /** Sends the waiting releases now when one of them is on `key`, before another call on it. */
  before(key: string): void {
    if (this.#keys.size !== 0 && this.#keys.has(key)) this.flush()
  }

  /** Sends every waiting release (at the end of the turn, before a call on one of their keys, on close). */
  readonly flush = (): void => {
    this.#scheduled = false
    this.#keys.clear()
    if (this.#batches.size === 0) return
    for (const batch of this.#batches.values()) this.#send(batch)
    this.#batches.clear()
  }

  #send(batch: Batch): void {
    // Timed out while it filled: its releases have been answered, and end nothing.
    if (batch.call.done) return
    // Releases made before the store closed still go (`refuse(true)`); the bound in flight holds.
    const refused = this.#calls.refuse(true)
    if (refused !== undefined) batch.call.reject(refused)
    else this.#calls.attempt(batch.call, releasesScript(), releasesWire(batch.wire), true, expectOk)
  }
}
