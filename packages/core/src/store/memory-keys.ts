/**
 * @module The keys a memory store holds: one map per prefix, bounded without a timer per key.
 *
 * Keys live in two generations. New and recently used keys go to the current one; when the current
 * generations of all prefixes hold half of `maxKeys` between them, every previous generation is dropped
 * whole and the current ones take their place. A key used since the last turnover is moved forward, so
 * the keys dropped are always the least recently used. Idle keys also expire lazily on access, and in a
 * sweep the store runs.
 */
import { type Entry, emptyEntry } from './memory-entry.ts'

/** The keys of one prefix, in two generations. */
interface Namespace {
  readonly prefix: string
  current: Map<string, Entry>
  previous: Map<string, Entry>
}

/** Forgets an expired entry's states and block: from now on it answers as a fresh one. */
function forget(entry: Entry): void {
  entry.rule = undefined
  entry.state = undefined
  entry.ids = undefined
  entry.states = undefined
  entry.block = undefined
  entry.expiresAt = Number.NEGATIVE_INFINITY
}

/** The keys of one memory store, across its prefixes, within its `maxKeys`. */
export class Keys {
  readonly #generationSize: number
  readonly #namespaces = new Map<string, Namespace>()
  /** The namespace a call last used: calls come in runs from one limiter, so most skip a Map lookup. */
  #last: Namespace | undefined
  /** Keys in the current generations of all namespaces. */
  #currentCount = 0

  constructor(maxKeys: number) {
    this.#generationSize = Math.floor(maxKeys / 2)
  }

  /** Keys held now, across all prefixes. */
  get size(): number {
    let size = 0
    for (const ns of this.#namespaces.values()) size += ns.current.size + ns.previous.size
    return size
  }

  /**
   * The entry for `key`, created or brought forward into the current generation; reset if it expired at
   * `now`. For the acts that may count (a consume, a penalty): the one way a key is made or moved.
   */
  entry(prefix: string, key: string, now: number): Entry {
    const last = this.#last
    const ns = last !== undefined && last.prefix === prefix ? last : this.#namespace(prefix)
    const entry = ns.current.get(key) ?? this.#forward(ns, key)
    if (entry.expiresAt <= now && (entry.rule !== undefined || entry.block !== undefined)) forget(entry)
    return entry
  }

  /**
   * The entry for `key` as it stands, for a peek: never created, moved or reset, so a peek cannot push
   * other keys out. A missing or expired key reads as a fresh, unstored entry.
   */
  peek(prefix: string, key: string, now: number): Entry {
    const entry = this.find(prefix, key)
    if (entry === undefined || entry.expiresAt <= now) return emptyEntry()
    return entry
  }

  /** The entry for `key` whatever its age, or undefined: never created or moved. */
  find(prefix: string, key: string): Entry | undefined {
    const last = this.#last
    const ns = last !== undefined && last.prefix === prefix ? last : this.#namespaces.get(prefix)
    if (ns === undefined) return undefined
    return ns.current.get(key) ?? ns.previous.get(key)
  }

  /** Forgets `key` (a reset). */
  delete(prefix: string, key: string): void {
    const ns = this.#namespaces.get(prefix)
    if (ns === undefined) return
    if (ns.current.delete(key)) this.#currentCount--
    ns.previous.delete(key)
  }

  /** Drops every key expired at `now`. */
  sweep(now: number): void {
    for (const ns of this.#namespaces.values()) {
      for (const [key, entry] of ns.current) {
        if (entry.expiresAt <= now) {
          ns.current.delete(key)
          this.#currentCount--
        }
      }
      for (const [key, entry] of ns.previous) if (entry.expiresAt <= now) ns.previous.delete(key)
    }
  }

  /** Forgets every key of every prefix (the store closed). */
  clear(): void {
    this.#namespaces.clear()
    this.#last = undefined
    this.#currentCount = 0
  }

  /** A key missing from the current generation: brought forward from the previous one, or new. */
  #forward(ns: Namespace, key: string): Entry {
    let entry = ns.previous.get(key)
    if (entry === undefined) entry = emptyEntry()
    else ns.previous.delete(key)
    this.#admit(ns, key, entry)
    return entry
  }

  /** The namespace of `prefix`, created when missing; the next call's first guess. */
  #namespace(prefix: string): Namespace {
    let ns = this.#namespaces.get(prefix)
    if (ns === undefined) {
      ns = { prefix, current: new Map(), previous: new Map() }
      this.#namespaces.set(prefix, ns)
    }
    this.#last = ns
    return ns
  }

  /** Puts `entry` in the current generation, turning generations over when it is full. */
  #admit(ns: Namespace, key: string, entry: Entry): void {
    if (this.#currentCount >= this.#generationSize) {
      for (const other of this.#namespaces.values()) {
        other.previous = other.current
        other.current = new Map()
      }
      this.#currentCount = 0
    }
    ns.current.set(key, entry)
    this.#currentCount++
  }
}
