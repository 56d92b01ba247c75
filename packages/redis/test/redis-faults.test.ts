/**
 * Faults: scripts flushed under load, Redis stalled, Redis killed and restarted, for every
 * `onStoreError` policy and both clients. Every call is answered within the store's timeout (plus a
 * margin for the event loop), nothing rejects unhandled, and decisions are exact again soon after Redis
 * returns. The only timed assertions are those "answered within the timeout" guarantees.
 */
import {
  createLimiter,
  type Decision,
  ErrorCode,
  type Limiter,
  MemoryStore,
  type Rule,
  type RuleInput,
  SluiceError,
  type StoreErrorPolicy,
  slidingLog,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ClientKind,
  clientOf,
  closeClients,
  ioredis,
  STORE_CLIENT_KINDS,
} from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled)
  server = await startRedis(['--enable-debug-command', 'yes'])
})

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled)
  await closeClients()
  await stopAll()
})

const TIMEOUT_MS = 100
/**
 * Slack for timers and the event loop on a busy machine; the store's own bound is TIMEOUT_MS. Redis stays
 * away longer than TIMEOUT_MS + MARGIN_MS (OUTAGE_MS), so a call that waited for it would still be caught.
 */
const MARGIN_MS = 1400
const OUTAGE_MS = 2000
const asRule = (r: RuleInput): Rule => r as Rule

interface Outcome {
  ms: number
  decision?: Decision
  error?: unknown
}

/** Keeps `lanes` callers consuming `key` until `during` resolves; records every call's outcome. */
async function drive(
  limiter: Limiter,
  key: string,
  lanes: number,
  during: () => Promise<void>,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = []
  let stop = false
  const lane = async () => {
    while (!stop) {
      const started = performance.now()
      try {
        const decision = await limiter.consume(key)
        outcomes.push({ ms: performance.now() - started, decision })
      } catch (error) {
        outcomes.push({ ms: performance.now() - started, error })
      }
      await sleep(2)
    }
  }
  const running = Array.from({ length: lanes }, lane)
  await during()
  stop = true
  await Promise.all(running)
  return outcomes
}

/** Resolves once `limiter` answers from Redis again (not from its `onStoreError` policy). */
async function recovered(store: RedisStore, prefix: string, rule: Rule): Promise<void> {
  const until = Date.now() + 10_000
  for (;;) {
    try {
      await store.apply(prefix, 'probe', [rule], 1, 'peek')
      return
    } catch {
      if (Date.now() > until) throw new Error('Redis did not come back within 10 s')
      await sleep(20)
    }
  }
}

/** `limit + 2` calls on a fresh key: exactly `limit` admitted, all decided by Redis. */
async function expectExact(limiter: Limiter, key: string, limit: number): Promise<void> {
  const decisions = await Promise.all(Array.from({ length: limit + 2 }, () => limiter.consume(key)))
  expect(decisions.filter((d) => d.allowed)).toHaveLength(limit)
  for (const d of decisions) expect(d.reason).toBe('rules')
}

let run = 0

/** NOSCRIPT error replies Redis has sent so far. */
async function noScriptErrors(): Promise<number> {
  const match = /errorstat_NOSCRIPT:count=(\d+)/.exec(await server.cli('INFO', 'errorstats'))
  return match === null ? 0 : Number(match[1])
}

