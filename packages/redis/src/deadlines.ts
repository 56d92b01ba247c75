/**
 * @module Per-call timeouts with one timer for all calls.
 *
 * Every call gets the same timeout, so deadlines arrive in the order calls start: a FIFO holds them,
 * one unref'd timer waits for the oldest, and a call that settles first is skipped when its turn comes.
 * Starting and settling a call is O(1), and no timer is created per call.
 *
 * A call times out only after the event loop has read what had come in by then: the timer hands over to
 * `setImmediate`, which runs after the loop's poll phase. A loop held up past a deadline (a long task, a
 * loaded machine) runs its timers before it reads its sockets, so a reply that had arrived in time would
 * otherwise lose to its own timeout, and its call, answered by `onStoreError`, would stay counted.
 */

/** A call waiting for Redis. `settle` returns false when the call had already timed out. */
export class PendingCall<T> {
  readonly deadline: number
  readonly promise: Promise<T>
  done = false
  #resolve!: (value: T) => void
  #reject!: (error: unknown) => void

  constructor(deadline: number) {
    this.deadline = deadline
    this.promise = new Promise<T>((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
  }

  resolve(value: T): void {
    if (this.done) return
    this.done = true
    this.#resolve(value)
  }

  reject(error: unknown): void {
    if (this.done) return
    this.done = true
    this.#reject(error)
  }
}

/** What the queue holds in the place of a settled call it has let go of. */
const SETTLED = new PendingCall<unknown>(0)
SETTLED.done = true

export class Deadlines {
  readonly #timeoutMs: number
  readonly #now: () => number
  readonly #onTimeout: () => unknown
  #queue: PendingCall<unknown>[] = []
  #head = 0
  #timer: NodeJS.Timeout | undefined

  constructor(timeoutMs: number, now: () => number, onTimeout: () => unknown) {
    this.#timeoutMs = timeoutMs
    this.#now = now
    this.#onTimeout = onTimeout
  }

  /** How many calls the queue holds (settled ones not yet let go of included). */
  get held(): number {
    return this.#queue.length - this.#head
  }

  /** A call that rejects with `onTimeout()` unless settled within the timeout. */
  start<T>(): PendingCall<T> {
    const call = new PendingCall<T>(this.#now() + this.#timeoutMs)
    this.#dropSettled()
    this.#queue.push(call as PendingCall<unknown>)
    if (this.#timer === undefined) this.#arm(call.deadline)
    return call
  }

  /**
   * Lets go of the settled calls at the head of the queue: a settled call's promise holds its reply, and
   * left for the timer, a second of calls (the timeout) would be kept, long enough for the collector to
   * move them to the old generation and pay to collect them there. Each call is let go of once.
   */
  #dropSettled(): void {
    const queue = this.#queue
    let head = this.#head
    while (head < queue.length && queue[head]!.done) queue[head++] = SETTLED
    if (head === queue.length) {
      queue.length = 0
      head = 0
    }
    this.#head = head
  }

  #arm(deadline: number): void {
    this.#timer = setTimeout(this.#fire, Math.max(0, deadline - this.#now()))
    this.#timer.unref()
  }

  /** The timer's turn: the calls past their deadline are timed out once the replies waiting are read. */
  readonly #fire = (): void => {
    setImmediate(this.#expire)
  }

  readonly #expire = (): void => {
    this.#timer = undefined
    const now = this.#now()
    const queue = this.#queue
    let head = this.#head
    while (head < queue.length) {
      const call = queue[head]!
      if (!call.done) {
        if (call.deadline > now) break
        call.reject(this.#onTimeout())
      }
      head++
    }
    if (head === queue.length) {
      this.#queue = []
      this.#head = 0
      return
    }
    if (head > 1024 && head * 2 > queue.length) {
      this.#queue = queue.slice(head)
      head = 0
    }
    this.#head = head
    this.#arm(this.#queue[head]!.deadline)
  }
}
