/**
 * @module RedisLimitTable: a limit table kept in Redis and followed by every process that opens it.
 *
 * Layout, all under one hash tag so every script runs on Redis Cluster: `<prefix>:table:{<name>}` is a
 * hash of entry -> spec JSON, `…:version` the table's version, `…:audit` a capped stream of changes.
 * Entry names are hash fields, never part of a key. A change is one script (table-write.lua): it checks the
 * bounds, writes the entry, raises the version, appends to the audit stream and publishes the change.
 *
 * Each process serves `get` from a local copy (core's `TableState`), so `get` is synchronous and never
 * throws, and keeps serving the last table it had while Redis is away. It follows changes through pub/sub
 * (a duplicate connection), applies a change whose version is the next one, and reads the whole table
 * again when a version was skipped, when its subscriber reconnects, and when a check of the version (every
 * `checkMs`) finds it moved. It never adopts a table older than the one it holds: when Redis is behind
 * (it restarted without its data), the process warns, keeps serving its table and writes it back.
 */
import { hostname } from 'node:os'
import {
  ErrorCode,
  InvalidOptionError,
  type LimitTable,
  type Rule,
  type RuleSpec,
  SluiceError,
  StoreError,
} from '@sluice/core'
import {
  checkEntryName,
  integerOption,
  type ParsedEntry,
  parseEntry,
  parseEntryJson,
  prefixOption,
  readOptions,
  TABLE_BOUNDS,
  TableState,
  tooManyEntries,
} from '@sluice/core/store'
import type { RedisClientLike } from './redis-store.ts'
import { type Script, type ScriptRunner, script, scriptRunnerFor } from './script-runner.ts'
import { TABLE_RESTORE_LUA, TABLE_WRITE_LUA } from './scripts.generated.ts'

export interface RedisLimitTableOptions {
  /**
   * The Redis client (ioredis `Redis`/`Cluster`, node-redis client/cluster), connected. Yours: `close()`
   * leaves it open. The table makes one more connection of its own, `client.duplicate()`, to follow
   * changes (pub/sub), and closes that one.
   */
  client: RedisClientLike
  /** The table's name: 1 to 128 printable ASCII characters without spaces, quotes, backslashes or braces. */
  name: string
  /** Namespace of the table's keys, `<prefix>:table:{<name>}…`, as `RedisStore`'s. Default `"sluice"`. */
  prefix?: string
  /** Longest wait for Redis per command, in ms; then `StoreError` `ERR_SLUICE_STORE_TIMEOUT`. Default 2000. */
  timeoutMs?: number
  /**
   * How often the process checks the table's version, in ms, besides following pub/sub: a missed
   * notice is caught within it. 0 turns the check off. Default 1000.
   */
  checkMs?: number
  /** Changes kept in the audit stream (approximately: `XADD MAXLEN ~`). Default 1000. */
  auditLength?: number
  /**
   * Follow changes made by other processes (pub/sub and the version check). Default true; a one-shot
   * tool (the `sluice` command) that reads or writes once passes false.
   */
  follow?: boolean
}

/** Options of one change. */
export interface LimitTableChangeOptions {
  /** Who made the change, for the audit stream: 1 to 128 characters. Default `"<pid>@<hostname>"`. */
  actor?: string
}

/** One change, as the audit stream keeps it. */
export interface LimitTableAuditRecord {
  /** The stream entry's id. */
  readonly id: string
  /** The table's version after the change. */
  readonly version: number
  /** When it was made, in ms since the epoch, by Redis's clock. */
  readonly time: number
  /** `set`, `delete`, or `restore` (a process wrote the table back into a Redis that had lost it). */
  readonly change: 'set' | 'delete' | 'restore'
  /** The entry changed; `""` for a restore. */
  readonly entry: string
  /** The entry's specs before (null: not limited); undefined when the table did not hold it. */
  readonly before?: readonly RuleSpec[] | null
  /** The entry's specs after (null: not limited); undefined when it was deleted. */
  readonly after?: readonly RuleSpec[] | null
  readonly actor: string
}

const KNOWN_OPTIONS = ['client', 'name', 'prefix', 'timeoutMs', 'checkMs', 'auditLength', 'follow']
const STORE_PREFIX = /^[\x21-\x7e]{1,128}$/
const MAX_ACTOR = 128

