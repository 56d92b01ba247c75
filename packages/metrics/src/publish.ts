/**
 * @module `publishStats` and `readPublishedStats`: every process writes its live statistics to Redis once a
 * second, so one dashboard sees them all.
 *
 * Keys, with the default prefix `sluice:stats`:
 * - `sluice:stats:instance:<instance>`: the latest snapshot as JSON, written with `SET … EX ttlSeconds`, so a
 *   process that stops publishing vanishes by itself.
 * - `sluice:stats:instances`: a sorted set of instance names scored by their last write (ms, the
 *   publisher's clock), trimmed on every write to the `maxInstances` most recent, and expiring with the TTL
 *   itself. It is only an index: the instance keys are the truth (they expire by Redis's clock), so a
 *   reader skips names whose key has expired and removes them. No publisher prunes by its own clock: one
 *   whose clock runs fast would evict every other.
 *
 * Every command touches one key, so this works on Redis Cluster as it is. The client is reached through
 * @sluice/redis's one client seam (ioredis, iovalkey, node-redis, Valkey GLIDE); no client library is imported.
 *
 * Over 300 lines: the publisher, the reader and the check of every snapshot read back (what comes from
 * Redis is data to validate) share the key layout above, so they stay in one file.
 */
import { InvalidOptionError } from '@sluice/core'
import { integerOption, readOptions, stringOption } from '@sluice/core/options'
import { connectionFor, type RedisClientLike } from '@sluice/redis'
import { STATS_BOUNDS } from './bounds.ts'
import type { LimiterStats, LiveStatsSnapshot } from './live-stats.ts'

/**
 * A Redis client, as @sluice/redis takes it: an ioredis or iovalkey `Redis` or `Cluster`, a node-redis client
 * or cluster, or a Valkey GLIDE client. It stays the caller's: nothing here connects, quits or reconfigures it.
 */
export type StatsRedisClient = RedisClientLike

/** Free-form data published with each snapshot, e.g. `{ tableVersion }`. */
export type StatsMeta = Record<string, unknown>

export interface PublishStatsOptions {
  /** What to publish: a `liveStats()` result, or anything with the same `snapshot()`. */
  stats: { snapshot(): LiveStatsSnapshot }
  client: StatsRedisClient
  /** This process's name on the dashboard, e.g. `${hostname()}:${process.pid}`. 1 to 200 characters. */
  instance: string
  /**
   * Published with each snapshot: an object, or a function called at each write; at most 4096 bytes as
   * JSON (an object past it is refused here; a function's answer past it is reported to `onError` and
   * that write publishes `{}` instead). Default `{}`.
   */
  meta?: StatsMeta | (() => StatsMeta)
  /** Between writes, in ms. Integer 100 to 3,600,000. Default 1000. */
  intervalMs?: number
  /**
   * Lifetime of each write, in seconds: how long a process that stopped stays visible. An integer whose
   * span is longer than `intervalMs`. Default the larger of 10 and twice the interval.
   */
  ttlSeconds?: number
  /** Start of every key written. Default `'sluice:stats'`. */
  prefix?: string
  /** Instances the index keeps (the most recent). Integer 1 to 100,000. Default 1000. */
  maxInstances?: number
  /**
   * Told of every failed write (Redis down, a timeout, a meta that does not serialise, a snapshot past 4 MiB
   * as JSON, which is not written). Publishing goes on at the next interval either way. Default: one process
   * warning (`SLUICE_STATS_PUBLISH`) per run of failures.
   */
  onError?: (error: unknown) => void
  /** Milliseconds since the epoch, for the index scores. Default `Date.now`. */
  clock?: () => number
}

/** One process's latest snapshot as read back from Redis. */
export interface PublishedStats extends LiveStatsSnapshot {
  instance: string
  meta: StatsMeta
}

export interface StatsPublisher {
  /**
   * Writes the latest snapshot now (after a write in flight, if any) and resolves when it is done. Never
   * rejects: a failure goes to `onError`.
   */
  publishNow(): Promise<void>
  /**
   * Stops the timer and removes this instance's entry so the dashboard drops it at once. Never rejects.
   * Calling it again does nothing.
   */
  close(): Promise<void>
}

export const DEFAULT_STATS_PREFIX = 'sluice:stats'

const OPTION_NAMES = [
  'stats',
  'client',
  'instance',
  'meta',
  'intervalMs',
  'ttlSeconds',
  'prefix',
  'maxInstances',
  'onError',
  'clock',
] as const

/**
 * Publishes `stats.snapshot()` (plus `instance` and `meta`) to Redis now and every `intervalMs`, on an
 * unref'd timer (it never keeps the process alive). A write still in flight when the next is due makes
 * that one skip. Redis errors never throw: they go to `onError`.
 */
