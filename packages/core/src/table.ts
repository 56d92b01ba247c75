/**
 * @module Limit tables: entry names (say `"PAYMENT:ALIPAY"`) mapped to rules, changed at run time, read by
 * a limiter per call with `rules: (key) => table.get(entryOf(key))`.
 *
 * `createLimitTable` keeps one in this process. The pieces every table shares live here too, so the Redis
 * table (`@sluice/redis`) checks entries with the same words and codes, and serves `get` from the same
 * local state: entry names are checked by `checkEntryName`, values by `parseEntry` (everything is checked
 * before anything is written), and `TableState` holds the entries, the version and the listeners.
 *
 * Because a rule's state is keyed by its identity (kind, shape and name, not its limit), an edit that only
 * changes a limit keeps the counts: the new limit judges what the old one counted.
 */
import {
  DuplicateRuleError,
  describe,
  ErrorCode,
  InvalidOptionError,
  InvalidSpecError,
  SluiceError,
} from './errors.ts'
import { isFactoryRule } from './rules/index.ts'
import { type RuleSpec, ruleFromSpec } from './rules/spec.ts'
import { parseRuleSpec } from './rules/text.ts'
import { isUnlimited, type RuleInput } from './rules/unlimited.ts'
import type { Rule } from './types.ts'

/**
 * Entry names mapped to rules, changed at run time. A missing entry falls to the default entry `"*"` when
 * the table has one; an entry set to `null` (or to rules that are all `limit: -1`) is not limited, even
 * when `"*"` exists.
 */
export interface LimitTable {
  /** The entry's rules; null: not limited (missing entries fall to `"*"`, else null). Synchronous, never throws. */
  get(entry: string): readonly Rule[] | null
  /**
   * Sets an entry to rules (built by the factories, specs such as `{ kind: 'slidingLog', limit: 5,
   * windowMs: 1000 }`, or rule text such as `'slidingLog:5/1s'`) or to `null` (not limited). Everything is checked before anything is written: a bad
   * entry name, a spec a factory rejects, two rules sharing a state identity or a bound passed rejects with
   * a coded error and changes nothing.
   */
  set(entry: string, rules: readonly (Rule | RuleSpec | string)[] | null): Promise<void>
  /** Removes an entry (it then falls to `"*"`). Removing an entry the table does not hold changes nothing. */
  delete(entry: string): Promise<void>
  /** Every entry the table holds, with its rules or null, as a new map. */
  entries(): ReadonlyMap<string, readonly Rule[] | null>
  /** Rises by one with each change; 0 for a table never changed. */
  readonly version: number
  /**
   * Calls `listener(entry, version)` after each change is applied (before `set` or `delete` resolves).
   * A listener that throws is reported as a process warning and breaks nothing. Returns the unsubscribe.
   */
  onChange(listener: (entry: string, version: number) => void): () => void
  /** Stops changes: later `set` and `delete` reject with `ERR_SLUICE_TABLE_CLOSED`; `get` keeps answering. */
  close(): Promise<void>
}

/** A table's entries as `createLimitTable` takes them: entry name -> rules, specs or rule texts, or null. */
export type LimitTableEntries = Readonly<Record<string, readonly (Rule | RuleSpec | string)[] | null>>

/** The bounds every limit table keeps, in memory and in Redis. */
export const TABLE_BOUNDS = {
  /** Most characters (UTF-16 code units) of an entry name. */
  entryLength: 256,
  /** Most rules in one entry. */
  rulesPerEntry: 16,
  /** Most entries in one table. */
  entries: 10_000,
  /** Most characters of an entry's stored JSON (checked when reading a table back). */
  entryJson: 16_384,
} as const

/** The default entry: what a missing entry falls to. */
export const DEFAULT_ENTRY = '*'

/** Control and format characters, line and paragraph separators, lone surrogates. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u

/**
 * An entry name: a string of 1 to 256 characters without control or format characters (bidi overrides,
 * zero-width ones), line separators or lone surrogates, so a name shows as itself wherever it is printed.
 * Throws `ERR_SLUICE_INVALID_ENTRY`.
 */
export function checkEntryName(entry: unknown): string {
  if (
    typeof entry !== 'string' ||
    entry.length === 0 ||
    entry.length > TABLE_BOUNDS.entryLength ||
    UNSAFE.test(entry)
  ) {
    throw new SluiceError(
      ErrorCode.INVALID_ENTRY,
      `Invalid limit table entry ${describe(entry)}: expected 1 to ${TABLE_BOUNDS.entryLength} characters ` +
        'without control or format characters, line separators or lone surrogates.',
    )
  }
  return entry
}

