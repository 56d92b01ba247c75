/**
 * @module What each bench case measures: a `consume(key) => Promise` per subject, built the way each
 * library's README shows, with limits so high that nothing is denied (every subject is checked for that).
 *
 * sluice runs all five algorithms; the peers only have fixed windows (rate-limiter-flexible's
 * RateLimiterMemory/RateLimiterRedis count points per `duration`, express-rate-limit's stores and
 * @fastify/rate-limit count hits per `windowMs`), so they stand next to sluice's fixedWindow.
 */
import { createRequire } from 'node:module'
import { sluice } from './sluice.mjs'

const {
  concurrency,
  createLimiter,
  createLimitTable,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  quota,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} = await sluice('core')

export const ALGORITHMS = ['fixedWindow', 'slidingLog', 'slidingWindow', 'tokenBucket', 'leakyBucket']

/**
 * The rules of the second wave, measured beside the others (sluice only: no peer and no raw-script
 * ceiling has them). A concurrency subject releases each lease as soon as it is granted: a decision and a
 * release per call, two store calls (two round trips on Redis), as a request that holds a unit does.
 */
export const MORE_RULES = ['concurrency', 'warmUp']

/** Limits no run reaches (each run is a fresh process or a flushed Redis), small enough to stay small integers in V8 as real limits do. */
export const HIGH = 1e9
/**
 * The windows of every subject: a minute, or what `SLUICE_BENCH_WINDOW_MS` says. The cases callgrind counts
 * run with a day (lib/callgrind.mjs), whose windows end at midnight UTC only. A minute ended somewhere among
 * their counted calls in about one run in six, and every key's window then started afresh inside the count
 * (one build of sluice's fixed window read 1,950 instructions a call in such a run and 1,687 in the others),
 * where a real process pays that once a minute.
 */
export const WINDOW_MS = Number(process.env.SLUICE_BENCH_WINDOW_MS ?? 60_000)

/** One rule per algorithm at limits nothing reaches. slidingLog keeps a 1 s window so its log stays small. */
export function ruleFor(algorithm) {
  switch (algorithm) {
    case 'fixedWindow':
      return fixedWindow({ limit: HIGH, windowMs: WINDOW_MS })
    case 'slidingLog':
      return slidingLog({ limit: HIGH, windowMs: 1000 })
    case 'slidingWindow':
      return slidingWindow({ limit: HIGH, windowMs: WINDOW_MS, buckets: 10 })
    case 'tokenBucket':
      return tokenBucket({ capacity: HIGH, refillPerSecond: 1e9 })
    case 'leakyBucket':
      return leakyBucket({ ratePerSecond: 1e9, maxQueueMs: 1000 })
    case 'concurrency':
      return concurrency({ limit: 10_000, leaseMs: WINDOW_MS })
    case 'warmUp':
      return warmUp({ ratePerSecond: 1e9, warmUpMs: 1000, maxQueueMs: 1000 })
    case 'quota':
      // A UTC day: it ends at midnight UTC, where the counted cases' day windows end too.
      return quota({ limit: HIGH, per: 'day' })
    default:
      throw new Error(`unknown algorithm ${algorithm}`)
  }
}

const require = createRequire(import.meta.url)

/**
 * In-memory subjects. Each returns `{ consume(key): Promise, admitted(result): boolean, close() }`.
 *  - `sluice:<algorithm>`: createLimiter on a default MemoryStore, `await limiter.consume(key)`.
 *  - `sluice:table`: the payment gateway's shape: the same fixedWindow, read per call from a limit table
 *    (`rules: (key) => table.get(key)`) of 1,000 entries (one per key `client:0` to `client:999`, each
 *    its own rule object) and a `"*"` entry for every other key. Next to `sluice:fixedWindow`, the fixed
 *    list, it prices the table lookup and the per-call check of a rules function.
 *  - `sluice:costs`, `sluice:cost`: two named fixedWindows, each call 3 tokens by name, or 3 under both;
 *    `sluice:costs-equal`: 3 under each by name (the store is given one number: the names' reading alone).
 *  - `rlf`: rate-limiter-flexible RateLimiterMemory, `await rl.consume(key)` (rejects when limited).
 *  - `erl`: express-rate-limit's MemoryStore, `await store.increment(key)` (the middleware compares hits).
 *  - `map`: a bare Map counter, `Promise.resolve(count)`: the ceiling, with no clock and no window.
 *  - `map+clock`: a Map of fixed windows read with Date.now(): the least any fixed window must do.
 *  - `map+decision`: the same, answering what sluice's `consume` promises (docs/design/store.md): a
 *    Decision of its fields with its `rules` list of one RuleDecision, made fresh each call (a caller may
 *    keep it): the least a fixed window with sluice's answer must do, with no key check, no bound on keys,
 *    no rule dispatch.
 */
