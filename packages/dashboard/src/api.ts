/**
 * @module The JSON API's data: stats read from Redis (and the local `liveStats`) and combined, tables as
 * plain JSON, and table edits. Nothing here knows about HTTP beyond the status an error maps to.
 */
import type { IncomingMessage } from 'node:http'
import type { RuleSpec } from '@sluice/core'
import { readPublishedStats } from '@sluice/metrics'
import { type DashboardConfig, DashboardErrorCode, type TableAuditRecord } from './options.ts'
import { combineSnapshots, type InstanceSnapshot, type StatsView } from './stats.ts'

/**
 * A refusal with a stable `code` and the HTTP status the API answers it with (`{ code, message }`).
 * `startDashboard` rejects with one too when Redis cannot be reached.
 */
export class DashboardError extends Error {
  readonly status: number
  readonly code: string
  constructor(status: number, code: string, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'DashboardError'
    this.status = status
    this.code = code
  }
}

export interface StatsAnswer extends StatsView {
  /** Set when Redis could not be read: the page says so and shows what it has. */
  redisError?: { code: string; message: string }
  /**
   * Instances whose published value was skipped (past the bounds of published stats, or not a snapshot),
   * with why; absent when none was. The others are shown as usual.
   */
  skipped?: SkippedInstance[]
}

/** An instance whose published value the dashboard did not use, and why. */
export interface SkippedInstance {
  instance: string
  reason: string
}

/** One read of the published stats: the snapshots used, and the instances skipped. */
interface PublishedRead {
  snapshots: InstanceSnapshot[]
  skipped: SkippedInstance[]
}

/** Published stats are read at most this often, however many pages poll. */
const READ_EVERY_MS = 500

export interface TableSummary {
  name: string
  version: number
  entries: number
}

export interface TableEntryView {
  entry: string
  /** Specs, or `null` for not limited. */
  rules: unknown[] | null
}

export interface TableView {
  name: string
  version: number
  /** Sorted by entry name, `"*"` first. */
  entries: TableEntryView[]
  /** Newest first; empty when the table keeps no trail, or when it could not be read. */
  audit: TableAuditRecord[]
  /** Set when the trail could not be read (Redis away): the entries are still the table's own. */
  auditError?: { code: string; message: string }
}

export class DashboardApi<Request extends IncomingMessage> {
  readonly #config: DashboardConfig<Request>
  #read: { at: number; promise: Promise<PublishedRead> } | undefined
  /** The instances skipped at the last read, by name, with why: each is warned about once while skipped. */
  #warned = new Map<string, string>()

  constructor(config: DashboardConfig<Request>) {
    this.#config = config
  }

  async stats(since: number | undefined): Promise<StatsAnswer> {
    const config = this.#config
    const snapshots: InstanceSnapshot[] = []
    let redisError: StatsAnswer['redisError']
    let skipped: SkippedInstance[] = []
    if (config.client !== undefined) {
      try {
        const read = await this.#published()
        snapshots.push(...read.snapshots)
        skipped = read.skipped
      } catch (error) {
        redisError = { code: DashboardErrorCode.UNAVAILABLE, message: `Redis: ${messageOf(error)}` }
      }
    }
    if (config.stats !== undefined) {
      snapshots.push({ ...config.stats.snapshot(), instance: config.instance, meta: this.#localMeta() })
    }
    const view: StatsAnswer = combineSnapshots(snapshots, config.clock(), {
      maxSeconds: config.seconds,
      topKeys: config.topKeys,
      ...(since === undefined ? {} : { since }),
    })
    if (redisError !== undefined) view.redisError = redisError
    if (skipped.length > 0) view.skipped = skipped
    return view
  }

  /** The latest read, or a new one when it is older than READ_EVERY_MS; a failed read is not kept. */
  #published(): Promise<PublishedRead> {
    const now = this.#config.clock()
    const last = this.#read
    if (last !== undefined && now - last.at < READ_EVERY_MS && now >= last.at) return last.promise
    const skipped: SkippedInstance[] = []
    const promise = readPublishedStats({
      client: this.#config.client!,
      ...(this.#config.statsPrefix === undefined ? {} : { prefix: this.#config.statsPrefix }),
      onSkip: (instance, reason) => skipped.push({ instance, reason }),
    }).then((snapshots) => {
      this.#warnSkipped(skipped)
      return { snapshots, skipped }
    })
    const read = { at: now, promise }
    this.#read = read
    promise.catch(() => {
      if (this.#read === read) this.#read = undefined
    })
    return promise
  }

  /**
   * Warns once per instance newly skipped (or skipped for another reason); one no longer skipped is
   * forgotten, so the map holds at most one read's instances.
   */
  #warnSkipped(skipped: readonly SkippedInstance[]): void {
    const now = new Map<string, string>()
    for (const { instance, reason } of skipped) {
      now.set(instance, reason)
      if (this.#warned.get(instance) === reason) continue
      process.emitWarning(
        `sluice dashboard: skipped the published stats of ${JSON.stringify(instance)}: ${reason}; the other instances are shown.`,
        { code: 'SLUICE_STATS_SKIPPED' },
      )
    }
    this.#warned = now
  }

  /** The local instance publishes its tables' versions, as a published process would. */
  #localMeta(): Record<string, unknown> {
    const tables = this.#config.tables
    if (tables.size === 0) return {}
    if (tables.size === 1) return { tableVersion: [...tables.values()][0]!.version }
    return { tableVersions: Object.fromEntries([...tables].map(([name, t]) => [name, t.version])) }
  }

  tables(): { tables: TableSummary[] } {
    return {
      tables: [...this.#config.tables].map(([name, table]) => ({
        name,
        version: table.version,
        entries: table.entries().size,
      })),
    }
  }

