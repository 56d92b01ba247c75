/**
 * @module PostgresStore: rule state in PostgreSQL, shared by every process that uses the same database.
 *
 * One statement per call: the apply function (schema.ts) decides every rule of the call, all or none, in
 * one transaction, on the database's clock, under the key's lock; its algorithms (kinds/*.ts) agree with
 * @sluice/core's rules to the last bit. This file holds what happens around it: options, the per-call
 * timeout, the deadline each call carries in the database's clock (so a call answered by `onStoreError`
 * is never counted later), errors, and the sweep of expired rows, off the request path.
 */
import {
  type Adjustment,
  type BlockPolicy,
  type Costs,
  ErrorCode,
  type FixedWindowRule,
  InvalidCostError,
  InvalidOptionError,
  type Rule,
  type SlidingWindowRule,
  type Store,
  type StoreAnswer,
  StoreError,
  type StoreMode,
} from '@sluice/core'
import { functionOption, given, integerOption, MAX_TIMER_MS, readOptions } from '@sluice/core/options'
import { newLease, type StorePlace } from '@sluice/core/store'
import { type Connection, connectionFor, type PostgresClientLike } from './client.ts'
import { fixedWindowConsume } from './kinds/fixed-window.ts'
import { slidingWindowConsume } from './kinds/sliding-window.ts'
import {
  ACT,
  applyStatement,
  kindsOf,
  migration,
  Names,
  resetStatement,
  sweepStatement,
  TABLE_NAME,
} from './schema.ts'
import {
  decode,
  decodeFixedWindow,
  decodeSlidingWindow,
  encode,
  encodeFixedWindow,
  encodeSlidingWindow,
  type FixedWindowRow,
  isLate,
  rowKey,
  type SlidingWindowRow,
  serverNowOf,
  withDeadline,
} from './wire.ts'

export interface PostgresStoreOptions {
  /**
   * A `pg` Pool (or Client), or a postgres.js `sql`, owned by the caller (`close()` leaves it open). Size
   * the pool for the calls in flight you expect: each call holds a connection for one statement.
   */
  client: PostgresClientLike
  /**
   * The state table, `name` or `schema.name` (lower case letters, digits and `_`); the functions
   * `migrate()` creates are named after it (`<table>_apply`, `<table>_sweep`, …). Default `"sluice_state"`.
   */
  table?: string
  /**
   * Longest wait for PostgreSQL per call, in ms (an integer >= 1). Past it the call rejects with a
   * `StoreError` coded `ERR_SLUICE_STORE_TIMEOUT`, and the limiter's `onStoreError` decides. The call
   * carries this deadline in the database's clock: started after it, it counts nothing, and it waits for
   * a lock no longer than the deadline allows, so the server ends it. Default 100.
   */
  timeoutMs?: number
  /**
   * How often the store deletes expired rows, in ms (0: never; another process's store may do it). Each
   * turn deletes batches of `sweepBatch` rows (at most 20) through the index on expiry. Default 10,000.
   */
  sweepIntervalMs?: number
  /** Rows per delete in a sweep: an integer from 1 to 100,000. Default 1,000. */
  sweepBatch?: number
  /**
   * Time in ms for the calls, instead of the database's clock. For tests that drive the memory store and
   * this store through the same trace; rows expire by the database's clock, so it must not run slower
   * than real time. Default: the database's clock.
   */
  clock?: () => number
}

const KNOWN_OPTIONS: (keyof PostgresStoreOptions)[] = [
  'client',
  'table',
  'timeoutMs',
  'sweepIntervalMs',
  'sweepBatch',
  'clock',
]
/** Batches a sweep turn deletes at most: a turn stays short, and the next one comes soon. */
const BATCHES_PER_SWEEP = 20
/** The SQLSTATEs of a missing function or table: the store was used before `migrate()`. */
const NOT_MIGRATED = new Set(['42883', '42P01'])
/** lock_not_available: the call's lock wait reached its deadline. */
const LOCK_TIMEOUT = '55P03'
/** How long a learnt clock offset is trusted before the next reply replaces it. */
const OFFSET_MS = 10_000

