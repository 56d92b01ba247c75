/**
 * The real in-memory limit table (`createLimitTable` from @sluice/core) behind a small spy that records
 * every `set` and `delete` the dashboard asked for, accepted or not, with the `actor` it passed: the
 * handler tests assert that a refused write never reached the table, and who an accepted one names.
 */
import { createLimitTable, type LimitTable, type LimitTableEntries, type RuleSpec } from '@sluice/core'

export interface TableCall {
  method: 'set' | 'delete'
  entry: string
  rules?: unknown
  actor?: string
}

export interface SpyTable extends LimitTable {
  /** Every write the table was asked for, in order. */
  readonly calls: TableCall[]
  set(entry: string, rules: readonly RuleSpec[] | null, options?: { actor?: string }): Promise<void>
  delete(entry: string, options?: { actor?: string }): Promise<void>
}

/** Records the calls of `table`'s `set` and `delete`, then hands them on. */
export function spy(table: LimitTable): SpyTable {
  const calls: TableCall[] = []
  const actorOf = (options?: { actor?: string }) =>
    options?.actor === undefined ? {} : { actor: options.actor }
  return {
    calls,
    get: (entry) => table.get(entry),
    entries: () => table.entries(),
    get version() {
      return table.version
    },
    onChange: (listener) => table.onChange(listener),
    close: () => table.close(),
    set(entry, rules, options) {
      calls.push({ method: 'set', entry, rules, ...actorOf(options) })
      return table.set(entry, rules)
    },
    delete(entry, options) {
      calls.push({ method: 'delete', entry, ...actorOf(options) })
      return table.delete(entry)
    },
  }
}

/** The table the handler tests run against: `createLimitTable(initial)`, spied on. */
export function openTable(initial: LimitTableEntries = {}): SpyTable {
  return spy(createLimitTable(initial))
}