  async table(name: string): Promise<TableView> {
    const table = this.#table(name)
    const entries: TableEntryView[] = []
    for (const [entry, rules] of table.entries()) entries.push({ entry, rules: asJson(rules) })
    entries.sort((a, b) => (a.entry === '*' ? -1 : b.entry === '*' ? 1 : a.entry < b.entry ? -1 : 1))
    let audit: TableAuditRecord[] = []
    if (typeof table.audit === 'function' && this.#config.auditCount > 0) {
      try {
        const records = await table.audit(this.#config.auditCount)
        audit = records.slice(0, this.#config.auditCount).map((r) => ({
          version: r.version,
          time: r.time,
          change: r.change,
          entry: r.entry,
          // An entry that did not exist (before a first set, after a delete) stays absent.
          ...(r.before === undefined ? {} : { before: asJson(r.before) }),
          ...(r.after === undefined ? {} : { after: asJson(r.after) }),
          actor: r.actor,
        }))
      } catch (error) {
        // The trail is in Redis; the entries are the table's own copy, served while Redis is away.
        return {
          name,
          version: table.version,
          entries,
          audit,
          auditError: { code: codeOf(error), message: messageOf(error) },
        }
      }
    }
    return { name, version: table.version, entries, audit }
  }

  /** Sets an entry (after the caller validated the body's shape) and answers the entry as now read back. */
  async set(
    name: string,
    entry: string,
    rules: RuleSpec[] | null,
    actor: string,
  ): Promise<{ table: string; version: number; entry: string; rules: unknown[] | null }> {
    const table = this.#table(name)
    try {
      await table.set(entry, rules, { actor })
    } catch (error) {
      throw refusal(error)
    }
    const now = table.entries().get(entry)
    return { table: name, version: table.version, entry, rules: now === undefined ? null : asJson(now) }
  }

  async delete(name: string, entry: string, actor: string): Promise<{ table: string; version: number }> {
    const table = this.#table(name)
    try {
      await table.delete(entry, { actor })
    } catch (error) {
      throw refusal(error)
    }
    return { table: name, version: table.version }
  }

  #table(name: string) {
    const table = this.#config.tables.get(name)
    if (table === undefined) throw new DashboardError(404, DashboardErrorCode.NOT_FOUND, 'No such table.')
    return table
  }
}

/** Codes that tell a store failure rather than a bad request. */
const STORE_CODES = new Set(['ERR_SLUICE_STORE', 'ERR_SLUICE_STORE_TIMEOUT'])

/** A table's refusal: its coded validation errors answer 400; a store failure 503; anything else 500. */
function refusal(error: unknown): DashboardError {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code.startsWith('ERR_SLUICE_')) {
    return new DashboardError(STORE_CODES.has(code) ? 503 : 400, code, messageOf(error))
  }
  return unavailable(error)
}

function unavailable(error: unknown): DashboardError {
  return new DashboardError(500, DashboardErrorCode.UNAVAILABLE, messageOf(error))
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('ERR_SLUICE_') ? code : DashboardErrorCode.UNAVAILABLE
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/** A rule list (or anything) as the JSON it renders to; a value that does not serialise shows as null. */
function asJson(value: unknown): null | unknown[] {
  if (value === undefined || value === null) return null
  try {
    return JSON.parse(JSON.stringify(value)) as unknown[]
  } catch {
    return null
  }
}
