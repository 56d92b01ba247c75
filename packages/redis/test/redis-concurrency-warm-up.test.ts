/**
 * concurrency and warmUp on a real Redis: the warm-up trace worked by hand (packages/core/test/concurrency-warm-up.test.ts)
 * gives the same decisions; leases released, idempotently; and concurrency across 4 processes × 256 calls in
 * flight never holds more than its limit, and gives back the units of a killed process within leaseMs.
 */
import { concurrency, createLimiter, type Decision, type Rule, warmUp } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { startWorker, stopWorkers } from '../../../test/harness/workers.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  stopWorkers()
  await closeClients()
  await stopAll()
})

let run = 0
const T0 = 1_800_000_000_000

const figures = (d: Decision) => [d.allowed, d.remaining, d.resetMs, d.retryAfterMs, d.waitMs]

describe.each(CLIENT_KINDS)('the new rules on Redis (%s)', (kind) => {
  it('follows the warm-up trace worked by hand, decision for decision', async () => {
    const clock = { now: T0 }
    const store = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      deniedCache: false,
    })
    const limiter = createLimiter({
      rules: [warmUp({ ratePerSecond: 10, warmUpMs: 1000, maxQueueMs: 1000 })],
      store,
      prefix: `warm${run++}`,
    })
    const at = async (t: number, cost = 1) => {
      clock.now = T0 + t
      return figures(await limiter.consume('k', { cost }))
    }
    // The arithmetic is written out beside the same trace in packages/core/test/concurrency-warm-up.test.ts.
    expect(await at(0)).toEqual([true, 8, 280, 0, 0])
    expect(await at(0)).toEqual([true, 5, 520, 0, 280])
    expect(await at(0)).toEqual([true, 3, 720, 0, 520])
    expect(await at(0)).toEqual([true, 2, 880, 0, 720])
    expect(await at(0)).toEqual([true, 1, 1000, 0, 880])
    expect(await at(0)).toEqual([true, 0, 1100, 0, 1000])
    expect(await at(0)).toEqual([false, 0, 1100, 100, 0])
    expect(await at(3000)).toEqual([true, 8, 280, 0, 0])
    expect(await at(3280)).toEqual([true, 8, 240, 0, 0])
    expect(await at(3620)).toEqual([true, 8, 240, 0, 0])
    expect(await at(3860, 3)).toEqual([true, 6, 480, 0, 0])
    expect(await at(4340)).toEqual([true, 10, 100, 0, 0])
  })

  it('holds leases in a sorted set scored by their end; release is idempotent', async () => {
    const clock = { now: T0 }
    const store = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      deniedCache: false,
    })
    const rule = concurrency({ limit: 2, leaseMs: 1000 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `conc${run++}` })
    const a = await limiter.consume('k')
    clock.now = T0 + 400
    const b = await limiter.consume('k')
    expect([a.lease, b.lease].every((l) => /^[\w-]{16}[0-9a-f]{3,}:1$/.test(l!))).toBe(true)
    const zset = `sluice:${limiter.prefix}:{k}:${rule.id}`
    expect(await server.cli('ZSCORE', zset, a.lease!)).toBe(`${T0 + 1000}\n`)
    clock.now = T0 + 500
    expect(figures(await limiter.consume('k'))).toEqual([false, 0, 900, 500, 0])
    await limiter.release('k', b)
    await limiter.release('k', b)
    expect(Number(await server.cli('ZCARD', zset))).toBe(1)
    const c = await limiter.consume('k')
    expect(c.allowed).toBe(true)
    expect(c.rules[0]!.unit).toBe('concurrent-requests')
    clock.now = T0 + 999
    expect((await limiter.consume('k')).allowed).toBe(false)
    clock.now = T0 + 1000
    expect((await limiter.consume('k')).allowed).toBe(true)
  })
})

describe.each(CLIENT_KINDS)('concurrency across processes (%s)', (client) => {
  it('never holds more than its limit with 4 processes x 256 calls in flight', async () => {
    const LIMIT = 20
    const prefix = `procs-conc${run++}`
    const workers = Array.from({ length: 4 }, () => startWorker('concurrency-caller.mjs'))
    await Promise.all(
      workers.map((w) =>
        w.ask({
          setup: { client, host: server.host, port: server.port, prefix, limit: LIMIT, leaseMs: 60_000 },
        }),
      ),
    )
    const results = await Promise.all(
      workers.map((w) =>
        w.ask<{ held: [number, number][]; denied: number }>({
          run: { calls: 1500, inFlight: 256, holdMs: 15 },
        }),
      ),
    )
    const intervals = results.flatMap((r) => r.held)
    // Every call was answered. Leases were given back and taken again: well over the limit were admitted
    // over the run (how many depends on how fast the machine turns calls around, so only the reuse is asserted).
    expect(intervals.length + results.reduce((n, r) => n + r.denied, 0)).toBe(4 * 1500)
    expect(intervals.length).toBeGreaterThan(2 * LIMIT)
    // The most intervals open at one instant (each lies within its lease: after admission, before release).
    const events = intervals.flatMap(([from, to]) => [
      [from, 1],
      [to, -1],
    ])
    // At one ms, ends before starts: intervals are half-open at their end.
    events.sort((x, y) => x[0]! - y[0]! || x[1]! - y[1]!)
    let open = 0
    let most = 0
    for (const [, delta] of events) {
      open += delta!
      most = Math.max(most, open)
    }
    expect(most).toBeLessThanOrEqual(LIMIT)
    expect(most).toBeGreaterThan(LIMIT / 2)
    for (const w of workers) await w.kill()
  })

  it('gives back the units of a process killed while holding them, within leaseMs', async () => {
    const prefix = `killed-conc${run++}`
    const setup = { client, host: server.host, port: server.port, prefix, limit: 3, leaseMs: 1500 }
    const holder = startWorker('concurrency-caller.mjs')
    const other = startWorker('concurrency-caller.mjs')
    await Promise.all([holder.ask({ setup }), other.ask({ setup })])
    expect(await holder.ask({ take: 3 })).toEqual({ taken: 3 })
    await holder.kill()
    const denied = await other.ask<{ allowed: boolean; retryAfterMs: number }>({ consume: true })
    expect(denied.allowed).toBe(false)
    expect(denied.retryAfterMs).toBeGreaterThan(0)
    expect(denied.retryAfterMs).toBeLessThanOrEqual(1500)
    await sleep(denied.retryAfterMs + 20)
    const back = await other.ask<{ allowed: boolean }>({ consume: true })
    expect(back.allowed).toBe(true)
    await other.kill()
  })
})
