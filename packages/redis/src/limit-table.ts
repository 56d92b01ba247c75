/**
 * @module RedisLimitTable: a limit table kept in Redis and followed by every process that opens it.
 *
 * Over 300 lines: its consistency (stamps, versions, restores after Redis lost the table, the version check)
 * is one state machine, kept in one file so it can be read whole; its subscriber lives in table-subscriber.ts.
 *
 * Layout, all under one hash tag so every script runs on Redis Cluster: `<prefix>:table:{<name>}` is a
 * hash of entry -> spec JSON, `…:version` the table's version, `…:audit` a capped stream of changes,
 * `…:stamp` a random id every change writes anew.
 * Entry names are hash fields, never part of a key. A change is one script (table-write.lua): it checks the
 * bounds, writes the entry, raises the version, appends to the audit stream and publishes the change.
 *
 * Each process serves `get` from a local copy (core's `TableState`), so `get` is synchronous and never
 * throws, and keeps serving the last table it had while Redis is away.
 *
 * What it promises (its consistency): beside the version, Redis keeps a stamp, a random id written with
 * every change, and each audit record keeps the stamp it made and the one before; a version alone never
 * proves two tables equal. A pub/sub notice is only a hint: on one, and every `checkMs`, the process reads
 * the version and stamp, and reads the table (with the stamps of its recent changes) when they differ from
 * its own. Then:
 * - Redis's table descends from the one held (the held stamp is in its recent trail): adopted.
 * - Redis holds a table this process held before, or passed on its way (restarted from an older dump,
 *   flushed): the process never adopts it; it warns and writes its own table back, replacing Redis's, so
 *   Redis returns to the newest table the processes hold.
 * - Redis holds a table this process never saw at a version no higher than its own (lost, then
 *   re-provisioned): the process writes back its table with the entries Redis changed since the last
 *   table both held (every entry Redis holds when there is none) at a version past both; every process
 *   then adopts that one, so processes and Redis converge on one table.
 * Writes never land on a Redis that is behind the writer: it writes its table back first. Every write of
 * a whole table is conditional on the stamp it read (no two processes overwrite each other). Versions
 * stop at 2^53 - 1. Entries Redis holds that sluice cannot read keep their last good value; a table past
 * the bound of entries is not read at all.
 */
import { randomBytes } from 'node:crypto'
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
import { integerOption, prefixOption, readOptions } from '@sluice/core/options'
import {
  checkEntryName,
  type ParsedEntry,
  parseEntry,
  parseEntryJson,
  TABLE_BOUNDS,
  TableState,
  tooManyEntries,
} from '@sluice/core/store'
import {
  connectionFor,
  type RedisClientLike,
  type RedisConnection,
  type Script,
  script,
  storeError,
} from './client.ts'
import { TABLE_RESTORE_LUA, TABLE_WRITE_LUA } from './scripts.generated.ts'
import { type Subscriber, subscribe, whenReady } from './table-subscriber.ts'

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
  /**
   * `set`, `delete`, or `restore` (a process wrote its whole table into a Redis that was behind it, or
   * that held a table it never saw).
   */
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
/** Versions stop here: past it a version is no longer an exact number in JavaScript (nor in Lua). */
const MAX_VERSION = Number.MAX_SAFE_INTEGER
/** Audit records read with the table, to tell where Redis's table comes from. */
const TRAIL = 100
/** Stamps remembered of tables held or passed on the way. */
const HISTORY = 4096

const WRITE = script(TABLE_WRITE_LUA)
const RESTORE = script(TABLE_RESTORE_LUA)
/**
 * The version, the stamp (`''` for no table; `v<version>` for a table written before stamps), the hash
 * (or its length, past the bound: not read), and the last TRAIL records as { stamp, from, entry, change }.
 */
