/**
 * @module Releases, batched: the leases a store is asked to end go to Redis together, one script call for
 * all those made in one turn of the event loop (one per cluster slot on a cluster), so a request's release
 * costs no script call of its own; and a release that did not land is sent again until it does.
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
 *
 * And one more, since a lost release would hold its unit for the whole lease: a release whose script did
 * not run (the client failed it, it was refused, or it reached Redis after its deadline and ended nothing)
 * goes again, with the next batch, once the client has settled it and no sooner than `timeoutMs` after it
 * was sent, until one lands or the lease has ended by itself (`leaseMs` after the release was asked for,
 * at the latest). Its caller's promise has already rejected; the retries are the store's. A release whose
 * script ran late (its reply came after its timeout) has landed, and goes no more. At most
 * `MAX_RETRIED` leases wait to go again; past that a lost release is left to end by itself. `close()`
 * sends the waiting ones once more, and retries nothing after.
 */
import type { ScriptCalls } from './calls.ts'
import { releasesScript } from './compose.ts'
import type { PendingCall } from './deadlines.ts'
import { slotOf } from './keys.ts'
import { addRelease, expectOk, type ReleasesCall, releasesCall, releasesWire } from './wire.ts'

/** Most leases one call ends: the work one script does in Redis, which runs nothing else meanwhile. */
export const MAX_LEASES = 64

/** Most leases waiting to be sent again: a lost release past it ends with its lease. */
export const MAX_RETRIED = 65_536

/** The releases that will share one script call. */
interface Batch {
  readonly call: PendingCall<undefined>
  readonly wire: ReleasesCall
  /** Per lease: the key its caller named (for `before`) and the local ms by which the lease has ended. */
  readonly owners: string[]
  readonly ends: number[]
}

/** A lease whose release is to go again, from `due` (local ms) until `end`. */
interface Retry {
  readonly owner: string
  readonly key: string
  readonly lease: string
  readonly end: number
  readonly due: number
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
  /** Lost releases waiting to go again, and the timer that sends them. */
  #again: Retry[] = []
  #timer: NodeJS.Timeout | undefined
  #closed = false
  /** The calls sent since `close()` began, which it waits for. */
  readonly #closing: Promise<unknown>[] = []

  /** `cluster`: the client is a cluster's, where one call's keys must share a slot. */
  constructor(calls: ScriptCalls, cluster: boolean) {
    this.#calls = calls
    this.#cluster = cluster
  }

  /**
   * Ends one call's leases on `key` (`leases[i]` on `keys[i]`, the rule keys of its concurrency rules, each
   * ended by itself at local ms `ends[i]` at the latest) with the next batch.
   */
  add(
    key: string,
    keys: readonly string[],
    leases: readonly string[],
    ends: readonly number[],
  ): Promise<undefined> {
    const slot = this.#cluster ? slotOf(keys[0]!) : 0
    let batch = this.#batches.get(slot)
    // A full batch goes now; one whose timeout passed while it filled (a turn longer than the timeout) is
    // answered by it, and goes with a later call: a release made now starts its own.
    if (batch !== undefined && (stale(batch) || batch.wire.keys.length + keys.length > MAX_LEASES)) {
      this.#batches.delete(slot)
      this.#send(batch)
      batch = undefined
    }
    if (batch === undefined) {
      batch = { call: this.#calls.start<undefined>(), wire: releasesCall(), owners: [], ends: [] }
      this.#batches.set(slot, batch)
    }
    for (let i = 0; i < keys.length; i++) {
      addRelease(batch.wire, keys[i]!, leases[i]!)
      batch.owners.push(key)
      batch.ends.push(ends[i]!)
    }
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
    const sentAt = performance.now()
    // Timed out while it filled: its releases are answered by the timeout, and go with a later call.
    if (stale(batch)) {
      this.#lost(batch, sentAt)
      return
    }
    // Releases made before the store closed still go (`refuse(true)`); the bound in flight holds.
    const refused = this.#calls.refuse(true)
    if (refused !== undefined) {
      batch.call.reject(refused)
      this.#lost(batch, sentAt)
      return
    }
    // A release that ran after its timeout has landed; one that never ran goes again.
    this.#calls.attempt(batch.call, releasesScript(), releasesWire(batch.wire), true, expectOk, () =>
      this.#lost(batch, sentAt),
    )
    if (this.#closed) this.#closing.push(batch.call.promise.then(undefined, () => {}))
  }

  /** The batch's releases did not land: each goes again from `timeoutMs` after it was sent, while its lease lasts. */
  #lost(batch: Batch, sentAt: number): void {
    if (this.#closed) return
    const now = performance.now()
    const due = Math.max(now, sentAt + this.#calls.timeoutMs)
    const { keys, leases } = batch.wire
    for (let i = 0; i < keys.length && this.#again.length < MAX_RETRIED; i++) {
      const end = batch.ends[i]!
      if (end > now) this.#again.push({ owner: batch.owners[i]!, key: keys[i]!, lease: leases[i]!, end, due })
    }
    if (this.#timer === undefined && this.#again.length > 0) this.#arm(due - now)
  }

  #arm(wait: number): void {
    this.#timer = setTimeout(this.#retry, Math.max(0, Math.ceil(wait)))
    this.#timer.unref()
  }

  /** Sends the lost releases that are due with the next batch; those whose lease has ended go no more. */
  readonly #retry = (): void => {
    this.#timer = undefined
    const now = performance.now()
    const waiting: Retry[] = []
    let next = Number.POSITIVE_INFINITY
    for (const r of this.#again) {
      if (r.end <= now) continue
      if (r.due > now) {
        waiting.push(r)
        next = Math.min(next, r.due)
      } else this.#resend(r)
    }
    this.#again = waiting
    if (waiting.length > 0) this.#arm(next - now)
  }

  #resend(r: Retry): void {
    // Its caller has had its answer: the retry's outcome is the store's alone.
    this.add(r.owner, [r.key], [r.lease], [r.end]).then(undefined, () => {})
  }

  /**
   * Sends every waiting release, and the lost ones once more, and retries nothing after: resolves once the
   * calls sent have settled.
   */
  close(): Promise<unknown> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    const again = this.#again
    this.#again = []
    this.#closed = true
    const now = performance.now()
    for (const r of again) if (r.end > now) this.#resend(r)
    this.flush()
    return Promise.all(this.#closing)
  }
}

/**
 * Whether the batch's call has timed out: answered, or past its deadline and about to be (a timeout waits
 * for the loop to read its sockets first, deadlines.ts).
 */
function stale(batch: Batch): boolean {
  return batch.call.done || batch.call.deadline <= performance.now()
}