export class PostgresStore implements Store {
  readonly place: StorePlace
  readonly #connection: Connection
  readonly #names: Names
  readonly #kinds: ReturnType<typeof kindsOf>
  readonly #apply: string
  readonly #applyName: string
  readonly #fixedWindow: string
  readonly #slidingWindow: string
  /**
   * Per kind, how one rule of it is consumed without a block in one statement (no function), or undefined
   * for a kind the apply function always runs.
   */
  readonly #oneStatements: {
    readonly [K in Rule['kind']]:
      | ((key: string, rule: Extract<Rule, { kind: K }>, cost: number) => Promise<StoreAnswer>)
      | undefined
  } = {
    fixedWindow: (key, rule, cost) => this.#consumeFixedWindow(key, rule, cost),
    slidingLog: undefined,
    slidingWindow: (key, rule, cost) => this.#consumeSlidingWindow(key, rule, cost),
    tokenBucket: undefined,
    leakyBucket: undefined,
    concurrency: undefined,
    warmUp: undefined,
  }
  readonly #timeoutMs: number
  readonly #clock: (() => number) | undefined
  readonly #sweepBatch: number
  readonly #sweep: NodeJS.Timeout | undefined
  /**
   * The database's ms minus `performance.now()`, as high as the replies since `#offsetAt` allow (each is
   * at most the true offset: the reply left the server before it arrived), so a deadline sent with it is
   * never later than the caller's own.
   */
  #offset: number | undefined
  #offsetAt = Number.NEGATIVE_INFINITY
  #closed = false
  #sweeping: Promise<void> | undefined

  constructor(options: PostgresStoreOptions) {
    const o = readOptions('PostgresStore', options, KNOWN_OPTIONS, true)
    this.#connection = connectionFor(o.client, 'PostgresStore.client')
    const table = given(o.table, 'sluice_state')
    if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
      throw new InvalidOptionError(
        'PostgresStore.table',
        table,
        'a table name or schema.name of lower case letters, digits and _ (at most 48 each)',
      )
    }
    this.#names = new Names(table)
    this.#kinds = kindsOf(this.#names)
    this.#apply = applyStatement(this.#names)
    this.#applyName = `sluice_apply_${table}`
    this.#fixedWindow = fixedWindowConsume(this.#names.table)
    this.#slidingWindow = slidingWindowConsume(this.#names.table)
    this.#timeoutMs = integerOption('PostgresStore.timeoutMs', given(o.timeoutMs, 100), 1, MAX_TIMER_MS)
    this.#clock = o.clock === undefined ? undefined : functionOption('PostgresStore.clock', o.clock)
    this.#sweepBatch = integerOption('PostgresStore.sweepBatch', given(o.sweepBatch, 1000), 1, 100_000)
    const sweepIntervalMs = integerOption(
      'PostgresStore.sweepIntervalMs',
      given(o.sweepIntervalMs, 10_000),
      0,
      MAX_TIMER_MS,
    )
    this.place = { owner: o.client as object, namespace: table }
    if (sweepIntervalMs > 0) {
      this.#sweep = setInterval(this.#timedSweep, sweepIntervalMs)
      this.#sweep.unref()
    }
  }

  /**
   * Creates the table, its index and the functions (or replaces the functions with this version's).
   * Idempotent; processes running it at once take turns. `sluice postgres migrate` does the same. Rejects
   * with a `StoreError` (`ERR_SLUICE_STORE`) when PostgreSQL cannot be reached or refuses.
   */
  async migrate(): Promise<void> {
    await this.#connection.script(migration(this.#names)).catch((error: unknown) => {
      throw this.#storeError(error)
    })
  }

  apply(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    mode: StoreMode,
    block?: BlockPolicy,
  ): Promise<StoreAnswer> {
    // Per-rule costs that are all equal are a plain cost: the same statement and arguments as any such call.
    if (typeof cost !== 'number') cost = oneCost(cost)
    const consume = mode === 'consume'
    const first = rules[0]!
    if (consume && block === undefined && rules.length === 1 && typeof cost === 'number') {
      const oneStatement = this.#oneStatements[first.kind] as
        | ((key: string, rule: Rule, cost: number) => Promise<StoreAnswer>)
        | undefined
      if (oneStatement !== undefined) return oneStatement(rowKey(prefix, key), first, cost)
    }
    // One lease for the call, held under the rules of a kind that releases (its SQL has a release step).
    const kinds = this.#kinds
    const holds = (r: Rule) => kinds[r.kind].release !== undefined
    const lease = consume && rules.some(holds) ? newLease(leaseUnits(rules, cost, holds)) : undefined
    const marks = lease === undefined ? null : rules.map((r) => (holds(r) ? lease : undefined))
    const args = encode(
      this.#kinds,
      rowKey(prefix, key),
      rules,
      cost,
      consume ? ACT.consume : ACT.peek,
      this.#now(),
      block,
      marks,
    )
    return this.#call(args).then((reply) => decode(reply, rules, consume, marks))
  }

  async adjust(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    adjustment: Adjustment,
    block?: BlockPolicy,
    marks?: readonly (string | undefined)[],
  ): Promise<StoreAnswer | undefined> {
    if (adjustment === 'settle') return this.#settle(prefix, key, rules, cost, block, marks)
    // Per-rule costs that are all the same go as one cost.
    if (typeof cost !== 'number') cost = oneCost(cost)
    const act =
      adjustment === 'refund'
        ? marks === undefined
          ? ACT.refund
          : ACT.refundCall
        : adjustment === 'penalize'
          ? ACT.penalize
          : adjustment === 'unqueue'
            ? ACT.unqueue
            : ACT.release
    if ((act === ACT.unqueue || act === ACT.release) && marks === undefined) return undefined
    const args = encode(
      this.#kinds,
      rowKey(prefix, key),
      rules,
      cost,
      act,
      this.#now(),
      act === ACT.penalize ? block : undefined,
      marks ?? null,
    )
    const reply = await this.#call(args)
    return act === ACT.penalize ? decode(reply, rules, false, null) : undefined
  }

  /**
   * Settles one call: each rule by its signed amount (`cost`, or one number for every rule) in one function
   * call that answers as a peek of cost 1 (with `block`) right after, as a penalty does.
   */
  async #settle(
    prefix: string,
    key: string,
    rules: readonly Rule[],
    cost: number | Costs,
    block: BlockPolicy | undefined,
    marks: readonly (string | undefined)[] | undefined,
  ): Promise<StoreAnswer> {
    const amounts = typeof cost === 'number' ? rules.map(() => cost) : cost
    if (amounts.length !== rules.length) {
      throw new InvalidCostError(cost, `a settle has one amount per rule, and the call has ${rules.length}`)
    }
    const args = encode(
      this.#kinds,
      rowKey(prefix, key),
      rules,
      amounts,
      ACT.settle,
      this.#now(),
      block,
      marks ?? null,
    )
    return decode(await this.#call(args), rules, false, null)
  }

  async reset(prefix: string, key: string): Promise<void> {
    await this.#run(
      this.#connection.rows(`sluice_reset_${this.#names.table}`, resetStatement(this.#names), [
        rowKey(prefix, key),
      ]),
    )
  }

  /**
   * Deletes expired rows now, in batches of `sweepBatch` through the index on expiry, skipping rows a call
   * holds; at most 20 batches a turn. Runs by itself every `sweepIntervalMs`. Resolves to the rows deleted.
   */
  async sweep(): Promise<number> {
    let deleted = 0
    for (let i = 0; i < BATCHES_PER_SWEEP; i++) {
      const rows = await this.#connection.rows(
        `sluice_sweep_${this.#names.table}`,
        sweepStatement(this.#names),
        [this.#sweepBatch],
      )
      const n = Number(rows[0]?.n ?? 0)
      deleted += n
      if (n < this.#sweepBatch) break
    }
    return deleted
  }

  /** Stops the sweep (waiting for a turn under way); the client stays open. Calls are refused from then on. */
  async close(): Promise<void> {
    this.#closed = true
    clearInterval(this.#sweep)
    await this.#sweeping
  }

  /** The sweep the interval runs; a failure waits for the next turn (nobody could catch it here). */
  readonly #timedSweep = (): void => {
    if (this.#sweeping !== undefined || this.#closed) return
    this.#sweeping = this.sweep().then(
      () => {
        this.#sweeping = undefined
      },
      () => {
        this.#sweeping = undefined
      },
    )
  }

  #now(): number | null {
    return this.#clock === undefined ? null : Math.floor(this.#clock())
  }

  /**
   * Runs the apply function within the timeout, with the call's deadline in the database's clock (or, before
   * any reply has told that clock, the timeout as a budget from the statement's start).
   */
  #call(args: unknown[]): Promise<(number | null)[]> {
    if (this.#closed) return Promise.reject(this.#closedError())
    const started = performance.now()
    const deadline = this.#offset === undefined ? null : Math.floor(started + this.#timeoutMs + this.#offset)
    withDeadline(args, deadline, this.#timeoutMs)
    return this.#run(
      this.#connection.rows(this.#applyName, this.#apply, args).then((rows) => {
        const reply = rows[0]!.r as (number | null)[]
        this.#learnClock(serverNowOf(reply))
        if (isLate(reply)) throw this.#timedOut()
        return reply
      }),
    )
  }

  /** One fixedWindow rule consumed without a block: one upsert, its deadline and lock bound as `#call`'s. */
  #consumeFixedWindow(key: string, rule: FixedWindowRule, cost: number): Promise<StoreAnswer> {
    return this.#oneStatement(
      `${this.#applyName}_fw`,
      this.#fixedWindow,
      (deadline) => encodeFixedWindow(key, rule, cost, this.#now(), deadline, this.#timeoutMs),
      (row: FixedWindowRow) => decodeFixedWindow(row, rule),
    )
  }

  /** One slidingWindow rule consumed without a block: one upsert, as `#consumeFixedWindow`. */
  #consumeSlidingWindow(key: string, rule: SlidingWindowRule, cost: number): Promise<StoreAnswer> {
    return this.#oneStatement(
      `${this.#applyName}_sw`,
      this.#slidingWindow,
      (deadline) => encodeSlidingWindow(key, rule, cost, this.#now(), deadline, this.#timeoutMs),
      (row: SlidingWindowRow) => decodeSlidingWindow(row, rule),
    )
  }

  /**
   * Runs one rule's consume as one statement (`name`, `text`) within the timeout: `args` gets the call's
   * deadline in the database's clock, or null before any reply has told that clock. A statement that
   * returns no row started after the deadline.
   */
  #oneStatement<Row extends { readonly server: number }>(
    name: string,
    text: string,
    args: (deadline: number | null) => unknown[],
    decode: (row: Row) => StoreAnswer,
  ): Promise<StoreAnswer> {
    if (this.#closed) return Promise.reject(this.#closedError())
    const started = performance.now()
    const deadline = this.#offset === undefined ? null : Math.floor(started + this.#timeoutMs + this.#offset)
    return this.#run(
      this.#connection.rows(name, text, args(deadline)).then((rows) => {
        const row = rows[0] as Row | undefined
        if (row === undefined) throw this.#timedOut()
        this.#learnClock(row.server)
        return decode(row)
      }),
    )
  }

  /** What a call on a closed store rejects with. */
  #closedError(): StoreError {
    return new StoreError(ErrorCode.STORE_ERROR, 'The PostgresStore is closed.')
  }

  /**
   * What a call PostgreSQL did not answer within the timeout rejects with: `why`, when given, follows the
   * figure, and `cause` is the driver's error.
   */
  #timedOut(why = '', cause?: unknown): StoreError {
    const message = `PostgreSQL did not answer within ${this.#timeoutMs} ms${why}.`
    return cause === undefined
      ? new StoreError(ErrorCode.STORE_TIMEOUT, message)
      : new StoreError(ErrorCode.STORE_TIMEOUT, message, { cause })
  }

  /** `query` within the timeout, its failures as `StoreError`s. */
  #run<T>(query: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(this.#timedOut()), this.#timeoutMs)
    })
    return Promise.race([
      query.catch((error: unknown) => Promise.reject(this.#storeError(error))),
      timeout,
    ]).finally(() => clearTimeout(timer))
  }

  #learnClock(serverNow: number): void {
    const estimate = serverNow - performance.now()
    const now = performance.now()
    if (this.#offset === undefined || now - this.#offsetAt > OFFSET_MS || estimate > this.#offset) {
      if (this.#offset === undefined || now - this.#offsetAt > OFFSET_MS) this.#offsetAt = now
      this.#offset = estimate
    }
  }

  #storeError(error: unknown): StoreError {
    if (error instanceof StoreError) return error
    const code = (error as { code?: unknown } | null)?.code
    if (typeof code === 'string' && NOT_MIGRATED.has(code)) {
      return new StoreError(
        ErrorCode.STORE_ERROR,
        `PostgresStore: the table ${this.#names.table} or its functions are missing or out of date: run ` +
          '`await store.migrate()` (or `sluice postgres migrate --url …`) once before using the store.',
        { cause: error },
      )
    }
    if (code === LOCK_TIMEOUT) {
      return this.#timedOut(' (a lock was held)', error)
    }
    const message = error instanceof Error ? error.message : String(error)
    return new StoreError(ErrorCode.STORE_ERROR, `PostgreSQL failed: ${message}`, { cause: error })
  }
}

/** Per-rule costs as one number when they are all the same, else as they are. */
function oneCost(costs: Costs): number | Costs {
  const first = costs[0]!
  for (let i = 1; i < costs.length; i++) if (costs[i] !== first) return costs
  return first
}

/** The units a consume's lease takes: the call's cost, or its first leasing rule's. */
function leaseUnits(rules: readonly Rule[], cost: number | Costs, holds: (rule: Rule) => boolean): number {
  if (typeof cost === 'number') return cost
  for (let i = 0; i < rules.length; i++) if (holds(rules[i]!)) return cost[i]!
  return 0
}