const LOAD = script(`local v = redis.call('GET', KEYS[2]) or '0'
local s = redis.call('GET', KEYS[4]) or ''
if s == '' and v ~= '0' then s = 'v' .. v end
local trail = {}
for _, record in ipairs(redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', ARGV[2])) do
  local f = { stamp = '', from = '', entry = '', change = '' }
  local flat = record[2]
  for i = 1, #flat, 2 do
    if f[flat[i]] ~= nil then f[flat[i]] = flat[i + 1] end
  end
  trail[#trail + 1] = { f.stamp, f.from, f.entry, f.change }
end
local n = redis.call('HLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return { v, s, n, trail } end
return { v, s, redis.call('HGETALL', KEYS[1]), trail }`)
const CHECK = script(`local v = redis.call('GET', KEYS[1]) or '0'
local s = redis.call('GET', KEYS[2]) or ''
if s == '' and v ~= '0' then s = 'v' .. v end
return { v, s }`)
const AUDIT = script("return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])")

/** One audit record as read with the table. */
interface TrailRecord {
  stamp: string
  from: string
  entry: string
  change: string
}

/** A limit table in Redis. Open it with `RedisLimitTable.open`. */
export class RedisLimitTable implements LimitTable {
  /** The table's name. */
  readonly name: string
  readonly #runner: RedisConnection
  /** hash, version, audit, stamp. */
  readonly #keys: readonly [string, string, string, string]
  readonly #channel: string
  readonly #timeoutMs: number
  readonly #checkMs: number
  readonly #auditLength: number
  readonly #state = new TableState()
  /** The stamp of the table held; `''` for the empty table at version 0. */
  #stamp = ''
  /** Stamps of tables this process held or passed on its way to the one it holds, oldest first. */
  readonly #history = new Set<string>([''])
  #subscriber: Subscriber | undefined
  #timer: NodeJS.Timeout | undefined
  #reading: Promise<void> | undefined
  #readAgain = false
  #checking = false
  #checkAgain = false
  /** True while Redis is known to be behind this process (warned once per episode). */
  #behind = false
  #closed = false
  /** Set once `open` read a table: a table Redis holds that cannot be read then warns instead of rejecting. */
  #opened = false
  /** Why the last read could not read Redis's table; undefined when it could. */
  #unreadable: string | undefined

  private constructor(options: RedisLimitTableOptions) {
    const o = readOptions('RedisLimitTable', options, KNOWN_OPTIONS, true)
    this.#runner = connectionFor(o.client, 'RedisLimitTable.client')
    // The table follows changes on a duplicate of the client; Valkey GLIDE sets its subscriptions at creation.
    if (typeof (o.client as { duplicate?: unknown }).duplicate !== 'function') {
      throw new InvalidOptionError(
        'RedisLimitTable.client',
        o.client,
        'an ioredis, iovalkey or node-redis client or cluster (one with duplicate(), for its change notices)',
      )
    }
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
    this.#keys = [base, `${base}:version`, `${base}:audit`, `${base}:stamp`]
    this.#channel = `${base}:changes`
  }

