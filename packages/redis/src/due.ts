/**
 * @module Due: the keys prefetch looks at again later (a batch's time up, a spent key to forget), in the
 * order they fall due, behind one timer. Apart from prefetch.ts because it knows nothing of units: it keeps
 * times and calls back when they come.
 */

/** An entry the queue can hold: when it falls due, and whether it waits in the queue now. */
export interface Due {
  due: number
  queued: boolean
}

export class DueQueue<T extends Due> {
  readonly #clock: () => number
  /** Looks at an entry that fell due at local time `now` (and may schedule it again). */
  readonly #visit: (entry: T, now: number) => void
  /** Entries in the order they fall due (nearly: one scheduled again earlier keeps its place). */
  #queue: T[] = []
  #head = 0
  #timer: NodeJS.Timeout | undefined

  constructor(clock: () => number, visit: (entry: T, now: number) => void) {
    this.#clock = clock
    this.#visit = visit
  }

  /** Has `entry` looked at once local time reaches `due`. */
  schedule(entry: T, due: number): void {
    entry.due = due
    if (entry.queued) return
    entry.queued = true
    this.#queue.push(entry)
    if (this.#timer === undefined) this.#arm()
  }

  /** Drops every entry and stops the timer. */
  clear(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue = []
    this.#head = 0
  }

  #arm(): void {
    const next = this.#queue[this.#head]
    if (next === undefined) return
    const wait = Math.max(1, Math.ceil(next.due - this.#clock()))
    this.#timer = setTimeout(this.#sweep, wait)
    this.#timer.unref()
  }

  readonly #sweep = (): void => {
    this.#timer = undefined
    const now = this.#clock()
    while (this.#head < this.#queue.length) {
      const entry = this.#queue[this.#head]!
      if (entry.due > now) break
      this.#head++
      entry.queued = false
      this.#visit(entry, now)
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head)
      this.#head = 0
    }
    this.#arm()
  }
}
