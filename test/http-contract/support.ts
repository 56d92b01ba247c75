/**
 * @module What the HTTP contract suite's cases share: the stores they run on (a memory store and a RedisStore
 * on a real redis-server, both on a manual clock), and plain HTTP clients, one of which can walk away.
 */
import http from 'node:http'
import { MemoryStore, type Store } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import type { Redis } from 'ioredis'
import { ioredis } from '../harness/clients.ts'
import { type RedisServer, startRedis } from '../harness/redis.ts'

/** One kind of store the cases run on. */
export interface StoreKind {
  readonly name: 'memory' | 'redis'
  /** A store for one test; each test starts from empty state. */
  store(): Store
  /** Moves the store's manual clock. */
  advance(ms: number): void
  /** The store's manual clock, now. */
  now(): number
  /** Starts what the kind needs (a redis-server), before the kind's tests. */
  setUp(): Promise<void>
  /** Empties the state between tests. */
  clear(): Promise<void>
}

/** A clock the test moves; it starts at the beginning of a minute, so windows align. */
function manualClock() {
  const clock = { now: 1_000_020_000 }
  return {
    now: () => clock.now,
    advance: (ms: number) => {
      clock.now += ms
    },
  }
}

/** A memory store on a manual clock. */
export function memoryKind(): StoreKind {
  const clock = manualClock()
  return {
    name: 'memory',
    store: () => new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }),
    advance: clock.advance,
    now: clock.now,
    setUp: async () => {},
    clear: async () => {},
  }
}

/**
 * A RedisStore (ioredis) on a redis-server of its own on a free port, stopped by the harness's `stopAll`.
 * Its scripts take their time from a manual clock (keys still expire by Redis's clock, a window and a second
 * after they were written: far beyond a test). A call may take 5 s before the store gives up on it, so a
 * loaded machine slows the suite down but does not turn a decision into `onStoreError`'s.
 */
export function redisKind(): StoreKind {
  const clock = manualClock()
  let server: RedisServer | undefined
  let client: Redis | undefined
  let stores = 0
  return {
    name: 'redis',
    // Each store a namespace of its own on the one client: limiters built on the default prefix in different
    // stores on one client are refused (they would share every count), and a case builds several.
    store: () =>
      new RedisStore({ client: client!, prefix: `contract${++stores}`, clock: clock.now, timeoutMs: 5000 }),
    advance: clock.advance,
    now: clock.now,
    setUp: async () => {
      server = await startRedis()
      client = await ioredis(server)
    },
    clear: async () => {
      await client!.flushall()
    },
  }
}

/** One answer, read in full. */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** Sends a request and reads its answer in full. */
export async function send(
  url: string,
  init: { method?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(url, init)
  return { status: res.status, headers: res.headers, text: await res.text() }
}

/** The rate-limit headers of an answer, by name. */
export function limitHeaders(answer: Answer): string[] {
  return [...answer.headers.keys()].filter((name) => /ratelimit|retry-after/.test(name))
}

/** Opens a GET the test can cut off (its client walks away); its errors are the point. */
export function openRequest(url: string): http.ClientRequest {
  const req = http.get(url, { agent: false })
  req.on('error', () => {})
  return req
}

/** Lets pending I/O callbacks and microtasks run. */
export const turn = (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve))