describe.each(STORE_CLIENT_KINDS)('Redis faults (%s)', (kind: ClientKind) => {
  it('keeps every call exact while the script cache is flushed again and again', async () => {
    const client = await clientOf(kind, server)
    // No denied-key cache: every call, denied or not, must reach Redis through the flushes.
    const store = new RedisStore({ client, timeoutMs: 2000, deniedCache: false })
    const limit = 1500
    const limiter = createLimiter({
      rules: [slidingLog({ limit, windowMs: 600_000 })],
      store,
      prefix: `flush${run++}`,
      onStoreError: 'throw',
    })
    const noScriptBefore = await noScriptErrors()
    const outcomes = await drive(limiter, 'k', 64, async () => {
      for (let i = 0; i < 5; i++) {
        await sleep(30)
        await server.cli('SCRIPT', 'FLUSH')
      }
    })
    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([])
    const admitted = outcomes.filter((o) => o.decision?.allowed).length
    expect(admitted).toBe(Math.min(limit, outcomes.length))
    // The flushes did bite: Redis answered NOSCRIPT, and the store reloaded the script each time.
    expect(await noScriptErrors()).toBeGreaterThan(noScriptBefore)
  })

  it("loads a script before a fresh store's first calls: 64 started at once on an emptied script cache get no NOSCRIPT", async () => {
    const client = await clientOf(kind, server)
    await server.cli('SCRIPT', 'FLUSH')
    const noScriptBefore = await noScriptErrors()
    const store = new RedisStore({ client, deniedCache: false })
    const limiter = createLimiter({
      rules: [slidingLog({ limit: 100, windowMs: 60_000 })],
      store,
      prefix: `fresh${run++}`,
      onStoreError: 'throw',
    })
    const decisions = await Promise.all(Array.from({ length: 64 }, () => limiter.consume('k')))
    // Each counted once (a client may answer them in another order than they were made).
    expect(decisions.map((d) => d.remaining).sort((a, b) => b - a)).toEqual(
      Array.from({ length: 64 }, (_, i) => 99 - i),
    )
    expect(await noScriptErrors()).toBe(noScriptBefore)
  })

  it('rejects within the timeout while Redis stalls, and caps calls in flight', async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, timeoutMs: TIMEOUT_MS, maxInFlight: 20 })
    const rule = asRule(slidingLog({ limit: 1000, windowMs: 60_000 }))
    const prefix = `stall${run++}`
    const admin = await ioredis(server)
    const stalled = admin.call('DEBUG', 'SLEEP', String(OUTAGE_MS / 1000))
    await sleep(20)
    const started = performance.now()
    const calls = Array.from({ length: 30 }, () =>
      Promise.resolve(store.apply(prefix, 'k', [rule], 1, 'consume')).then(
        () => ({ ms: performance.now() - started, code: 'ok' }),
        (error: SluiceError) => ({ ms: performance.now() - started, code: error.code }),
      ),
    )
    const outcomes = await Promise.all(calls)
    for (const o of outcomes) expect(o.ms).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS)
    // 20 go to Redis and time out; the other 10 are refused at once.
    expect(outcomes.filter((o) => o.code === ErrorCode.STORE_TIMEOUT)).toHaveLength(20)
    expect(outcomes.filter((o) => o.code === ErrorCode.STORE_ERROR)).toHaveLength(10)
    await stalled
    await recovered(store, prefix, rule)
  })

  /** `calls` consumes of `key`, sent while Redis is paused: every one is answered by the 'deny' policy. */
  async function deniedWhilePaused(limiter: Limiter, key: string, calls: number): Promise<void> {
    const decisions = await Promise.all(Array.from({ length: calls }, () => limiter.consume(key)))
    expect(decisions.map((d) => `${d.allowed} ${d.reason}`)).toEqual(
      Array.from({ length: calls }, () => 'false store-error'),
    )
  }

  it('never counts a call answered by onStoreError after its timeout (Redis stopped by SIGSTOP, then resumed)', async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, timeoutMs: TIMEOUT_MS, deniedCache: false })
    const prefix = `stopped${run++}`
    const rule = asRule(slidingLog({ limit: 1000, windowMs: 600_000 }))
    const limiter = createLimiter({ rules: [rule], store, prefix, onStoreError: 'deny' })
    // A call before the pause, so the store knows Redis's clock.
    expect((await limiter.consume('warm')).allowed).toBe(true)
    const pid = server.pid!
    process.kill(pid, 'SIGSTOP')
    try {
      await deniedWhilePaused(limiter, 'k', 200)
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    // Redis now runs the 200 scripts it had queued, then this peek: none of them counted anything (a peek
    // reports what a call of cost 1 would leave).
    await recovered(store, prefix, rule)
    const after = await store.apply(prefix, 'k', [rule], 1, 'peek')
    expect(after[0]).toMatchObject({ allowed: true, remaining: 999 })
    expect(await server.cli('EXISTS', `sluice:${prefix}:{k}:${rule.id}`)).toBe('0\n')
    // And the store decides from Redis again, counting exactly.
    expect((await limiter.consume('k')).remaining).toBe(999)
  })

  it("never counts a call answered by onStoreError after its timeout, even before any reply told it Redis's clock (DEBUG SLEEP)", async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, timeoutMs: TIMEOUT_MS, deniedCache: false })
    const prefix = `slept${run++}`
    const rule = asRule(slidingLog({ limit: 1000, windowMs: 600_000 }))
    const limiter = createLimiter({ rules: [rule], store, prefix, onStoreError: 'deny' })
    const admin = await ioredis(server)
    const slept = admin.call('DEBUG', 'SLEEP', '0.5')
    await sleep(20)
    await deniedWhilePaused(limiter, 'k', 50)
    await slept
    await recovered(store, prefix, rule)
    expect((await store.apply(prefix, 'k', [rule], 1, 'peek'))[0]).toMatchObject({ remaining: 999 })
    expect(await server.cli('EXISTS', `sluice:${prefix}:{k}:${rule.id}`)).toBe('0\n')
  })

  it("counts a fresh store's first call exactly once (its first deadline is sent before it knows Redis's clock)", async () => {
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, timeoutMs: 2000, deniedCache: false })
    const prefix = `first${run++}`
    const rule = asRule(slidingLog({ limit: 10, windowMs: 600_000 }))
    const decisions = await Promise.all(
      Array.from({ length: 3 }, () => store.apply(prefix, 'k', [rule], 1, 'consume')),
    )
    expect(decisions.map((d) => d[0]!.remaining).sort()).toEqual([7, 8, 9])
    expect(await server.cli('ZCARD', `sluice:${prefix}:{k}:${rule.id}`)).toBe('3\n')
  })

  const policies: [string, () => StoreErrorPolicy][] = [
    ['allow', () => 'allow'],
    ['deny', () => 'deny'],
    ['throw', () => 'throw'],
    [
      'an insurance limiter',
      () =>
        createLimiter({
          rules: [slidingLog({ limit: 1_000_000, windowMs: 60_000, name: 'insurance' })],
          store: new MemoryStore(),
          prefix: 'insurance',
        }),
    ],
  ]

  // One restart for the four policies, each on a store and client of its own, driven side by side: what
  // each is asserted is what it would be alone, and the suite restarts Redis once per client kind, not four
  // times.
  it('answers within the timeout across a Redis restart with each onStoreError: allow, deny, throw, an insurance limiter', async () => {
    const runs = await Promise.all(
      policies.map(async ([name, policy]) => {
        const client = await clientOf(kind, server)
        const store = new RedisStore({ client, timeoutMs: TIMEOUT_MS })
        const prefix = `restart${run++}`
        const onStoreError = policy()
        const limiter = createLimiter({
          rules: [slidingLog({ limit: 1_000_000, windowMs: 60_000 })],
          store,
          prefix,
          onStoreError,
        })
        return { name, store, prefix, onStoreError, limiter }
      }),
    )
    const probe = asRule(slidingLog({ limit: 5, windowMs: 60_000 }))
    // The first caller to ask restarts Redis; every driver waits for that one restart.
    let restart: Promise<void> | undefined
    const restarted = () =>
      (restart ??= (async () => {
        await sleep(50)
        await server.kill()
        await sleep(OUTAGE_MS)
        await server.start()
      })())
    const outcomes = await Promise.all(
      runs.map(({ limiter, store, prefix }) =>
        drive(limiter, 'k', 4, async () => {
          await restarted()
          await recovered(store, `${prefix}-probe`, probe)
          await sleep(50)
        }),
      ),
    )
    for (const [i, { name, store, prefix, onStoreError }] of runs.entries()) {
      const mine = outcomes[i]!
      for (const o of mine) expect(o.ms, name).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS)
      const failed = mine.filter(
        (o) =>
          o.error !== undefined || o.decision?.reason === 'store-error' || o.decision?.rule === 'insurance',
      )
      expect(failed.length, name).toBeGreaterThan(0)
      if (onStoreError === 'throw') {
        for (const o of failed) {
          expect(o.error).toBeInstanceOf(SluiceError)
          expect([ErrorCode.STORE_TIMEOUT, ErrorCode.STORE_ERROR]).toContain((o.error as SluiceError).code)
        }
      } else {
        expect(
          mine.filter((o) => o.error !== undefined),
          name,
        ).toEqual([])
        for (const o of failed) expect(o.decision!.allowed, name).toBe(onStoreError !== 'deny')
      }
      await expectExact(
        createLimiter({ rules: [probe], store, prefix: `${prefix}-exact`, onStoreError: 'throw' }),
        'fresh',
        5,
      )
    }
    expect(unhandled).toEqual([])
  })
})