export function publishStats(options: PublishStatsOptions): StatsPublisher {
  const given = readOptions<PublishStatsOptions>('publishStats', options, OPTION_NAMES, true)
  const stats = given.stats
  if (stats === null || typeof stats !== 'object' || typeof stats.snapshot !== 'function') {
    throw new InvalidOptionError('publishStats.stats', stats, 'a liveStats() result')
  }
  const send = commandSenderFor(given.client, 'publishStats.client')
  const instance = given.instance
  if (typeof instance !== 'string' || instance.length === 0 || instance.length > 200) {
    throw new InvalidOptionError('publishStats.instance', instance, 'a string of 1 to 200 characters')
  }
  const meta = given.meta ?? {}
  if (meta === null || (typeof meta !== 'object' && typeof meta !== 'function')) {
    throw new InvalidOptionError('publishStats.meta', meta, 'an object, or a function returning one')
  }
  if (typeof meta === 'object') checkMeta(meta)
  const intervalMs = integerOption('publishStats.intervalMs', given.intervalMs ?? 1000, 100, 3_600_000)
  const ttlSeconds = integerOption(
    'publishStats.ttlSeconds',
    given.ttlSeconds ?? Math.max(10, Math.ceil((2 * intervalMs) / 1000)),
    1,
    86_400,
  )
  if (ttlSeconds * 1000 <= intervalMs) {
    throw new InvalidOptionError(
      'publishStats.ttlSeconds',
      ttlSeconds,
      `a span longer than intervalMs (${intervalMs} ms), so an entry never expires between writes`,
    )
  }
  const prefix = stringOption('publishStats.prefix', given.prefix ?? DEFAULT_STATS_PREFIX, 128)
  const maxInstances = integerOption('publishStats.maxInstances', given.maxInstances ?? 1000, 1, 100_000)
  const onError = given.onError
  if (onError !== undefined && typeof onError !== 'function') {
    throw new InvalidOptionError('publishStats.onError', onError, 'a function')
  }
  const clock = given.clock ?? Date.now
  if (typeof clock !== 'function') throw new InvalidOptionError('publishStats.clock', clock, 'a function')

  const statsKey = instanceKey(prefix, instance)
  const index = indexKey(prefix)
  const ttl = String(ttlSeconds)
  let failing = false
  let closed = false
  let inFlight: Promise<void> | undefined

  const report = (error: unknown): void => {
    if (onError !== undefined) {
      try {
        onError(error)
      } catch {
        // The caller's handler failing must not take the process down either.
      }
      return
    }
    if (failing) return
    failing = true
    const message = error instanceof Error ? error.message : String(error)
    process.emitWarning(`sluice: publishing stats for ${instance} to Redis failed: ${message}`, {
      code: 'SLUICE_STATS_PUBLISH',
    })
  }

  /** This write's meta: a function's answer past the bound is reported, and `{}` published instead. */
  const metaNow = (): StatsMeta => {
    if (typeof meta !== 'function') return meta
    const value = meta()
    try {
      checkMeta(value)
      return value
    } catch (error) {
      report(error)
      return {}
    }
  }

  const write = async (): Promise<void> => {
    if (closed) return
    try {
      const payload: PublishedStats = { ...stats.snapshot(), instance, meta: metaNow() }
      const json = JSON.stringify(payload)
      const bytes = Buffer.byteLength(json)
      if (bytes > STATS_BOUNDS.valueBytes) {
        // Never written: every reader would skip it anyway, after paying to fetch it.
        throw new InvalidOptionError(
          'publishStats.stats',
          `a snapshot of ${bytes} bytes`,
          `one of at most ${STATS_BOUNDS.valueBytes} bytes as JSON (fewer limiters, seconds or topKeys in liveStats)`,
        )
      }
      const now = clock()
      await Promise.all([
        send(['SET', statsKey, json, 'EX', ttl]),
        send(['ZADD', index, String(now), instance]),
        send(['ZREMRANGEBYRANK', index, '0', String(-maxInstances - 1)]),
        send(['EXPIRE', index, ttl]),
      ])
      failing = false
    } catch (error) {
      report(error)
    }
  }

  /** Writes after the write in flight, if any: writes never overlap, and each sends the latest snapshot. */
  const writeNext = (): Promise<void> => {
    // Started synchronously when nothing is in flight: its commands are sent before anything after it.
    const next: Promise<void> = (inFlight === undefined ? write() : inFlight.then(write)).finally(() => {
      if (inFlight === next) inFlight = undefined
    })
    inFlight = next
    return next
  }

  const publishNow = (): Promise<void> => (closed ? Promise.resolve() : writeNext())

  // A tick that finds a write still in flight (Redis slow) skips, so writes never pile up.
  const timer = setInterval(() => {
    if (inFlight === undefined) void writeNext()
  }, intervalMs)
  timer.unref()
  void writeNext()

  return {
    publishNow,
    async close() {
      if (closed) return
      closed = true
      clearInterval(timer)
      // Not waiting for a write in flight (a client that never answers would hold close() too): its
      // commands were sent before these on the same connection, so Redis runs them first.
      try {
        await Promise.all([send(['DEL', statsKey]), send(['ZREM', index, instance])])
      } catch (error) {
        report(error)
      }
    },
  }
}