const WRITE = script(TABLE_WRITE_LUA)
const RESTORE = script(TABLE_RESTORE_LUA)
const LOAD = script(
  "local v = redis.call('GET', KEYS[2]) or '0'\nreturn { v, redis.call('HGETALL', KEYS[1]) }",
)
const VERSION = script("return redis.call('GET', KEYS[1]) or '0'")
const AUDIT = script("return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])")

/** The subscriber connection, whichever library made it. */
interface Subscriber {
  close(): void
}

/** A limit table in Redis. Open it with `RedisLimitTable.open`. */
export class RedisLimitTable implements LimitTable {
  /** The table's name. */
  readonly name: string
  readonly #runner: ScriptRunner
  readonly #keys: readonly [string, string, string]
  readonly #channel: string
  readonly #timeoutMs: number
  readonly #checkMs: number
  readonly #auditLength: number
  readonly #state = new TableState()
  /** The highest version seen anywhere: the local one, Redis's, any notice's. */
  #highest = 0
  #subscriber: Subscriber | undefined
  #timer: NodeJS.Timeout | undefined
  #reading: Promise<void> | undefined
  #readAgain = false
  /** True while Redis is known to be behind this process (warned once per episode). */
  #behind = false
  #closed = false

  private constructor(options: RedisLimitTableOptions) {
    const o = readOptions('RedisLimitTable', options, KNOWN_OPTIONS, true)
    this.#runner = scriptRunnerFor(o.client, 'RedisLimitTable.client')
    this.name = prefixOption('RedisLimitTable.name', o.name)
    const prefix = o.prefix === undefined ? 'sluice' : o.prefix
    if (typeof prefix !== 'string' || !STORE_PREFIX.test(prefix) || /["'\\{}:]/.test(prefix)) {
      throw new InvalidOptionError(
        'RedisLimitTable.prefix',
        prefix,
        '1 to 128 printable ASCII characters without spaces, quotes, backslashes, braces or colons',
      )
    }
    this.#timeoutMs = integerOption('RedisLimitTable.timeoutMs', o.timeoutMs ?? 2000, 1, 600_000)
    this.#checkMs = integerOption('RedisLimitTable.checkMs', o.checkMs ?? 1000, 0, 3_600_000)
    this.#auditLength = integerOption('RedisLimitTable.auditLength', o.auditLength ?? 1000, 1, 1_000_000)
    const base = `${prefix}:table:{${this.name}}`
    this.#keys = [base, `${base}:version`, `${base}:audit`]
    this.#channel = `${base}:changes`
  }

  /**
   * Opens the table `name` in Redis: checks the options (`InvalidOptionError`), reads the table (rejects
   * with `StoreError` when Redis cannot be reached), and, unless `follow` is false, subscribes to its
   * changes and starts the version check. A table never written is empty, at version 0.
   */
  static async open(options: RedisLimitTableOptions): Promise<RedisLimitTable> {
    const table = new RedisLimitTable(options)
    const follow = options.follow === undefined ? true : options.follow
    if (typeof follow !== 'boolean') {
      throw new InvalidOptionError('RedisLimitTable.follow', follow, 'true or false')
    }
    await table.#read()
    if (follow) {
      try {
        table.#subscriber = await subscribe(options.client, table.#channel, table.#timeoutMs, {
          message: (text) => table.#onNotice(text),
          reconnected: () => table.#refresh(),
        })
      } catch (error) {
        throw storeError(error)
      }
      // Changes made between the first read and the subscription.
      await table.#read()
      table.#schedule()
    }
    return table
  }

  get version(): number {
    return this.#state.version
  }

  get(entry: string): readonly Rule[] | null {
    return this.#state.get(entry)
  }

  entries(): ReadonlyMap<string, readonly Rule[] | null> {
    return this.#state.entries()
  }

  onChange(listener: (entry: string, version: number) => void): () => void {
    return this.#state.onChange(listener)
  }

  /**
   * Sets an entry, checked before anything is written (as `createLimitTable` checks it; and the table may
   * hold at most 10,000 entries). Resolves once the change is in Redis and applied here, listeners told.
   * Rejects with `StoreError` when Redis cannot be reached (the change may still land if Redis got it).
   */
  async set(
    entry: string,
    rules: readonly (Rule | RuleSpec | string)[] | null,
    options?: LimitTableChangeOptions,
  ): Promise<void> {
    this.#open()
    const name = checkEntryName(entry)
    const parsed = parseEntry(name, rules)
    const actor = actorOf(options)
    if (!this.#state.has(name) && this.#state.size >= TABLE_BOUNDS.entries) {
      throw tooManyEntries(this.#state.size + 1)
    }
    await this.#write(name, parsed, actor)
  }

  /** Removes an entry (it then falls to `"*"`). Removing an entry the table does not hold changes nothing. */
  async delete(entry: string, options?: LimitTableChangeOptions): Promise<void> {
    this.#open()
    const name = checkEntryName(entry)
    await this.#write(name, undefined, actorOf(options))
  }

  /** The last `count` changes (1 to 1000, default 100), newest first. */
  async audit(count = 100): Promise<LimitTableAuditRecord[]> {
    const n = integerOption('RedisLimitTable.audit.count', count, 1, 1000)
    const reply = await this.#run(AUDIT, [this.#keys[2]], [String(n)])
    if (!Array.isArray(reply)) throw unexpected()
    return reply.map(auditRecord)
  }

  /** Stops following changes and closes the table's own connection; the client stays open. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearTimeout(this.#timer)
    this.#state.clearListeners()
    this.#subscriber?.close()
    this.#subscriber = undefined
  }

  #open(): void {
    if (this.#closed)
      throw new SluiceError(ErrorCode.TABLE_CLOSED, `The limit table "${this.name}" is closed.`)
  }

  async #write(entry: string, parsed: ParsedEntry | undefined, actor: string): Promise<void> {
    const reply = await this.#run(WRITE, this.#keys, [
      entry,
      parsed === undefined ? '' : parsed.json,
      actor,
      String(this.#highest),
      String(this.#auditLength),
      this.#channel,
      String(TABLE_BOUNDS.entries),
      String(TABLE_BOUNDS.entryJson),
    ])
    const [version, changed] = pair(reply)
    if (version === -1) throw tooManyEntries(TABLE_BOUNDS.entries + 1)
    if (version === -2) {
      throw new SluiceError(ErrorCode.TABLE_TOO_LARGE, `Limit table entry ${describe(entry)} is too large.`)
    }
    if (version > this.#highest) this.#highest = version
    if (changed === 0) {
      if (version > this.#state.version) await this.#read()
      return
    }
    if (version === this.#state.version + 1) this.#state.apply(entry, parsed, version)
    else await this.#read()
  }

  /** A notice from pub/sub: `<version>\n<entry>\n<spec JSON, or '' when deleted>`; an empty entry: read all. */
  #onNotice(text: string): void {
    if (this.#closed) return
    const first = text.indexOf('\n')
    const second = text.indexOf('\n', first + 1)
    const version = Number(text.slice(0, first))
    if (first < 0 || second < 0 || !Number.isSafeInteger(version)) {
      this.#refresh()
      return
    }
    if (version > this.#highest) this.#highest = version
    if (version <= this.#state.version) return
    const entry = text.slice(first + 1, second)
    const after = text.slice(second + 1)
    let parsed: ParsedEntry | undefined
    try {
      if (version !== this.#state.version + 1 || entry === '') throw new Error('read the whole table')
      parsed = after === '' ? undefined : parseEntryJson(checkEntryName(entry), after)
    } catch {
      this.#refresh()
      return
    }
    this.#state.apply(entry, parsed, version)
  }

  /** Reads the table again in the background; failures wait for the next check. */
  #refresh(): void {
    if (this.#closed) return
    this.#read().catch(() => {})
  }

  /** Reads the whole table, one read at a time (a read asked for meanwhile runs once more after it). */
  #read(): Promise<void> {
    if (this.#reading !== undefined) {
      this.#readAgain = true
      return this.#reading
    }
    const reading = (async () => {
      try {
        do {
          this.#readAgain = false
          await this.#readOnce()
        } while (this.#readAgain && !this.#closed)
      } finally {
        this.#reading = undefined
      }
    })()
    this.#reading = reading
    return reading
  }

  async #readOnce(): Promise<void> {
    const reply = await this.#run(LOAD, this.#keys.slice(0, 2), [])
    if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1])) throw unexpected()
    const version = Number(reply[0])
    if (!Number.isSafeInteger(version)) throw unexpected()
    if (version > this.#highest) this.#highest = version
    const held = this.#state.version
    if (version < held) return this.#restore(version)
    this.#behind = false
    if (version === held) return
    const flat = reply[1] as unknown[]
    const entries = new Map<string, ParsedEntry>()
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const entry = String(flat[i])
      try {
        entries.set(checkEntryName(entry), parseEntryJson(entry, String(flat[i + 1])))
      } catch (error) {
        // Written around sluice (by hand); the rest of the table still applies.
        process.emitWarning(
          `Limit table "${this.name}" holds an entry ${describe(entry)} sluice cannot read; it is left out: ${String(error)}`,
          { code: 'SLUICE_TABLE_ENTRY' },
        )
      }
    }
    this.#state.replace(entries, version)
  }

  /** Redis is behind this process: warn once, keep serving, and write the table back. */
  async #restore(stored: number): Promise<void> {
    const held = this.#state.version
    if (!this.#behind) {
      this.#behind = true
      process.emitWarning(
        `Limit table "${this.name}" in Redis is at version ${stored}, behind version ${held} held by this ` +
          'process (did Redis restart without its data?). This process keeps serving its table and writes it back.',
        { code: 'SLUICE_TABLE_BEHIND' },
      )
    }
    const args = [String(held), String(this.#auditLength), this.#channel, `restore by ${defaultActor()}`]
    for (const [entry, parsed] of this.#state.snapshot()) args.push(entry, parsed.json)
    const [version, done] = pair(await this.#run(RESTORE, this.#keys, args))
    if (version > this.#highest) this.#highest = version
    if (done === 1) this.#behind = false
    // Entries written meanwhile were merged in at a version past ours: read the merge.
    if (version > held) this.#readAgain = true
  }

  /** Checks the version every `checkMs`; reads the table when it moved either way. */
  #schedule(): void {
    if (this.#checkMs === 0 || this.#closed) return
    this.#timer = setTimeout(async () => {
      try {
        const version = Number(await this.#run(VERSION, [this.#keys[1]], []))
        if (version !== this.#state.version || this.#behind) await this.#read()
      } catch {
        // Redis is away: keep serving the table held, and try again at the next check.
      }
      this.#schedule()
    }, this.#checkMs)
    this.#timer.unref()
  }

  /** Runs a script within `timeoutMs`; failures become `StoreError`s. */
  #run(s: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    if (!this.#runner.connected()) {
      return Promise.reject(new StoreError(ErrorCode.STORE_ERROR, 'The Redis client is not connected.'))
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#runner.troubled()
        reject(new StoreError(ErrorCode.STORE_TIMEOUT, `Redis did not answer within ${this.#timeoutMs} ms.`))
      }, this.#timeoutMs)
      let sent: Promise<unknown>
      try {
        sent = this.#runner.run(s, keys, args, true)
      } catch (error) {
        sent = Promise.reject(error)
      }
      sent.then(
        (reply) => {
          clearTimeout(timer)
          resolve(reply)
        },
        (error: unknown) => {
          clearTimeout(timer)
          this.#runner.troubled()
          reject(storeError(error))
        },
      )
    })
  }
}

