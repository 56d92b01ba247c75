/**
 * @module The RedisStore's options: the public type with its defaults, and the one place they are checked
 * and resolved (a bad option is refused with a coded error at construction, naming the option).
 */
import { InvalidOptionError } from '@sluice/core'
import {
  functionOption,
  given,
  integerOption,
  labelOption,
  MAX_TIMER_MS,
  readOptions,
} from '@sluice/core/options'
import { connectionFor, type RedisClientLike, type RedisConnection } from './client.ts'

export interface RedisStoreOptions {
  /**
   * The Redis client, owned by the caller (`close()` leaves it open). Recommended settings, so calls
   * fail fast instead of queueing while Redis is away:
   * ioredis `new Redis({ enableOfflineQueue: false, maxRetriesPerRequest: 1 })`, or for a Cluster
   * `new Cluster(nodes, { enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } })`;
   * node-redis `createClient({ disableOfflineQueue: true })`; iovalkey as ioredis; Valkey GLIDE
   * `GlideClient.createClient({ addresses, requestTimeout })` or `GlideClusterClient.createClient(...)`.
   * Wait for the client to be ready before the first call (ioredis `'ready'` event, node-redis
   * `await client.connect()`; GLIDE's `createClient` resolves once connected).
   */
  client: RedisClientLike
  /**
   * Namespace of every key this store writes: `<prefix>:<limiter prefix>:{<key>}:<rule id>`.
   * 1 to 128 printable ASCII characters without spaces, quotes, backslashes or braces. Default `"sluice"`.
   */
  prefix?: string
  /**
   * Longest wait for Redis per call, in ms (an integer >= 1). Past it the call rejects with a
   * `StoreError` coded `ERR_SLUICE_STORE_TIMEOUT`, and the limiter's `onStoreError` decides. The call's
   * script still reaches Redis, but it carries this deadline in Redis's clock and, starting after it,
   * counts nothing; one that ran in time but answered late has its units given back: a call answered by
   * `onStoreError` is not left counted (docs/redis.md states the bounds). Default 100.
   */
  timeoutMs?: number
  /**
   * Time in ms for the scripts, instead of Redis's `TIME`. For tests that drive the memory store and this
   * store through the same trace. Keys still expire by Redis's own clock: their TTLs are computed in the
   * given clock's ms plus 1 s of slack, so the clock must not run slower than real time. Also drives the
   * denied-key cache. Default: Redis's clock.
   */
  clock?: () => number
  /**
   * The process-local cache of denied keys: after a denial, the same call (same prefix, key and rules,
   * a cost at least as large) is answered from memory until its `retryAfterMs` has passed, with no round
   * trip. `true` (default) holds up to 10,000 keys; `{ maxKeys }` sets the bound; `false` turns it off.
   * Its answers count `retryAfterMs` and `resetMs` down and keep the rest of the denial as it was.
   */
  deniedCache?: boolean | { maxKeys?: number }
  /**
   * Most calls sent to the client and not yet answered by it (timed-out calls count until the client
   * gives up on them). Past it calls reject at once with a `StoreError`, so commands cannot pile up
   * without bound while Redis is away. An integer >= 1. Default 10,000.
   */
  maxInFlight?: number
  /**
   * Prefetch: for consumes whose rules are all fixedWindow, slidingWindow, slidingLog or tokenBucket, one
   * script call counts a batch of up to `units` units on the key (default 64), which this process then
   * spends locally, answering `reason: 'prefetch'` with no round trip, for at most `ms` (default 100);
   * units left then are returned. The next batch is fetched once half of one is spent. A batch starts
   * at 1, grows with the key's local demand and is never more than 1/16 of what any rule has left, so
   * near the limit every call is decided in Redis. The count is never exceeded; a sliding window can pass,
   * in any span of `windowMs`, at most the units prefetched in the `ms` before it beyond its limit.
   * `true` for the defaults. Default off.
   */
  prefetch?: boolean | { units?: number; ms?: number }
}

/** The options checked, with their defaults applied; an off layer is undefined. */
export interface StoreConfig {
  /** The caller's client, and the store's way of sending through it. */
  readonly client: RedisClientLike
  readonly connection: RedisConnection
  readonly prefix: string
  readonly timeoutMs: number
  readonly maxInFlight: number
  readonly clock: (() => number) | undefined
  readonly prefetch: { readonly units: number; readonly ms: number } | undefined
  readonly deniedCacheKeys: number | undefined
}

const DEFAULT_DENIED_CACHE_KEYS = 10_000
const KNOWN_OPTIONS: (keyof RedisStoreOptions)[] = [
  'client',
  'prefix',
  'timeoutMs',
  'clock',
  'deniedCache',
  'maxInFlight',
  'prefetch',
]

/** Checks the store's options, in the order they are listed, and applies their defaults. */
export function storeOptions(options: RedisStoreOptions): StoreConfig {
  const o = readOptions('RedisStore', options, KNOWN_OPTIONS, true)
  const connection = connectionFor(o.client, 'RedisStore.client')
  return {
    client: o.client as RedisClientLike,
    connection,
    // No ':' either: the store prefix ends at the first ':', so two stores' prefixes can never run into
    // each other's limiter prefixes (`a:b` + `c` against `a` + `b:c`).
    prefix: labelOption('RedisStore.prefix', given(o.prefix, 'sluice'), " ':{}"),
    timeoutMs: integerOption('RedisStore.timeoutMs', given(o.timeoutMs, 100), 1, MAX_TIMER_MS),
    maxInFlight: integerOption('RedisStore.maxInFlight', given(o.maxInFlight, 10_000), 1, MAX_TIMER_MS),
    clock: o.clock === undefined ? undefined : functionOption('RedisStore.clock', o.clock),
    prefetch: prefetchOption(o.prefetch),
    deniedCacheKeys: deniedCacheOption(o.deniedCache),
  }
}

const DEFAULT_PREFETCH_UNITS = 64
const DEFAULT_PREFETCH_MS = 100

/** Prefetch's units and ms, or undefined when it is off. */
function prefetchOption(option: unknown): { units: number; ms: number } | undefined {
  if (option === undefined || option === false) return undefined
  if (option === true) return { units: DEFAULT_PREFETCH_UNITS, ms: DEFAULT_PREFETCH_MS }
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ units?: number; ms?: number }>('RedisStore.prefetch', option, ['units', 'ms'])
    const units = integerOption(
      'RedisStore.prefetch.units',
      given(o.units, DEFAULT_PREFETCH_UNITS),
      1,
      1_000_000,
    )
    const ms = integerOption('RedisStore.prefetch.ms', given(o.ms, DEFAULT_PREFETCH_MS), 1, 60_000)
    return { units, ms }
  }
  throw new InvalidOptionError('RedisStore.prefetch', option, 'true, false or { units, ms }')
}

/** The denied-key cache's bound, or undefined when it is off. */
function deniedCacheOption(option: unknown): number | undefined {
  if (option === undefined || option === true) return DEFAULT_DENIED_CACHE_KEYS
  if (option === false) return undefined
  if (option !== null && typeof option === 'object' && !Array.isArray(option)) {
    const o = readOptions<{ maxKeys?: number }>('RedisStore.deniedCache', option, ['maxKeys'])
    const maxKeys = integerOption(
      'RedisStore.deniedCache.maxKeys',
      given(o.maxKeys, DEFAULT_DENIED_CACHE_KEYS),
      1,
    )
    return maxKeys
  }
  throw new InvalidOptionError('RedisStore.deniedCache', option, 'true, false or { maxKeys }')
}
