/**
 * Abuse controls on a real Redis, on a manual clock: the block steps (escalation, cap, forgetting, reset),
 * the denied-key cache with blocks, refunds and penalties of every rule with the figures the memory store
 * gives (packages/core/test/abuse.test.ts), and blocks shared by 4 processes.
 */
import {
  type BlockOptions,
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { commandCalls, type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
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

async function setup(
  kind: ClientKind,
  rules: readonly RuleInput[],
  block?: BlockOptions,
  deniedCache = false,
) {
  const clock = { now: T0 }
  const store = new RedisStore({
    client: await clientOf(kind, server),
    clock: () => clock.now,
    deniedCache,
    timeoutMs: 2000,
  })
  const limiter = createLimiter({ rules, store, block, prefix: `abuse${run++}` })
  const at = async (t: number, key = 'k', cost = 1) => {
    clock.now = T0 + t
    return limiter.consume(key, { cost })
  }
  const peekAt = async (t: number, key = 'k', cost = 1) => {
    clock.now = T0 + t
    return limiter.peek(key, { cost })
  }
  const move = (t: number) => {
    clock.now = T0 + t
  }
  return { store, limiter, at, peekAt, move }
}

const said = (d: Decision) => ({
  allowed: d.allowed,
  reason: d.reason,
  remaining: d.remaining,
  resetMs: d.resetMs,
  retryAfterMs: d.retryAfterMs,
})

describe.each(CLIENT_KINDS)('blocks on Redis (%s)', (kind) => {
  it('blocks a key the rules deny, doubling within forgetMs, capped at maxMs', async () => {
    // T0 is a multiple of 100 ms, so windows fall as in the memory store's test.
    const { at, peekAt } = await setup(kind, [fixedWindow({ limit: 1, windowMs: 100 })], {
      ms: 1000,
      factor: 2,
      maxMs: 3000,
      forgetMs: 10_000,
    })
    expect((await at(0)).allowed).toBe(true)
    expect(said(await at(1))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 99,
      retryAfterMs: 1000,
    })
    const blocked = { allowed: false, reason: 'blocked', remaining: 0, resetMs: 501, retryAfterMs: 501 }
    expect(said(await at(500))).toEqual(blocked)
    expect(said(await peekAt(500))).toEqual(blocked)
    expect(said(await at(1000))).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    expect((await at(1001)).allowed).toBe(true)
    expect(said(await at(1002))).toMatchObject({ reason: 'rules', retryAfterMs: 2000 })
    expect(said(await at(3001))).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    expect((await at(3002)).allowed).toBe(true)
    expect(said(await at(3003))).toMatchObject({ reason: 'rules', retryAfterMs: 3000 })
    expect((await at(6003)).allowed).toBe(true)
    expect(said(await at(6004))).toMatchObject({ reason: 'rules', retryAfterMs: 3000 })
    expect((await at(30_000)).allowed).toBe(true)
    expect(said(await at(30_001))).toMatchObject({ reason: 'rules', retryAfterMs: 1000 })
  })

  it('counts only the blocks that began less than forgetMs ago', async () => {
    const { at } = await setup(kind, [fixedWindow({ limit: 1, windowMs: 10 })], {
      ms: 100,
      factor: 3,
      maxMs: 10_000,
      forgetMs: 2500,
    })
    await at(0)
    expect((await at(1)).retryAfterMs).toBe(100)
    await at(101)
    expect((await at(102)).retryAfterMs).toBe(300)
    await at(402)
    expect((await at(403)).retryAfterMs).toBe(900)
    expect((await at(2600)).allowed).toBe(true)
    expect((await at(2601)).retryAfterMs).toBe(900)
    expect((await at(3501)).allowed).toBe(true)
    expect((await at(3502)).retryAfterMs).toBe(300)
  })

  it("keeps the block in the rule keys' hash slot, with a TTL until its starts stop counting", async () => {
    const { at, limiter } = await setup(kind, [fixedWindow({ limit: 1, windowMs: 10 })], {
      ms: 100,
      factor: 2,
      maxMs: 400,
      forgetMs: 5000,
    })
    await at(0)
    await at(1)
    const key = `sluice:${limiter.prefix}:{k}:!block`
    expect(await server.cli('HGET', key, 'u')).toBe(`${T0 + 101}\n`)
    expect(await server.cli('HGET', key, 'h')).toBe(`${T0 + 1}\n`)
    // 5000 ms from the start, plus the second of slack a caller's clock gets.
    const ttl = Number(await server.cli('PTTL', key))
    expect(ttl).toBeGreaterThan(5000)
    expect(ttl).toBeLessThanOrEqual(6000)
  })

  it('lifts the block and forgets its escalation on reset; the cache never outlives a lifted block', async () => {
    const { at, limiter, move } = await setup(
      kind,
      [fixedWindow({ limit: 1, windowMs: 10 })],
      { ms: 100, factor: 2, maxMs: 1000, forgetMs: 60_000 },
      true,
    )
    await at(0)
    expect((await at(1)).retryAfterMs).toBe(100)
    await at(101)
    expect((await at(102)).retryAfterMs).toBe(200)
    const calls = async () => (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
    const before = await calls()
    // Answered from the denied-key cache: blocked, with no round trip.
    expect(said(await at(150))).toMatchObject({ reason: 'blocked', retryAfterMs: 152 })
    expect(said(await at(160, 'k', 1))).toMatchObject({ reason: 'blocked', retryAfterMs: 142 })
    expect(await calls()).toBe(before)
    move(160)
    await limiter.reset('k')
    expect((await at(160)).allowed).toBe(true)
    expect((await at(161)).retryAfterMs).toBe(100)
  })

  it("refunds and penalizes each rule with the memory store's figures", async () => {
    {
      const { at, peekAt, limiter, move } = await setup(kind, [fixedWindow({ limit: 3, windowMs: 1000 })])
      await at(0, 'k', 3)
      move(10)
      await limiter.refund('k', { cost: 2 })
      expect(said(await peekAt(10))).toMatchObject({ allowed: true, remaining: 1 })
      move(2000)
      expect(said(await limiter.penalize('p', { cost: 5 }))).toEqual({
        allowed: false,
        reason: 'rules',
        remaining: 0,
        resetMs: 1000,
        retryAfterMs: 1000,
      })
      move(2001)
      await limiter.penalize('p', { cost: 2 })
      await limiter.refund('p', { cost: 4 })
      expect(said(await peekAt(2001, 'p'))).toMatchObject({ allowed: true, remaining: 1 })
    }
    {
      const { at, peekAt, limiter, move } = await setup(kind, [slidingLog({ limit: 5, windowMs: 1000 })])
      await at(0, 'k', 2)
      await at(10, 'k', 2)
      await at(20, 'k', 1)
      move(30)
      await limiter.refund('k', { cost: 2 })
      expect(said(await peekAt(30))).toMatchObject({ allowed: true, remaining: 1, resetMs: 1000 })
      expect((await at(30, 'k', 2)).allowed).toBe(true)
      expect(said(await at(30))).toMatchObject({ allowed: false, retryAfterMs: 970, resetMs: 1000 })
      expect(said(await peekAt(1000))).toMatchObject({ allowed: true, remaining: 1 })
      move(5000)
      expect(said(await limiter.penalize('p', { cost: 7 }))).toMatchObject({
        allowed: false,
        retryAfterMs: 1000,
      })
      expect((await at(5999, 'p')).allowed).toBe(false)
      expect((await at(6000, 'p')).allowed).toBe(true)
    }
    {
      const { at, peekAt, limiter, move } = await setup(kind, [
        slidingWindow({ limit: 6, windowMs: 300, buckets: 3 }),
      ])
      await at(0, 'k', 2)
      await at(100, 'k', 1)
      await at(200, 'k', 3)
      move(250)
      await limiter.refund('k', { cost: 4 })
      expect(said(await peekAt(250))).toMatchObject({ allowed: true, remaining: 3, resetMs: 250 })
      expect(said(await peekAt(300))).toMatchObject({ allowed: true, remaining: 5 })
      move(1000)
      expect(said(await limiter.penalize('p', { cost: 10 }))).toMatchObject({
        retryAfterMs: 300,
        resetMs: 300,
      })
    }
    {
      const { at, peekAt, limiter, move } = await setup(kind, [
        tokenBucket({ capacity: 4, refillPerSecond: 2 }),
      ])
      await at(0, 'k', 4)
      await limiter.refund('k')
      expect(said(await peekAt(0))).toMatchObject({ allowed: true, remaining: 0, resetMs: 2000 })
      move(0)
      expect(said(await limiter.penalize('p', { cost: 6 }))).toMatchObject({
        resetMs: 3000,
        retryAfterMs: 1500,
      })
      expect((await limiter.penalize('p', { cost: 1 })).retryAfterMs).toBe(1500)
      expect((await limiter.penalize('p', { cost: 3 })).retryAfterMs).toBe(2000)
      expect((await at(1999, 'p')).allowed).toBe(false)
      expect((await at(2000, 'p')).allowed).toBe(true)
    }
    {
      const { at, peekAt, limiter, move } = await setup(kind, [
        leakyBucket({ ratePerSecond: 10, maxQueueMs: 300 }),
      ])
      await at(0)
      const first = await at(0)
      const second = await at(0)
      expect(second.waitMs).toBe(200)
      move(10)
      await limiter.unqueue('k', first)
      expect((await peekAt(10)).waitMs).toBe(290)
      move(10)
      await limiter.unqueue('k', second)
      expect((await peekAt(10)).waitMs).toBe(190)
      move(50)
      await limiter.refund('k', { cost: 5 })
      expect((await peekAt(50)).waitMs).toBe(100)
      move(0)
      expect((await limiter.penalize('p', { cost: 2 })).waitMs).toBe(300)
      expect(said(await limiter.penalize('p', { cost: 5 }))).toMatchObject({ retryAfterMs: 500 })
      expect(said(await limiter.penalize('p', { cost: 5 }))).toMatchObject({ retryAfterMs: 600 })
      expect(said(await limiter.penalize('p', { cost: 1 }))).toMatchObject({ retryAfterMs: 600 })
    }
  })

  it('answers a penalty on a blocked key with the block', async () => {
    const { at, limiter, move } = await setup(kind, [fixedWindow({ limit: 1, windowMs: 10 })], { ms: 500 })
    await at(0)
    await at(1)
    move(2)
    expect(said(await limiter.penalize('k', { cost: 3 }))).toMatchObject({
      reason: 'blocked',
      retryAfterMs: 499,
    })
  })
})

describe.each(CLIENT_KINDS)('one block shared by 4 processes (%s)', (client) => {
  it('a key blocked by one process is denied by the others at their next call; a reset lifts it', async () => {
    const prefix = `shared-block${run++}`
    const setupOf = (deniedCache: boolean) => ({
      setup: {
        client,
        host: server.host,
        port: server.port,
        prefix,
        deniedCache,
        rules: [['fixedWindow', { limit: 1, windowMs: 3_600_000 }]],
        block: { ms: 60_000 },
      },
    })
    const workers = Array.from({ length: 4 }, () => startWorker('block-caller.mjs'))
    // Process 3 runs without the denied-key cache, to see a lift by another process at once.
    await Promise.all(workers.map((w, i) => w.ask(setupOf(i !== 3))))
    type Said = { allowed: boolean; reason: string; retryAfterMs: number }
    const consume = (i: number) => workers[i]!.ask<Said>({ consume: 'shared' })
    expect(await consume(0)).toMatchObject({ allowed: true, reason: 'rules' })
    const began = await consume(0)
    expect(began).toMatchObject({ allowed: false, reason: 'rules' })
    expect(began.retryAfterMs).toBeGreaterThanOrEqual(59_000)
    // Every other process: blocked at its first call (one round trip), then from its own cache.
    for (const i of [1, 2, 3]) {
      const d = await consume(i)
      expect(d).toMatchObject({ allowed: false, reason: 'blocked' })
      expect(d.retryAfterMs).toBeGreaterThan(50_000)
      expect(d.retryAfterMs).toBeLessThanOrEqual(60_000)
    }
    for (const i of [0, 1, 2, 3]) expect(await consume(i)).toMatchObject({ reason: 'blocked' })
    // Process 0 lifts the block: its own cache forgets it at once.
    await workers[0]!.ask({ reset: 'shared' })
    expect(await consume(3)).toMatchObject({ allowed: true, reason: 'rules' })
    // Process 1 still holds the block in its cache (at most until the block's original end, as the
    // README states); process 0 sees the next denial and a new block.
    expect(await consume(1)).toMatchObject({ allowed: false, reason: 'blocked' })
    expect(await consume(0)).toMatchObject({ allowed: false, reason: 'rules' })
    for (const w of workers) await w.kill()
  })
})