/** An entry name for a message: quoted, and cut at 64 characters. */
function describe(entry: string): string {
  return JSON.stringify(entry.length > 64 ? `${entry.slice(0, 64)}…` : entry)
}

function defaultActor(): string {
  return `${process.pid}@${hostname()}`.slice(0, MAX_ACTOR)
}

const UNSAFE_ACTOR = /[\p{Cc}\p{Cs}\p{Zl}\p{Zp}]/u

function actorOf(options: LimitTableChangeOptions | undefined): string {
  const o = readOptions('RedisLimitTable.set options', options, ['actor'])
  if (o.actor === undefined) return defaultActor()
  const actor = o.actor
  if (
    typeof actor !== 'string' ||
    actor.length === 0 ||
    actor.length > MAX_ACTOR ||
    UNSAFE_ACTOR.test(actor)
  ) {
    throw new InvalidOptionError('actor', actor, `1 to ${MAX_ACTOR} characters without control characters`)
  }
  return actor
}

function pair(reply: unknown): [number, number] {
  if (!Array.isArray(reply) || reply.length !== 2) throw unexpected()
  return [Number(reply[0]), Number(reply[1])]
}

function unexpected(): StoreError {
  return new StoreError(
    ErrorCode.STORE_ERROR,
    'Redis answered the limit table script with an unexpected reply.',
  )
}