export interface ReadPublishedStatsOptions {
  client: StatsRedisClient
  /** The prefix the publishers use. Default `'sluice:stats'`. */
  prefix?: string
  /** Most recently published instances read at most. Default 1000. */
  maxInstances?: number
  /**
   * Told of every instance whose value is skipped: past the bounds (`STATS_BOUNDS`), not a snapshot, or past
   * the bytes one read fetches. `instance` is the name as the index holds it, cut at 200 characters
   * (ending in `…`).
   * Default: a process warning (`SLUICE_STATS_SKIPPED`) naming the instance and why.
   */
  onSkip?: (instance: string, reason: string) => void
}

/** Longest instance name a publisher may give (`publishStats.instance`), and the longest a reader uses. */
const MAX_INSTANCE = 200

/**
 * The latest snapshot of every instance whose entry has not expired, sorted by instance name. A value is
 * never fetched whole before its length is known: a value past `STATS_BOUNDS.valueBytes`, or past what is
 * left of `STATS_BOUNDS.readBytes` for this read (the most recent instances are read first), is skipped
 * unread, and one read is capped at the bound even if it grew meanwhile. A value that is not a snapshot
 * within the bounds is skipped too; each skip goes to `onSkip`. Rejects when Redis does.
 */
export async function readPublishedStats(options: ReadPublishedStatsOptions): Promise<PublishedStats[]> {
  const given = readOptions<ReadPublishedStatsOptions>(
    'readPublishedStats',
    options,
    ['client', 'prefix', 'maxInstances', 'onSkip'],
    true,
  )
  const send = commandSenderFor(given.client, 'readPublishedStats.client')
  const prefix = stringOption('readPublishedStats.prefix', given.prefix ?? DEFAULT_STATS_PREFIX, 128)
  const maxInstances = integerOption(
    'readPublishedStats.maxInstances',
    given.maxInstances ?? 1000,
    1,
    100_000,
  )
  const onSkip = given.onSkip ?? warnSkipped
  if (typeof onSkip !== 'function')
    throw new InvalidOptionError('readPublishedStats.onSkip', onSkip, 'a function')
  const skip = (instance: string, reason: string): void => {
    try {
      onSkip(instance.length > MAX_INSTANCE ? `${instance.slice(0, MAX_INSTANCE - 1)}…` : instance, reason)
    } catch {
      // A caller's handler failing must not fail the read of every other instance.
    }
  }

  const names = await send(['ZREVRANGE', indexKey(prefix), '0', String(maxInstances - 1)])
  if (!Array.isArray(names)) return []
  const instances: string[] = []
  for (const name of names.map(String)) {
    if (name.length <= MAX_INSTANCE) instances.push(name)
    else skip(name, `its name is longer than ${MAX_INSTANCE} characters`)
  }
  // Lengths first, most recent instance first: what one read fetches is known before anything is fetched.
  // A key of another type (WRONGTYPE) fails its own command only: that instance is skipped, not the read.
  const lengths = await Promise.all(
    instances.map((i) => send(['STRLEN', instanceKey(prefix, i)]).catch((error: unknown) => error)),
  )
  const gone: string[] = []
  const wanted: string[] = []
  let budget: number = STATS_BOUNDS.readBytes
  for (const [i, instance] of instances.entries()) {
    const length = Number(lengths[i])
    if (lengths[i] instanceof Error) skip(instance, `Redis cannot read it as text (${lengths[i].message})`)
    else if (!(length > 0)) gone.push(instance)
    else if (length > STATS_BOUNDS.valueBytes) {
      skip(instance, `its value is ${length} bytes, past the bound of ${STATS_BOUNDS.valueBytes}`)
    } else if (length > budget) {
      skip(instance, `this read already fetched what it may (${STATS_BOUNDS.readBytes} bytes in all)`)
    } else {
      budget -= length
      wanted.push(instance)
    }
  }
  // Capped: a value that grew since its length was read is fetched no further than the bound.
  const cap = String(STATS_BOUNDS.valueBytes)
  const values = await Promise.all(wanted.map((i) => send(['GETRANGE', instanceKey(prefix, i), '0', cap])))
  const out: PublishedStats[] = []
  for (const [i, value] of values.entries()) {
    const instance = wanted[i]!
    const text = typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : ''
    if (text === '') {
      gone.push(instance)
      continue
    }
    const parsed = Buffer.byteLength(text) > STATS_BOUNDS.valueBytes ? 'past' : parseStats(text)
    if (parsed === 'past') skip(instance, `its value grew past the bound of ${STATS_BOUNDS.valueBytes} bytes`)
    else if (typeof parsed === 'string') skip(instance, parsed)
    else out.push(parsed)
  }
  // An instance whose entry expired (by Redis's clock, never a publisher's) leaves the index here: no
  // publisher prunes others by its own clock, so one whose clock runs fast evicts nobody.
  if (gone.length > 0) await send(['ZREM', indexKey(prefix), ...gone]).catch(() => {})
  out.sort((a, b) => (a.instance < b.instance ? -1 : a.instance > b.instance ? 1 : 0))
  return out
}

