/**
 * A limit table in memory for the dashboard's tests, shaped as DESIGN's `LimitTable` (get, set, delete,
 * entries, version, onChange, close) plus the audit trail and a record of every `set`/`delete` call.
 * Specs are validated by building them with core's rule factories, so a bad spec fails with the factory's
 * own coded error and nothing is written. At merge this gives way to `createLimitTable` (@sluice/core) and
 * `RedisLimitTable` (@sluice/redis): the tests take their table from `openTable` below.
 */
import {
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  type Rule,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import type { DashboardTable, RuleSpec, TableAuditRecord } from '@sluice/dashboard'

const factories: Record<string, (options: never) => unknown> = {
  fixedWindow,
  slidingLog,
  slidingWindow,
  tokenBucket,
  leakyBucket,
}

type Specs = readonly RuleSpec[] | null

export class MemoryTable implements DashboardTable {
  #version = 0
  readonly #entries = new Map<string, Specs>()
  readonly #rules = new Map<string, readonly Rule[] | null>()
  readonly #audit: TableAuditRecord[] = []
  readonly #listeners = new Set<(entry: string, version: number) => void>()
  /** Every write the table was asked for, accepted or not. */
  readonly calls: { method: 'set' | 'delete'; entry: string; rules?: unknown; actor?: string }[] = []

  constructor(initial: Record<string, RuleSpec[] | null> = {}) {
    for (const [entry, specs] of Object.entries(initial)) {
      this.#rules.set(entry, build(specs))
      this.#entries.set(entry, specs)
    }
  }

  get version(): number {
    return this.#version
  }

  get(entry: string): readonly Rule[] | null {
    if (this.#rules.has(entry)) return this.#rules.get(entry)!
    return this.#rules.get('*') ?? null
  }

  entries(): ReadonlyMap<string, Specs> {
    return new Map(this.#entries)
  }

  async set(
    entry: string,
    rules: readonly RuleSpec[] | null,
    options: { actor?: string } = {},
  ): Promise<void> {
    this.calls.push({
      method: 'set',
      entry,
      rules,
      ...(options.actor === undefined ? {} : { actor: options.actor }),
    })
    const built = build(rules)
    this.#change(entry, rules === null ? null : rules.map((r) => ({ ...r })), built, options.actor)
  }

  async delete(entry: string, options: { actor?: string } = {}): Promise<void> {
    this.calls.push({
      method: 'delete',
      entry,
      ...(options.actor === undefined ? {} : { actor: options.actor }),
    })
    if (!this.#entries.has(entry)) return
    this.#change(entry, undefined, undefined, options.actor)
  }

  audit(count: number): TableAuditRecord[] {
    return this.#audit.slice(-count).reverse()
  }

  onChange(listener: (entry: string, version: number) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async close(): Promise<void> {
    this.#listeners.clear()
  }

  #change(
    entry: string,
    specs: Specs | undefined,
    rules: readonly Rule[] | null | undefined,
    actor?: string,
  ) {
    const before = this.#entries.get(entry)
    if (specs === undefined) {
      this.#entries.delete(entry)
      this.#rules.delete(entry)
    } else {
      this.#entries.set(entry, specs)
      this.#rules.set(entry, rules ?? null)
    }
    this.#version++
    this.#audit.push({
      at: Date.now(),
      entry,
      before,
      after: specs,
      ...(actor === undefined ? {} : { actor }),
    })
    for (const listener of this.#listeners) listener(entry, this.#version)
  }
}

/** Builds specs with the factories: throws their coded errors; unknown kinds and duplicates throw too. */
function build(specs: readonly RuleSpec[] | null): readonly Rule[] | null {
  if (specs === null) return null
  const rules: Rule[] = []
  const ids = new Set<string>()
  specs.forEach((spec, i) => {
    const { kind, ...options } = spec
    const factory = factories[kind]
    if (factory === undefined) {
      throw new InvalidOptionError(`rules[${i}].kind`, kind, `one of ${Object.keys(factories).join(', ')}`)
    }
    const rule = factory(options as never) as Rule | { kind: 'unlimited' }
    if (rule.kind === 'unlimited') return
    if (ids.has(rule.id)) throw new InvalidOptionError(`rules[${i}]`, spec, 'rules that do not share a state')
    ids.add(rule.id)
    rules.push(rule)
  })
  return rules
}

/** The table the tests run against. */
export function openTable(initial: Record<string, RuleSpec[] | null> = {}): MemoryTable {
  return new MemoryTable(initial)
}