function storeError(error: unknown): StoreError {
  if (error instanceof StoreError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new StoreError(ErrorCode.STORE_ERROR, `Redis failed: ${message}`, { cause: error })
}

/** Specs from an audit field: '' means none (the entry was absent, or deleted). */
function specsOf(text: string): readonly RuleSpec[] | null | undefined {
  if (text === '') return undefined
  try {
    return JSON.parse(text) as readonly RuleSpec[] | null
  } catch {
    return undefined
  }
}

function auditRecord(item: unknown): LimitTableAuditRecord {
  const [id, flat] = Array.isArray(item) ? item : []
  const fields = new Map<string, string>()
  if (Array.isArray(flat))
    for (let i = 0; i + 1 < flat.length; i += 2) fields.set(String(flat[i]), String(flat[i + 1]))
  const change = fields.get('change')
  const record: {
    -readonly [K in keyof LimitTableAuditRecord]: LimitTableAuditRecord[K]
  } = {
    id: String(id),
    version: Number(fields.get('v')),
    time: Number(fields.get('t')),
    change: change === 'delete' || change === 'restore' ? change : 'set',
    entry: fields.get('entry') ?? '',
    actor: fields.get('actor') ?? '',
  }
  const before = specsOf(fields.get('before') ?? '')
  const after = specsOf(fields.get('after') ?? '')
  if (before !== undefined) record.before = before
  if (after !== undefined) record.after = after
  return record
}

/** Resolves when an ioredis connection that is already connecting is ready; rejects after `timeoutMs`. */
function readyWithin(sub: IoRedisSubscriber, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready within ${timeoutMs} ms`)), timeoutMs)
    sub.on('ready', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

/** What a pub/sub subscriber tells the table. */
interface SubscriberEvents {
  message(text: string): void
  /** The connection came back after a drop: notices may have been missed. */
  reconnected(): void
}

/** The parts of the clients used to subscribe; both libraries resubscribe by themselves on reconnect. */
interface IoRedisSubscriber {
  status: string
  connect(): Promise<void>
  subscribe(channel: string): Promise<unknown>
  on(event: string, listener: (...args: unknown[]) => void): unknown
  disconnect(): void
}
interface NodeRedisSubscriber {
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>
  on(event: string, listener: (...args: unknown[]) => void): unknown
  destroy?(): void
  disconnect?(): Promise<void>
}

/**
 * Subscribes to `channel` on a duplicate of `client`: ioredis `duplicate()` then `subscribe` and the
 * `message` event; node-redis (4 to 6, client or cluster) `duplicate()`, `connect()`, `subscribe(channel,
 * listener)`. A `ready` after the first one means the connection came back.
 */
async function subscribe(
  client: unknown,
  channel: string,
  timeoutMs: number,
  events: SubscriberEvents,
): Promise<Subscriber> {
  const c = client as { duplicate?: () => unknown; defineCommand?: unknown }
  if (typeof c.duplicate !== 'function') {
    throw new InvalidOptionError(
      'RedisLimitTable.client',
      client,
      'a client with duplicate() (ioredis or node-redis)',
    )
  }
  let ready = 0
  const onReady = () => {
    ready++
    if (ready > 1) events.reconnected()
  }
  if (typeof c.defineCommand === 'function') {
    const sub = c.duplicate() as IoRedisSubscriber
    sub.on('error', () => {})
    sub.on('ready', onReady)
    sub.on('message', (ch, message) => {
      if (ch === channel) events.message(String(message))
    })
    try {
      if (sub.status === 'wait') await sub.connect()
      else if (sub.status !== 'ready') await readyWithin(sub, timeoutMs)
      await sub.subscribe(channel)
    } catch (error) {
      sub.disconnect()
      throw error
    }
    if (ready === 0) ready = 1
    return { close: () => sub.disconnect() }
  }
  const sub = c.duplicate() as NodeRedisSubscriber
  const close = () => {
    if (typeof sub.destroy === 'function') sub.destroy()
    else sub.disconnect?.().catch(() => {})
  }
  sub.on('error', () => {})
  sub.on('ready', onReady)
  try {
    await sub.connect()
    await sub.subscribe(channel, (message) => events.message(String(message)))
  } catch (error) {
    close()
    throw error
  }
  if (ready === 0) ready = 1
  return { close }
}