function warnSkipped(instance: string, reason: string): void {
  process.emitWarning(`sluice: skipped the published stats of ${JSON.stringify(instance)}: ${reason}.`, {
    code: 'SLUICE_STATS_SKIPPED',
  })
}

/** A published value as a snapshot within the bounds, or why it is not one. */
function parseStats(value: string): PublishedStats | string {
  let parsed: unknown
  try {
    parsed = JSON.parse(value)
  } catch {
    return 'its value is not JSON'
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return 'its value is not an object'
  const stats = parsed as PublishedStats
  if (typeof stats.instance !== 'string' || stats.limiters === null || typeof stats.limiters !== 'object') {
    return 'its value is not a snapshot (instance, limiters)'
  }
  const seconds = stats.seconds
  if (!Number.isSafeInteger(seconds) || seconds < 1 || seconds > 3600) {
    return 'its seconds are not an integer from 1 to 3600'
  }
  const names = Object.keys(stats.limiters)
  if (names.length > STATS_BOUNDS.limiters) {
    return `it names ${names.length} limiters, past the bound of ${STATS_BOUNDS.limiters}`
  }
  let points = 0
  let keys = 0
  for (const name of names) {
    const limiter = (stats.limiters as Record<string, unknown>)[name] as Partial<LimiterStats> | null
    const series = limiter?.series
    const denied = limiter?.topDenied
    if (!Array.isArray(series) || !Array.isArray(denied))
      return `its limiter ${JSON.stringify(name.slice(0, 128))} is not { series, topDenied }`
    if (series.length > seconds)
      return `its limiter ${JSON.stringify(name.slice(0, 128))} has more points than its seconds`
    points += seconds
    keys += denied.length
  }
  if (points > STATS_BOUNDS.points) {
    return `it holds ${points} points (limiters × seconds), past the bound of ${STATS_BOUNDS.points}`
  }
  if (keys > STATS_BOUNDS.deniedKeys) {
    return `it holds ${keys} denied keys, past the bound of ${STATS_BOUNDS.deniedKeys}`
  }
  const meta = stats.meta === undefined ? {} : stats.meta
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) return 'its meta is not an object'
  const metaBytes = Buffer.byteLength(JSON.stringify(meta))
  if (metaBytes > STATS_BOUNDS.metaBytes) {
    return `its meta is ${metaBytes} bytes, past the bound of ${STATS_BOUNDS.metaBytes}`
  }
  stats.meta = meta
  // JSON.parse makes `__proto__` an own property; keep it one for readers who copy by assignment.
  stats.limiters = Object.assign(Object.create(null), stats.limiters)
  return stats
}

/** Throws `InvalidOptionError` naming `publishStats.meta` when `meta` is not an object within its bound. */
function checkMeta(meta: unknown): void {
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) {
    throw new InvalidOptionError('publishStats.meta', meta, 'an object')
  }
  let json: string
  try {
    json = JSON.stringify(meta)
  } catch (error) {
    throw new InvalidOptionError(
      'publishStats.meta',
      'an object',
      `one JSON can hold (${(error as Error).message})`,
    )
  }
  const bytes = Buffer.byteLength(json)
  if (bytes > STATS_BOUNDS.metaBytes) {
    throw new InvalidOptionError(
      'publishStats.meta',
      `an object of ${bytes} bytes as JSON`,
      `one of at most ${STATS_BOUNDS.metaBytes} bytes`,
    )
  }
}

function instanceKey(prefix: string, instance: string): string {
  return `${prefix}:instance:${instance}`
}

function indexKey(prefix: string): string {
  return `${prefix}:instances`
}

/** Sends one command (name first, then its single key, then the rest) and resolves with the raw reply. */
type CommandSender = (args: string[]) => Promise<unknown>

/** How to send commands on `client`: @sluice/redis's client seam, or throws `InvalidOptionError` naming `option`. */
function commandSenderFor(client: unknown, option: string): CommandSender {
  const connection = connectionFor(client, option)
  return (args) => connection.command(args[1]!, args)
}