export function memorySubject(name, options = {}) {
  if (name === 'sluice:costs' || name === 'sluice:cost' || name === 'sluice:costs-equal') {
    // Two fixed windows, requests and tokens, as a token budget's call: 3 tokens named (`sluice:costs`, one
    // cost per rule) or 3 units under both (`sluice:cost`, a number): the difference prices the names.
    const store = new MemoryStore(storeOptions(options))
    const rules = [
      fixedWindow({ limit: HIGH, windowMs: WINDOW_MS, name: 'requests' }),
      fixedWindow({ limit: HIGH, windowMs: WINDOW_MS, name: 'tokens' }),
    ]
    const limiter = createLimiter({ rules, store })
    const call =
      name === 'sluice:costs'
        ? { cost: { tokens: 3 } }
        : name === 'sluice:costs-equal'
          ? { cost: { requests: 3, tokens: 3 } }
          : { cost: 3 }
    return {
      consume: (key) => limiter.consume(key, call),
      admitted: (d) => d.allowed === true,
      close: () => store.close(),
    }
  }
  if (name === 'sluice:table') {
    const store = new MemoryStore(storeOptions(options))
    const spec = { kind: 'fixedWindow', limit: HIGH, windowMs: WINDOW_MS }
    const entries = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`client:${i}`, [spec]]))
    const table = createLimitTable({ ...entries, '*': [spec] })
    const limiter = createLimiter({ rules: (key) => table.get(key), store })
    return {
      consume: (key) => limiter.consume(key),
      admitted: (d) => d.allowed === true,
      close: () => store.close(),
    }
  }
  if (name.startsWith('sluice:')) {
    const store = new MemoryStore(storeOptions(options))
    const limiter = createLimiter({ rules: [ruleFor(name.slice(7))], store })
    return {
      consume: name === 'sluice:concurrency' ? consumeAndRelease(limiter) : (key) => limiter.consume(key),
      admitted: (d) => d.allowed === true,
      close: () => store.close(),
    }
  }
  if (name === 'rlf') {
    const { RateLimiterMemory } = require('rate-limiter-flexible')
    const rl = new RateLimiterMemory({ points: HIGH, duration: WINDOW_MS / 1000 })
    return { consume: (key) => rl.consume(key), admitted: (r) => r.remainingPoints >= 0, close() {} }
  }
  if (name === 'erl') {
    const { MemoryStore: ErlMemoryStore } = require('express-rate-limit')
    const store = new ErlMemoryStore()
    store.init({ windowMs: WINDOW_MS })
    return {
      consume: (key) => store.increment(key),
      admitted: (info) => info.totalHits <= HIGH,
      close: () => store.shutdown(),
    }
  }
  if (name === 'fastify-local') {
    // @fastify/rate-limit's in-memory store (an LRU), sized to hold every key of the run.
    const LocalStore = require('@fastify/rate-limit/store/LocalStore.js')
    const store = new LocalStore(false, false, options.maxKeys ?? 1_000_000)
    const incr = (key) =>
      new Promise((resolve, reject) =>
        store.incr(key, (error, result) => (error ? reject(error) : resolve(result)), WINDOW_MS, HIGH),
      )
    return { consume: incr, admitted: (r) => r.current <= HIGH, close() {} }
  }
  if (name === 'map') {
    const counts = new Map()
    return {
      consume(key) {
        const count = (counts.get(key) ?? 0) + 1
        counts.set(key, count)
        return Promise.resolve(count)
      },
      admitted: (count) => count <= HIGH,
      close() {},
    }
  }
  if (name === 'map+clock') {
    const windows = new Map()
    return {
      consume(key) {
        const w = windowOf(windows, key, Date.now())
        w.count++
        return Promise.resolve(w.count)
      },
      admitted: (count) => count <= HIGH,
      close() {},
    }
  }
  if (name === 'map+decision') {
    const windows = new Map()
    return {
      consume(key) {
        const now = Date.now()
        const w = windowOf(windows, key, now)
        const allowed = w.count < HIGH
        if (allowed) w.count++
        const resetMs = w.start + WINDOW_MS - now
        const d = {
          rule: 'fixedWindow',
          allowed,
          limit: HIGH,
          remaining: HIGH - w.count,
          resetMs,
          retryAfterMs: allowed ? 0 : resetMs,
          waitMs: 0,
          windowSeconds: WINDOW_MS / 1000,
        }
        return Promise.resolve({
          allowed,
          limit: HIGH,
          remaining: d.remaining,
          resetMs,
          retryAfterMs: d.retryAfterMs,
          waitMs: 0,
          rule: d.rule,
          rules: [d],
          reason: 'rules',
          countedAt: allowed ? now : undefined,
        })
      },
      admitted: (decision) => decision.allowed === true,
      close() {},
    }
  }
  throw new Error(`unknown memory subject ${name}`)
}

/** The floors' fixed window of `key` at `now`, made or begun afresh when missing or past. */
function windowOf(windows, key, now) {
  const start = now - (now % WINDOW_MS)
  let w = windows.get(key)
  if (w === undefined) {
    w = { start, count: 0 }
    windows.set(key, w)
  } else if (w.start !== start) {
    w.start = start
    w.count = 0
  }
  return w
}

/** A sluice MemoryStore's options from a subject's: `maxKeys`, and `sweepIntervalMs` (0: no sweep timer). */
function storeOptions(options) {
  const out = {}
  if (options.maxKeys !== undefined) out.maxKeys = options.maxKeys
  if (options.sweepIntervalMs !== undefined) out.sweepIntervalMs = options.sweepIntervalMs
  return out
}

/**
 * A concurrency limiter's call as a request through the HTTP kit makes it: the decision is awaited, and
 * the release of its lease is sent as the response ends, awaited by nobody (@sluice/core/http's
 * `releaseOnEnd`): the request has its answer by then, so the release's round trip is not on its path. A
 * failed release fails the next call, so the case cannot pass while leases leak. `awaited`: the caller
 * awaits the release too (two round trips per call, as `await limiter.release` costs).
 */
export function consumeAndRelease(limiter, awaited = false) {
  let failed
  return async (key) => {
    if (failed !== undefined) throw failed
    const d = await limiter.consume(key)
    if (awaited) await limiter.release(key, d)
    else
      limiter.release(key, d).catch((error) => {
        failed ??= error
      })
    return d
  }
}