  /**
   * Opens the table `name` in Redis: checks the options (`InvalidOptionError`), waits for a client that
   * is still connecting (up to `timeoutMs`), reads the table (rejects with `StoreError` when Redis cannot
   * be reached, or when it holds a table that cannot be read: no valid version, or past the bound of
   * entries, since a process that holds no table yet would serve nothing), and, unless `follow` is false,
   * subscribes to its changes and starts the version check. A table never written is empty, at version 0.
   * It only ever rejects: it never throws elsewhere.
   */
  static async open(options: RedisLimitTableOptions): Promise<RedisLimitTable> {
    const table = new RedisLimitTable(options)
    const follow = options.follow === undefined ? true : options.follow
    if (typeof follow !== 'boolean') {
      throw new InvalidOptionError('RedisLimitTable.follow', follow, 'true or false')
    }
    try {
      await whenReady(options.client, table.#timeoutMs)
    } catch (error) {
      throw storeError(error)
    }
    await table.#read()
    if (table.#unreadable !== undefined) {
      // A process opening the table holds none yet, so it would serve nothing: every key unlimited.
      throw new StoreError(ErrorCode.STORE_ERROR, `${table.#unreadable}; the table cannot be opened.`)
    }
    table.#opened = true
    if (follow) {
      try {
        table.#subscriber = await subscribe(options.client, table.#channel, table.#timeoutMs, {
          message: () => table.#check(),
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
   * hold at most 10,000 entries). Resolves once the change is in Redis (applied here, listeners told, or,
   * when others changed the table meanwhile, the table read again when Redis answers). Rejects with
   * `StoreError` when Redis cannot be reached (the change may still land if Redis got it); a change that
   * was written never rejects.
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

  /**
   * Removes an entry (it then falls to `"*"`). Removing an entry Redis's table does not hold changes
   * nothing, unless Redis holds no table at all (lost): then the removal is recorded, so processes that
   * write their table back drop the entry. A removal that changed the table raises `version`.
   */
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

  /** Writes one change; resolves with whether it changed Redis's table. */
  async #write(entry: string, parsed: ParsedEntry | undefined, actor: string): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      const stamp = newStamp()
      const [version, changed, before] = triple(
        await this.#run(WRITE, this.#keys, [
          entry,
          parsed === undefined ? '' : parsed.json,
          actor,
          String(this.#state.version),
          this.#stamp,
          String(this.#auditLength),
          this.#channel,
          String(TABLE_BOUNDS.entries),
          String(TABLE_BOUNDS.entryJson),
          stamp,
        ]),
      )
      if (version === -1) throw tooManyEntries(TABLE_BOUNDS.entries + 1)
      if (version === -2) {
        throw new SluiceError(ErrorCode.TABLE_TOO_LARGE, `Limit table entry ${describe(entry)} is too large.`)
      }
      if (version === -4) {
        throw new StoreError(
          ErrorCode.STORE_ERROR,
          `Limit table "${this.name}" in Redis is at its last version (${MAX_VERSION}) or holds no valid version; nothing was written.`,
        )
      }
      if (version === -3) {
        // Redis is behind this process: its table goes back first, then the change is made on it.
        if (attempt > 0)
          throw new StoreError(
            ErrorCode.STORE_ERROR,
            `Limit table "${this.name}": Redis stays behind this process; nothing was written.`,
          )
        await this.#read()
        continue
      }
      if (changed === 1 && before === this.#stamp && version === this.#state.version + 1) {
        this.#adopted(stamp)
        this.#state.apply(entry, parsed, version)
      } else if (changed === 1 || before !== this.#stamp) {
        // Others changed the table meanwhile: read it. The change is written, so this never rejects.
        await this.#read().catch(() => {})
      }
      return changed === 1
    }
  }

  /** A notice or a tick: reads the version and stamp, and the table when either moved. One at a time. */
  #check(): void {
    if (this.#closed) return
    if (this.#checking) {
      this.#checkAgain = true
      return
    }
    this.#checking = true
    void (async () => {
      try {
        do {
          this.#checkAgain = false
          const [version, stamp] = checkReply(await this.#run(CHECK, [this.#keys[1], this.#keys[3]], []))
          if (stamp !== this.#stamp || version !== this.#state.version || this.#behind) await this.#read()
        } while (this.#checkAgain && !this.#closed)
      } catch {
        // Redis is away: keep serving the table held, and try again at the next check.
      } finally {
        this.#checking = false
      }
    })()
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
    const reply = await this.#run(LOAD, this.#keys, [String(TABLE_BOUNDS.entries), String(TRAIL)])
    if (!Array.isArray(reply) || reply.length !== 4 || !Array.isArray(reply[3])) throw unexpected()
    const version = Number(reply[0])
    const stamp = String(reply[1])
    if (!Number.isSafeInteger(version) || version < 0) {
      return this.#cannotRead(
        'version',
        `Limit table "${this.name}" in Redis has no valid version (${describe(String(reply[0]))})`,
      )
    }
    if (!Array.isArray(reply[2])) {
      return this.#cannotRead(
        'size',
        `Limit table "${this.name}" in Redis holds ${Number(reply[2])} entries, past the bound of ${TABLE_BOUNDS.entries}; it is not read`,
      )
    }
    this.#unreadable = undefined
    const trail = (reply[3] as unknown[]).map(trailRecord)
    const held = this.#state.version
    if (stamp === this.#stamp) {
      this.#behind = false
      return
    }
    const descends =
      version > held &&
      (this.#stamp === '' || trail.some((r) => r.stamp === this.#stamp || r.from === this.#stamp))
    if (descends) {
      this.#behind = false
      for (const r of [...trail].reverse()) if (r.stamp !== '') this.#remember(r.stamp)
      this.#adopted(stamp)
      this.#state.replace(this.#entriesOf(reply[2] as unknown[]), version)
      return
    }
    if (this.#history.has(stamp) && version <= held) {
      // Redis holds a table this process passed: an older dump, or a flushed Redis. Its own goes back.
      this.#warnBehind(
        version,
        'holds a table this process has already passed (restarted from an older dump, or flushed?)',
      )
      return this.#writeBack(stamp, held, this.#stamp, this.#state.snapshot())
    }
    // A table this process never saw: lost and re-provisioned, or this process fell far behind.
    const redis = this.#entriesOf(reply[2] as unknown[])
    const changed = changedSince(trail, this.#history)
    if (version > held && (changed === undefined || changed === 'all')) {
      for (const r of [...trail].reverse()) if (r.stamp !== '') this.#remember(r.stamp)
      this.#adopted(stamp)
      this.#state.replace(redis, version)
      return
    }
    const merged = this.#state.snapshot()
    if (changed === undefined || changed === 'all') {
      for (const [entry, parsed] of redis) merged.set(entry, parsed)
    } else {
      for (const entry of changed) {
        const value = redis.get(entry)
        if (value === undefined) merged.delete(entry)
        else merged.set(entry, value)
      }
    }
    const next = Math.max(version, held) + 1
    if (next > MAX_VERSION || merged.size > TABLE_BOUNDS.entries) return
    this.#warnBehind(version, 'holds a table this process never saw (lost, then written again?)')
    return this.#writeBack(stamp, next, newStamp(), merged)
  }

  /** Writes a whole table over Redis's (if Redis still holds `over`), then holds it. */
  async #writeBack(
    over: string,
    version: number,
    stamp: string,
    entries: Map<string, ParsedEntry>,
  ): Promise<void> {
    const args = [
      over,
      String(version),
      stamp,
      this.#stamp,
      String(this.#auditLength),
      this.#channel,
      `restore by ${defaultActor()}`,
    ]
    for (const [entry, parsed] of entries) args.push(entry, parsed.json)
    const [, written] = pair(await this.#run(RESTORE, this.#keys, args))
    if (written !== 1) {
      // Someone changed Redis meanwhile: read it again.
      this.#readAgain = true
      return
    }
    this.#behind = false
    this.#adopted(stamp)
    this.#state.replace(entries, version)
  }

  /** The entries of an HGETALL reply; one sluice cannot read keeps its last good value, if any. */
  #entriesOf(flat: unknown[]): Map<string, ParsedEntry> {
    const entries = new Map<string, ParsedEntry>()
    const unreadable: string[] = []
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const entry = String(flat[i])
      try {
        entries.set(checkEntryName(entry), parseEntryJson(entry, String(flat[i + 1])))
      } catch {
        unreadable.push(entry)
        const last = this.#state.parsed(entry)
        if (last !== undefined) entries.set(entry, last)
      }
    }
    if (unreadable.length > 0) {
      // Written around sluice (by hand): each such entry keeps the value this process last had, if any.
      process.emitWarning(
        `Limit table "${this.name}" holds ${unreadable.length} entr${unreadable.length === 1 ? 'y' : 'ies'} sluice cannot read (${describe(unreadable[0]!)}${unreadable.length > 1 ? ', …' : ''}); each keeps the last good value this process had, if any.`,
        { code: 'SLUICE_TABLE_ENTRY' },
      )
    }
    return entries
  }

  /** Holds the table stamped `stamp` from now on. */
  #adopted(stamp: string): void {
    this.#stamp = stamp
    this.#remember(stamp)
  }

  #remember(stamp: string): void {
    this.#history.delete(stamp)
    this.#history.add(stamp)
    if (this.#history.size > HISTORY) {
      for (const oldest of this.#history) {
        if (oldest === '') continue
        this.#history.delete(oldest)
        break
      }
    }
  }

