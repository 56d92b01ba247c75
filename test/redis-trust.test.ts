/**
 * Issue 24's store faults on a real Redis, each pinned by a test named for what broke, on both clients:
 * a concurrency rule starved behind the denied-key cache, late refunds that took a newer call's units,
 * weighted calls refused by meters, huge penalties past Redis's range, and batches lost on close.
 * The memory store's side of the same traces is in packages/core/test/trust.test.ts.
 */
import { concurrency, createLimiter, type Decision, type RuleInput } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind, clientOf, closeClients } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

let run = 0
const T0 = 1_800_000_000_000

/** A limiter on a fresh prefix, its RedisStore on a manual clock (`at` sets it and consumes). */
async function onClock(kind: ClientKind, rules: readonly RuleInput[], deniedCache = false) {
  const clock = { now: T0 }
  const store = new RedisStore({ client: await clientOf(kind, server), clock: () => clock.now, deniedCache })
  const limiter = createLimiter({ rules, store, prefix: `trust${run++}` })
  const move = (t: number) => {
    clock.now = T0 + t
  }
  const at = (t: number, cost = 1): Promise<Decision> => {
    move(t)
    return limiter.consume('k', { cost })
  }
  return { store, limiter, at, move }
}

describe.each(CLIENT_KINDS)('issue 24 on Redis (%s)', (kind) => {
  it('a concurrency denial is not cached: a lease released by another process admits the next call at once', async () => {
    const rules = [concurrency({ limit: 3, leaseMs: 600 })]
    const { limiter, at } = await onClock(kind, rules, true)
    // Another process on the same Redis, with its own store (and its own cache).
    const other = createLimiter({
      rules,
      store: new RedisStore({ client: await clientOf(kind, server), clock: () => T0 + 1 }),
      prefix: limiter.prefix,
    })
    const held = [await at(0), await at(0), await at(0)]
    expect(held.map((d) => d.allowed)).toEqual([true, true, true])
    const denied = await at(1)
    expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, 'rules', 599])
    await other.release('k', held[0]!)
    const next = await at(2)
    expect([next.allowed, next.reason]).toEqual([true, 'rules'])
  })

  it('64 callers holding a concurrency lease for ~4 ms each are all admitted, none denied from the cache', async () => {
    // The figures: 64 callers in one process, concurrency({ limit: 3, leaseMs: 600 }), the
    // default store options (denied-key cache on, Redis's clock; only a timeout no load reaches). Each
    // caller tries until it is admitted, holds ~4 ms, releases. A cached denial would keep every caller
    // out for up to 600 ms per round.
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 10_000 })
    const limiter = createLimiter({
      rules: [concurrency({ limit: 3, leaseMs: 600 })],
      store,
      prefix: `trust${run++}`,
      onStoreError: 'throw',
    })
    let admitted = 0
    let fromCache = 0
    let attempts = 0
    const caller = async () => {
      while (attempts < 100_000) {
        attempts++
        const d = await limiter.consume('k')
        if (d.reason === 'cache') fromCache++
        if (d.allowed) {
          admitted++
          await new Promise((resolve) => setTimeout(resolve, 4))
          await limiter.release('k', d)
          return
        }
        await new Promise(setImmediate)
      }
    }
    await Promise.all(Array.from({ length: 64 }, caller))
    expect({ admitted, fromCache }).toEqual({ admitted: 64, fromCache: 0 })
  })
})