/** One entry's value, checked: its limiting rules (null: not limited) and its stored JSON. */
export interface ParsedEntry {
  /** The limiting rules, frozen; null when none limits (null, an empty list, or only `limit: -1`). */
  readonly rules: readonly Rule[] | null
  /** The value as stored and shown: the JSON of `rules` (each rule's spec), or `"null"`. */
  readonly json: string
}

const NOT_LIMITED: ParsedEntry = Object.freeze({ rules: null, json: 'null' })

/**
 * Checks an entry's value: `null`, or a list of at most 16 rules, specs or rule texts (`'slidingLog:100/1s'`,
 * read by `parseRuleSpec`). Specs are built by their
 * factories (`InvalidOptionError`, `InvalidSpecError`); two rules sharing a state identity throw
 * `DuplicateRuleError`; too many rules throw `ERR_SLUICE_TABLE_TOO_LARGE`. Unlimited markers are dropped.
 */
export function parseEntry(entry: string, value: unknown): ParsedEntry {
  if (value === null) return NOT_LIMITED
  if (!Array.isArray(value)) {
    throw new InvalidSpecError(value, `a list of rules or specs for entry ${describe(entry)}, or null`)
  }
  if (value.length > TABLE_BOUNDS.rulesPerEntry) {
    throw new SluiceError(
      ErrorCode.TABLE_TOO_LARGE,
      `Limit table entry ${describe(entry)} has ${value.length} rules; at most ${TABLE_BOUNDS.rulesPerEntry}.`,
    )
  }
  const rules: Rule[] = []
  for (const item of value as unknown[]) {
    const rule: RuleInput =
      typeof item === 'string'
        ? parseRuleSpec(item)
        : isFactoryRule(item)
          ? item
          : ruleFromSpec(item as RuleSpec)
    if (isUnlimited(rule)) continue
    for (const other of rules) {
      if (other.id === rule.id) {
        throw new DuplicateRuleError(`limit table entry ${describe(entry)}`, rule.id, other.name, rule.name)
      }
    }
    rules.push(rule)
  }
  if (rules.length === 0) return NOT_LIMITED
  return Object.freeze({ rules: Object.freeze(rules), json: JSON.stringify(rules) })
}

/** An entry's value read back from its stored JSON, checked as `parseEntry` checks it. */
export function parseEntryJson(entry: string, json: string): ParsedEntry {
  if (json.length > TABLE_BOUNDS.entryJson) {
    throw new SluiceError(
      ErrorCode.TABLE_TOO_LARGE,
      `Limit table entry ${describe(entry)} is ${json.length} characters; at most ${TABLE_BOUNDS.entryJson}.`,
    )
  }
  let value: unknown
  try {
    value = JSON.parse(json)
  } catch {
    throw new InvalidSpecError(json, `JSON for entry ${describe(entry)}`)
  }
  return parseEntry(entry, value)
}

/** The error for a table that would hold more entries than `TABLE_BOUNDS.entries`. */
export function tooManyEntries(entries: number): SluiceError {
  return new SluiceError(
    ErrorCode.TABLE_TOO_LARGE,
    `A limit table holds at most ${TABLE_BOUNDS.entries} entries; this change would make ${entries}.`,
  )
}

/** A table's local state: entries, version, listeners. `get` and `entries` of every table read it. */
export class TableState {
  #entries = new Map<string, ParsedEntry>()
  /** The `"*"` entry, kept beside the map: a key without an entry of its own costs one lookup, not two. */
  #fallback: ParsedEntry | undefined
  #version = 0
  readonly #listeners = new Set<(entry: string, version: number) => void>()

  get version(): number {
    return this.#version
  }

  get size(): number {
    return this.#entries.size
  }

  has(entry: string): boolean {
    return this.#entries.has(entry)
  }

  /** The entry's value as stored, or undefined when the table does not hold it. */
  parsed(entry: string): ParsedEntry | undefined {
    return this.#entries.get(entry)
  }

  get(entry: string): readonly Rule[] | null {
    const found = this.#entries.get(entry) ?? this.#fallback
    return found === undefined ? null : found.rules
  }