  #warned = new Set<string>()

  /**
   * Redis holds a table this process cannot read: once open, it keeps serving the table it holds and warns
   * once; while opening, when it holds none, `open` rejects with `why`.
   */
  #cannotRead(what: string, why: string): void {
    this.#unreadable = why
    if (!this.#opened || this.#warned.has(what)) return
    this.#warned.add(what)
    process.emitWarning(`${why}; this process keeps serving its table.`, { code: 'SLUICE_TABLE_UNREADABLE' })
  }

  /** Redis is behind this process or apart from it: warn once per episode. */
  #warnBehind(stored: number, why: string): void {
    if (this.#behind) return
    this.#behind = true
    process.emitWarning(
      `Limit table "${this.name}" in Redis is at version ${stored} and ${why}; this process, at version ` +
        `${this.#state.version}, keeps serving its table and writes it back.`,
      { code: 'SLUICE_TABLE_BEHIND' },
    )
  }

  /** Checks the version and stamp every `checkMs`. */
  #schedule(): void {
    if (this.#checkMs === 0 || this.#closed) return
    this.#timer = setTimeout(() => {
      this.#check()
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

/** A random stamp for a table as it stands after a change. */
function newStamp(): string {
  return randomBytes(12).toString('base64url')
}

function trailRecord(item: unknown): TrailRecord {
  const [stamp, from, entry, change] = Array.isArray(item) ? item.map(String) : []
  return { stamp: stamp ?? '', from: from ?? '', entry: entry ?? '', change: change ?? '' }
}

/**
 * The entries Redis's trail changed since the newest table this process knows (a record whose stamp it
 * holds in its history, or whose parent it does); 'all' when a whole table was written meanwhile;
 * undefined when no known table is in the trail.
 */
function changedSince(
  trail: readonly TrailRecord[],
  history: ReadonlySet<string>,
): Set<string> | 'all' | undefined {
  const changed = new Set<string>()
  let whole = false
  for (const record of trail) {
    if (record.stamp !== '' && history.has(record.stamp)) return whole ? 'all' : changed
    if (record.change === 'restore' || record.entry === '') whole = true
    else changed.add(record.entry)
    if (history.has(record.from)) return whole ? 'all' : changed
  }
  return undefined
}

function checkReply(reply: unknown): [number, string] {
  if (!Array.isArray(reply) || reply.length !== 2) throw unexpected()
  return [Number(reply[0]), String(reply[1])]
}

function triple(reply: unknown): [number, number, string] {
  if (!Array.isArray(reply) || reply.length !== 3) throw unexpected()
  return [Number(reply[0]), Number(reply[1]), String(reply[2])]
}

/** An entry name for a message: quoted, and cut at 64 characters. */
function describe(entry: string): string {
  return JSON.stringify(entry.length > 64 ? `${entry.slice(0, 64)}…` : entry)
}

function defaultActor(): string {
  return `${process.pid}@${hostname()}`.slice(0, MAX_ACTOR)
}

const UNSAFE_ACTOR = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u

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
    throw new InvalidOptionError(
      'actor',
      actor,
      `1 to ${MAX_ACTOR} characters without control or format characters`,
    )
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