describe('Redis killed under a Valkey GLIDE client (standalone)', () => {
  it('fails calls at once once GLIDE is known to be down (each waited timeoutMs), and decides in Redis again once it is back', async () => {
    const own = await startRedis()
    // GLIDE's requestTimeout here is 2 s: a PING the store sends after a failed call waits that long.
    const store = new RedisStore({ client: await clientOf('glide', own), timeoutMs: TIMEOUT_MS })
    const rule = asRule(slidingLog({ limit: 1000, windowMs: 60_000 }))
    const prefix = `glide${run++}`
    const limiter = createLimiter({ rules: [rule], store, prefix, onStoreError: 'throw' })
    expect((await limiter.consume('k')).reason).toBe('rules')
    await own.kill()
    const errors: SluiceError[] = []
    const notConnected = () => errors.at(-1)?.message === 'The Redis client is not connected.'
    for (let i = 0; i < 100 && !notConnected(); i++) {
      await limiter.consume('k').catch((error: SluiceError) => errors.push(error))
      await sleep(20)
    }
    // Timed out while GLIDE's PING was on its way, then refused at once, as the other clients are.
    expect(errors[0]!.code).toBe(ErrorCode.STORE_TIMEOUT)
    expect(notConnected()).toBe(true)
    const next = await Promise.allSettled(Array.from({ length: 5 }, () => limiter.consume('k')))
    for (const o of next) {
      expect(((o as PromiseRejectedResult).reason as Error).message).toBe(
        'The Redis client is not connected.',
      )
    }
    await own.start()
    await recovered(store, prefix, rule)
    expect((await limiter.consume('k')).reason).toBe('rules')
    await store.close()
  }, 40_000)
})
