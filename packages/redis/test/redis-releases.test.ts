/**
 * Releases on Redis go in batches (packages/redis/src/releases.ts): the releases made in one turn share one
 * script call (at most 64 leases each), each caller's promise settles with that call's reply, a failing call
 * rejects every release it carries, a release sent after its lease ended changes no decision (it ends that
 * lease only, reading no clock, as the memory store does), and a consume made after a release on the same key
 * still finds the lease ended, and a release that did not land (Redis paused past its timeout) is sent again
 * until it lands, so a lost release never holds its unit for the whole lease. Cluster slots:
 * packages/redis/test/redis-cluster.test.ts.
 */
import { concurrency, createLimiter, type Decision, ErrorCode, MemoryStore, type Rule } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients, ioredis } from '../../../test/harness/clients.ts'
import { commandCalls, type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis(['--enable-debug-command', 'yes'])
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

let run = 0
const T0 = 1_800_000_000_000

/**
 * Polls `check` every 20 ms until it holds, at most `tries` times: for what the store does by itself once
 * Redis is back (a retried release), with no bound on how long that takes beyond the test's.
 */
async function eventually(check: () => Promise<boolean>, tries = 250): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true
    await sleep(20)
  }
  return false
}

/** Script calls Redis has run since its last CONFIG RESETSTAT (EVAL after a NOSCRIPT counted too). */
async function scriptCalls(): Promise<number> {
  return (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
}

describe.each(CLIENT_KINDS)('batched releases (%s)', (kind) => {
  it('ends 100 leases on 100 keys, made in one turn, in two script calls (at most 64 leases each)', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), deniedCache: false })
    const rule = concurrency({ limit: 1, leaseMs: 60_000 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `many${run++}` })
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`)
    const held = await Promise.all(keys.map((k) => limiter.consume(k)))
    expect(held.every((d) => d.allowed)).toBe(true)
    expect((await Promise.all(keys.map((k) => limiter.consume(k)))).some((d) => d.allowed)).toBe(false)
    await server.cli('CONFIG', 'RESETSTAT')
    const released = keys.map((k, i) => limiter.release(k, held[i]!))
    expect(await Promise.all(released)).toEqual(keys.map(() => undefined))
    expect(await scriptCalls()).toBe(2)
    for (const k of keys) {
      expect(await server.cli('EXISTS', `sluice:${limiter.prefix}:{${k}}:${rule.id}`)).toBe('0\n')
    }
    expect((await Promise.all(keys.map((k) => limiter.consume(k)))).every((d) => d.allowed)).toBe(true)
  })

  it('sends a release before a later call on its key: a consume made right after it finds the lease ended', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), deniedCache: false })
    const limiter = createLimiter({ rules: [concurrency({ limit: 1 })], store, prefix: `order${run++}` })
    const a = await limiter.consume('k')
    const released = limiter.release('k', a)
    const b = await limiter.consume('k')
    expect(b.allowed).toBe(true)
    await released
    const c = limiter.consume('k')
    // Released twice in one turn, and a third time once it is long over: idempotent.
    await Promise.all([limiter.release('k', b), limiter.release('k', b)])
    await limiter.release('k', b)
    expect((await c).allowed).toBe(false)
    expect((await limiter.consume('k')).allowed).toBe(true)
  })

  it('changes no decision with a release sent after its lease ended (or of a lease it never held)', async () => {
    const clock = { now: T0 }
    const redis = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      deniedCache: false,
    })
    const memory = new MemoryStore({ clock: () => clock.now })
    const rule = concurrency({ limit: 2, leaseMs: 1000 }) as Rule
    const prefix = `ended${run++}`
    const limiters = [redis, memory].map((store) => createLimiter({ rules: [rule], store, prefix }))
    const zset = `sluice:${prefix}:{k}:${rule.id}`
    const at = async (t: number) => {
      clock.now = T0 + t
      return Promise.all(limiters.map((l) => l.consume('k')))
    }
    const [a, m1] = await at(0)
    const [b] = await at(500)
    clock.now = T0 + 1000
    expect(await server.cli('ZRANGE', zset, '0', '-1')).toBe(`${a!.lease}\n${b!.lease}\n`)
    // a ended at T0 + 1000 and is still in the set: its release takes it out (and only it, as the memory
    // store drops it); the release of a lease never held changes nothing.
    const never = { ...a!, lease: 'none:1', rules: a!.rules.map((d) => ({ ...d, lease: 'none:1' })) }
    await Promise.all([
      limiters[0]!.release('k', a!),
      limiters[0]!.release('k', never),
      limiters[1]!.release('k', m1!),
      limiters[1]!.release('k', never),
    ])
    expect(await server.cli('ZRANGE', zset, '0', '-1')).toBe(`${b!.lease}\n`)
    const figures = (d: Decision) => [d.allowed, d.remaining, d.resetMs, d.retryAfterMs]
    const [r, m] = await at(1000)
    expect(figures(r!)).toEqual(figures(m!))
    expect(figures(r!)).toEqual([true, 0, 1000, 0])
  })

  it('ends the other leases of a batch whatever ids it also carries (quotes, backslashes, NUL, emoji, a lone surrogate)', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), deniedCache: false })
    const rule = concurrency({ limit: 1 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `odd${run++}` })
    const keys = ['a', 'b', 'c']
    const held = await Promise.all(keys.map((k) => limiter.consume(k)))
    // Ids no consume made (the leases go as one JSON array, which Redis's cjson reads): each changes nothing.
    const odd = ['"', '\\', 'x\u0000y', '\u00e9\ud83d\ude00', 'a\ud800b', '\udc00', '[1]', '1']
    const forged = odd.map((lease) => ({
      ...held[1]!,
      lease,
      rules: held[1]!.rules.map((d) => ({ ...d, lease })),
    }))
    const released = [
      limiter.release('a', held[0]!),
      ...forged.map((d) => limiter.release('b', d)),
      limiter.release('c', held[2]!),
    ]
    expect(await Promise.all(released)).toEqual(released.map(() => undefined))
    const zset = (k: string) => `sluice:${limiter.prefix}:{${k}}:${rule.id}`
    expect(await server.cli('EXISTS', zset('a'), zset('c'))).toBe('0\n')
    expect(await server.cli('ZRANGE', zset('b'), '0', '-1')).toBe(`${held[1]!.lease}\n`)
    expect((await limiter.consume('b')).allowed).toBe(false)
    expect((await Promise.all(['a', 'c'].map((k) => limiter.consume(k)))).every((d) => d.allowed)).toBe(true)
  })

  it('starts a new call for a release made after the waiting one timed out (a turn longer than the timeout)', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 200, deniedCache: false })
    const rule = concurrency({ limit: 1 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `stale${run++}` })
    const [a, b] = [await limiter.consume('a'), await limiter.consume('b')]
    const outcomes = await new Promise<PromiseSettledResult<void>[]>((resolve) => {
      // Made in a turn's last phase, so its call waits for the next turn's, after that turn's timers: the
      // first of them rejects it (its timeout has passed), the second makes another release.
      setImmediate(() => {
        const first = limiter.release('a', a)
        // Looked at below, in a later timer: handled now, so its rejection is not reported as unhandled.
        first.catch(() => {})
        setTimeout(() => {
          const second = limiter.release('b', b)
          Promise.allSettled([first, second]).then(resolve)
        }, 250)
        const until = performance.now() + 300
        while (performance.now() < until) {}
      })
    })
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'fulfilled'])
    expect(await server.cli('ZCARD', `sluice:${limiter.prefix}:{b}:${rule.id}`)).toBe('0\n')
    // The timed-out release never went: the store sends it again, and it ends its lease.
    const zcard = () => server.cli('ZCARD', `sluice:${limiter.prefix}:{a}:${rule.id}`)
    expect(await eventually(async () => (await zcard()) === '0\n')).toBe(true)
  })

  it('rejects every release of a call that fails (a key of another type under the prefix)', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), deniedCache: false })
    const rule = concurrency({ limit: 1 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `failed${run++}` })
    const keys = ['a', 'b', 'c']
    const held = await Promise.all(keys.map((k) => limiter.consume(k)))
    await server.cli('SET', `sluice:${limiter.prefix}:{b}:${rule.id}`, 'not a sorted set')
    const outcomes = await Promise.allSettled(keys.map((k, i) => limiter.release(k, held[i]!)))
    for (const o of outcomes) {
      expect(o.status).toBe('rejected')
      const reason = (o as PromiseRejectedResult).reason as { code: string; message: string }
      expect(reason.code).toBe(ErrorCode.STORE_ERROR)
      expect(reason.message).toMatch(/WRONGTYPE/)
    }
    // The failed releases wait to go again until their leases end: closing sends them once more and stops,
    // so no later test's count of script calls sees them.
    await store.close()
  })

  it('rejects every release of a call past its timeout; the late script ends nothing, the store sends them again', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 50, deniedCache: false })
    const rule = concurrency({ limit: 1 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `late${run++}` })
    const keys = ['a', 'b', 'c']
    const held = await Promise.all(keys.map((k) => limiter.consume(k)))
    const admin = await ioredis(server)
    const slept = admin.call('DEBUG', 'SLEEP', '0.3')
    await sleep(20)
    const outcomes = await Promise.allSettled(keys.map((k, i) => limiter.release(k, held[i]!)))
    for (const o of outcomes) {
      expect(o.status).toBe('rejected')
      expect(((o as PromiseRejectedResult).reason as { code: string }).code).toBe(ErrorCode.STORE_TIMEOUT)
    }
    await slept
    const zcards = () =>
      Promise.all(keys.map((k) => server.cli('ZCARD', `sluice:${limiter.prefix}:{${k}}:${rule.id}`)))
    expect(await eventually(async () => (await zcards()).every((n) => n === '0\n'))).toBe(true)
  })

  it('sends a release lost while Redis was paused again: the next consume is admitted once Redis is back, not at the lease end', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 100, deniedCache: false })
    // The default lease, 60 s: far past this test, so only a release can free a unit.
    const rule = concurrency({ limit: 2 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `paused${run++}` })
    const zset = `sluice:${limiter.prefix}:{k}:${rule.id}`
    const held = [await limiter.consume('k'), await limiter.consume('k')]
    expect((await limiter.consume('k')).allowed).toBe(false)
    const admin = await ioredis(server)
    await admin.call('CLIENT', 'PAUSE', '300', 'ALL')
    const outcomes = await Promise.allSettled(held.map((d) => limiter.release('k', d)))
    for (const o of outcomes) {
      expect(((o as PromiseRejectedResult).reason as { code: string }).code).toBe(ErrorCode.STORE_TIMEOUT)
    }
    // Answered once the pause is over.
    await admin.ping()
    expect(await eventually(async () => (await server.cli('ZCARD', zset)) === '0\n')).toBe(true)
    const after = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
    expect(after.map((d) => d.allowed)).toEqual([true, true, false])
  })

  it('never shuts a limit of 8 by lost releases: three rounds of all eight released while Redis is paused', async () => {
    const store = new RedisStore({ client: await clientOf(kind, server), timeoutMs: 50, deniedCache: false })
    const rule = concurrency({ limit: 8 }) as Rule
    const limiter = createLimiter({ rules: [rule], store, prefix: `shut${run++}` })
    const admin = await ioredis(server)
    for (let round = 0; round < 3; round++) {
      const held = await Promise.all(Array.from({ length: 9 }, () => limiter.consume('k')))
      expect(held.filter((d) => d.allowed)).toHaveLength(8)
      await admin.call('CLIENT', 'PAUSE', '200', 'ALL')
      const outcomes = await Promise.allSettled(held.map((d) => limiter.release('k', d)))
      expect(outcomes.filter((o) => o.status === 'rejected')).toHaveLength(8)
      await admin.ping()
      const zset = `sluice:${limiter.prefix}:{k}:${rule.id}`
      expect(await eventually(async () => (await server.cli('ZCARD', zset)) === '0\n')).toBe(true)
    }
    const last = await Promise.all(Array.from({ length: 9 }, () => limiter.consume('k')))
    expect(last.filter((d) => d.allowed)).toHaveLength(8)
  })
})