  entries(): Map<string, readonly Rule[] | null> {
    const out = new Map<string, readonly Rule[] | null>()
    for (const [entry, parsed] of this.#entries) out.set(entry, parsed.rules)
    return out
  }

  /** Every entry with its stored JSON. */
  snapshot(): Map<string, ParsedEntry> {
    return new Map(this.#entries)
  }

  /** Applies one change (`undefined`: the entry is removed) at `version`, then tells the listeners. */
  apply(entry: string, value: ParsedEntry | undefined, version: number): void {
    if (value === undefined) this.#entries.delete(entry)
    else this.#entries.set(entry, value)
    this.#fallback = this.#entries.get(DEFAULT_ENTRY)
    this.#version = version
    this.#notify(entry, version)
  }

  /** Takes a whole table at `version`, telling the listeners of each entry that changed. */
  replace(entries: Map<string, ParsedEntry>, version: number): void {
    const before = this.#entries
    this.#entries = entries
    this.#fallback = entries.get(DEFAULT_ENTRY)
    this.#version = version
    for (const [entry, parsed] of entries) {
      if (before.get(entry)?.json !== parsed.json) this.#notify(entry, version)
    }
    for (const entry of before.keys()) if (!entries.has(entry)) this.#notify(entry, version)
  }

  onChange(listener: (entry: string, version: number) => void): () => void {
    if (typeof listener !== 'function') {
      throw new InvalidOptionError('onChange', listener, 'a function')
    }
    // A wrapper per subscription, so subscribing one function twice gives two independent subscriptions.
    const entry = (name: string, version: number) => listener(name, version)
    this.#listeners.add(entry)
    return () => {
      this.#listeners.delete(entry)
    }
  }

  clearListeners(): void {
    this.#listeners.clear()
  }

  #notify(entry: string, version: number): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(entry, version)
      } catch (error) {
        process.emitWarning(
          `A limit table change listener threw (entry ${describe(entry)}, version ${version}): ${String(error)}`,
          { code: 'SLUICE_TABLE_LISTENER' },
        )
      }
    }
  }
}

function closedError(): SluiceError {
  return new SluiceError(ErrorCode.TABLE_CLOSED, 'The limit table is closed.')
}

/**
 * A limit table in this process's memory, at version 0, holding `initial` (checked as `set` checks,
 * throwing at once). A limiter reads it per call:
 *
 * ```ts
 * const table = createLimitTable({ 'PAYMENT:ALIPAY': [{ kind: 'slidingLog', limit: 100, windowMs: 1000 }] })
 * const limiter = createLimiter({ rules: (key) => table.get(key) })
 * await table.set('PAYMENT:ALIPAY', [slidingLog({ limit: 50, windowMs: 1000 })]) // keeps the counts
 * ```
 */
export function createLimitTable(initial?: LimitTableEntries): LimitTable {
  const state = new TableState()
  if (initial !== undefined && (initial === null || typeof initial !== 'object' || Array.isArray(initial))) {
    throw new InvalidOptionError(
      'createLimitTable',
      initial,
      'an object of entry name -> rules, specs or null',
    )
  }
  const names = initial === undefined ? [] : Object.keys(initial)
  if (names.length > TABLE_BOUNDS.entries) throw tooManyEntries(names.length)
  const loaded = new Map<string, ParsedEntry>()
  for (const name of names) {
    loaded.set(checkEntryName(name), parseEntry(name, (initial as Record<string, unknown>)[name]))
  }
  state.replace(loaded, 0)
  let closed = false

  const table: Omit<LimitTable, 'version'> = {
    get: (entry) => state.get(entry),
    entries: () => state.entries(),
    onChange: (listener) => state.onChange(listener),

    async set(entry, rules) {
      if (closed) throw closedError()
      const name = checkEntryName(entry)
      const parsed = parseEntry(name, rules)
      if (!state.has(name) && state.size >= TABLE_BOUNDS.entries) throw tooManyEntries(state.size + 1)
      state.apply(name, parsed, state.version + 1)
    },

    async delete(entry) {
      if (closed) throw closedError()
      const name = checkEntryName(entry)
      if (state.has(name)) state.apply(name, undefined, state.version + 1)
    },

    async close() {
      closed = true
      state.clearListeners()
    },
  }
  // Defined, not written as a getter in the literal: V8 makes an object literal with an accessor in
  // dictionary mode, and then every `table.get` a rules function reads is a full property lookup.
  return Object.defineProperty(table, 'version', {
    get: () => state.version,
    enumerable: true,
    configurable: true,
  }) as LimitTable
}
