/**
 * Abuse controls on the memory store, on a manual clock: blocks that escalate and are forgotten, refunds
 * and penalties for every rule, the option checks. The same figures hold on Redis (packages/redis/test/redis-abuse.test.ts,
 * and the conformance suite's random traces).
 */
import {
  type BlockOptions,
  createLimiter,
  type Decision,
  ErrorCode,
  fixedWindow,
  InvalidCostError,
  InvalidOptionError,
  leakyBucket,
  MemoryStore,
  type Rule,
  type RuleInput,
  SluiceError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { blockLength, blockOption, MAX_BLOCK_HISTORY } from '../src/block.ts'
import { catchError } from './support.ts'

function setup(rules: readonly RuleInput[], block?: BlockOptions) {
  const clock = { now: 0 }
  const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  const limiter = createLimiter({ rules, store, block })
  const at = async (t: number, key = 'k', cost = 1) => {
    clock.now = t
    return limiter.consume(key, { cost })
  }
  const peekAt = async (t: number, key = 'k', cost = 1) => {
    clock.now = t
    return limiter.peek(key, { cost })
  }
  return { clock, store, limiter, at, peekAt }
}

/** What a denial's figures and reason are. */
const said = (d: Decision) => ({
  allowed: d.allowed,
  reason: d.reason,
  remaining: d.remaining,
  resetMs: d.resetMs,
  retryAfterMs: d.retryAfterMs,
})

describe('blocks', () => {
  it('blocks a key the rules deny, doubling within forgetMs, capped at maxMs', async () => {
    const { at, peekAt } = setup([fixedWindow({ limit: 1, windowMs: 100 })], {
      ms: 1000,
      factor: 2,
      maxMs: 3000,
      forgetMs: 10_000,
    })
    expect((await at(0)).allowed).toBe(true)
    // The denial that begins the block: the rules decided, and the call may come back when the block ends
    // (1000 ms), not when the window does (99 ms).
    expect(said(await at(1))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 99,
      retryAfterMs: 1000,
    })
    // Blocked until 1001: consumes and peeks alike, counting nothing.
    const blocked = { allowed: false, reason: 'blocked', remaining: 0, resetMs: 501, retryAfterMs: 501 }
    expect(said(await at(500))).toEqual(blocked)
    expect(said(await peekAt(500))).toEqual(blocked)
    expect(said(await at(1000))).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    // Over at 1001, and the rules admit again (nothing was counted while blocked).
    expect((await at(1001)).allowed).toBe(true)
    // Second block within forgetMs: 2000 ms.
    expect(said(await at(1002))).toMatchObject({ reason: 'rules', retryAfterMs: 2000 })
    expect(said(await at(3001))).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    expect((await at(3002)).allowed).toBe(true)
    // Third: 4000 capped at 3000.
    expect(said(await at(3003))).toMatchObject({ reason: 'rules', retryAfterMs: 3000 })
    expect((await at(6003)).allowed).toBe(true)
    // Fourth: still 3000 (the starts kept are enough to know the cap is reached).
    expect(said(await at(6004))).toMatchObject({ reason: 'rules', retryAfterMs: 3000 })
    // Long after the last block began (10 s), escalation starts over.
    expect((await at(30_000)).allowed).toBe(true)
    expect(said(await at(30_001))).toMatchObject({ reason: 'rules', retryAfterMs: 1000 })
  })

  it('counts only the blocks that began less than forgetMs ago', async () => {
    // 100, 300, 900, 2700 ms...
    const { at } = setup([fixedWindow({ limit: 1, windowMs: 10 })], {
      ms: 100,
      factor: 3,
      maxMs: 10_000,
      forgetMs: 2500,
    })
    await at(0)
    expect((await at(1)).retryAfterMs).toBe(100) // n = 1, until 101
    await at(101)
    expect((await at(102)).retryAfterMs).toBe(300) // n = 2, until 402
    await at(402)
    expect((await at(403)).retryAfterMs).toBe(900) // n = 3, until 1303
    expect((await at(2600)).allowed).toBe(true)
    // Blocks began at 1, 102 and 403; at 2601 the one at 1 (and only it) is 2500 ms old or more: n = 3.
    expect((await at(2601)).retryAfterMs).toBe(900)
    expect((await at(3501)).allowed).toBe(true)
    // At 3502, 102 and 403 are 2500 ms old or more; 2601 counts: n = 2.
    expect((await at(3502)).retryAfterMs).toBe(300)
  })

  it('lifts the block and forgets its escalation on reset', async () => {
    const { at, limiter, clock } = setup([fixedWindow({ limit: 1, windowMs: 10 })], {
      ms: 100,
      factor: 2,
      maxMs: 1000,
      forgetMs: 60_000,
    })
    await at(0)
    expect((await at(1)).retryAfterMs).toBe(100)
    await at(101)
    expect((await at(102)).retryAfterMs).toBe(200)
    expect((await at(150)).reason).toBe('blocked')
    clock.now = 150
    await limiter.reset('k')
    expect((await at(150)).allowed).toBe(true)
    // Escalation forgotten: the next block is the first again.
    expect((await at(151)).retryAfterMs).toBe(100)
  })

  it('blocks each key on its own, and a peek the rules deny begins no block', async () => {
    const { at, peekAt } = setup([fixedWindow({ limit: 1, windowMs: 10 })], { ms: 500 })
    await at(0, 'a')
    expect(said(await peekAt(1, 'a'))).toMatchObject({ allowed: false, reason: 'rules', retryAfterMs: 9 })
    expect((await at(2, 'b')).allowed).toBe(true)
    expect(said(await at(3, 'a'))).toMatchObject({ reason: 'rules', retryAfterMs: 500 })
    expect((await at(4, 'a')).reason).toBe('blocked')
    expect((await at(12, 'b')).allowed).toBe(true)
  })

  it('keeps the rule retry when it is longer than the block', async () => {
    const { at } = setup([fixedWindow({ limit: 1, windowMs: 60_000 })], { ms: 1000 })
    await at(0)
    expect(said(await at(10))).toMatchObject({ reason: 'rules', retryAfterMs: 59_990 })
    expect(said(await at(1009))).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    // The block is over but the rules still deny: a new block begins (factor 1: 1000 ms again).
    expect(said(await at(1010))).toMatchObject({ reason: 'rules', retryAfterMs: 58_990 })
    expect((await at(1500)).reason).toBe('blocked')
  })

  it('denies every rule of a blocked call with the time the block has left', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 10 }), slidingLog({ limit: 5, windowMs: 1000 })]
    const { at } = setup(rules, { ms: 300 })
    await at(0)
    await at(1)
    const d = await at(101)
    expect(d.reason).toBe('blocked')
    expect(d.rules.map((r) => [r.rule, r.allowed, r.remaining, r.retryAfterMs, r.limit])).toEqual([
      [(rules[0] as Rule).name, false, 0, 200, 1],
      [(rules[1] as Rule).name, false, 0, 200, 5],
    ])
  })

  it('forgets a key once its block is over and its starts no longer count', async () => {
    const { at, store } = setup([fixedWindow({ limit: 1, windowMs: 10 })], {
      ms: 100,
      factor: 2,
      maxMs: 400,
      forgetMs: 5000,
    })
    await at(0)
    await at(1)
    store.sweep()
    expect(store.size).toBe(1)
    await at(5000, 'other')
    store.sweep()
    expect(store.size).toBe(2)
    await at(5002, 'other2')
    store.sweep()
    // 'k' (blocked at 1) is forgotten from 5001; 'other' and 'other2' live until their windows end.
    expect(store.size).toBe(2)

    // Without escalation (factor 1) no start is kept: the key is forgotten when its block ends.
    const flat = setup([fixedWindow({ limit: 1, windowMs: 10 })], { ms: 100, forgetMs: 5000 })
    await flat.at(0)
    await flat.at(1)
    flat.clock.now = 100
    flat.store.sweep()
    expect(flat.store.size).toBe(1)
    flat.clock.now = 101
    flat.store.sweep()
    expect(flat.store.size).toBe(0)
  })

  it('computes block lengths step by step, rounded up', () => {
    const policy = blockOption('block', { ms: 1000, factor: 1.5, maxMs: 10_000, forgetMs: 1 })
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => blockLength(policy, n))).toEqual([
      1000, 1500, 2250, 3375, 5063, 7594, 10_000,
    ])
    // 1000 x 1.5^k reaches 10,000 at k = 6: six starts are all the count needs.
    expect(policy.keep).toBe(6)
    expect(blockOption('block', { ms: 5 }).keep).toBe(0)
    expect(blockOption('block', { ms: 5, factor: 2 })).toEqual({
      ms: 5,
      factor: 2,
      maxMs: 5,
      forgetMs: 5,
      keep: 0,
    })
  })

  it.each<[string, unknown, string]>([
    ['a number', 5, 'createLimiter.block'],
    ['ms 0', { ms: 0 }, 'createLimiter.block.ms'],
    ['ms past 2^50', { ms: 2 ** 50 + 1 }, 'createLimiter.block.ms'],
    ['a fractional ms', { ms: 1.5 }, 'createLimiter.block.ms'],
    ['factor below 1', { ms: 10, factor: 0.5 }, 'createLimiter.block.factor'],
    ['factor NaN', { ms: 10, factor: Number.NaN }, 'createLimiter.block.factor'],
    ['factor Infinity', { ms: 10, factor: Number.POSITIVE_INFINITY }, 'createLimiter.block.factor'],
    ['maxMs below ms', { ms: 10, maxMs: 9 }, 'createLimiter.block.maxMs'],
    ['maxMs past 2^50', { ms: 10, maxMs: 2 ** 50 + 1 }, 'createLimiter.block.maxMs'],
    ['forgetMs 0', { ms: 10, forgetMs: 0 }, 'createLimiter.block.forgetMs'],
    ['forgetMs past 2^50', { ms: 10, forgetMs: 2 ** 51 }, 'createLimiter.block.forgetMs'],
    ['an unknown name', { ms: 10, factr: 2 }, 'createLimiter.block.factr'],
    [
      'a factor too slow to reach maxMs',
      { ms: 1, factor: 1.01, maxMs: 2 ** 50 },
      'createLimiter.block.factor',
    ],
  ])('rejects a block option with %s', (_, block, option) => {
    const error = catchError(() =>
      createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 10 })], block: block as BlockOptions }),
    )
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
    expect((error as InvalidOptionError).option).toBe(option)
  })

  it(`accepts the slowest escalation that reaches maxMs within ${MAX_BLOCK_HISTORY + 1} blocks`, () => {
    // 2^63 > 2^50: doubling from 1 ms reaches 2^50 after 50 steps.
    expect(blockOption('block', { ms: 1, factor: 2, maxMs: 2 ** 50 }).keep).toBe(50)
  })
})

describe('refunds and penalties', () => {
  it('fixedWindow: a refund lowers the current window count; a penalty raises it at most cost past the limit', async () => {
    const { at, peekAt, limiter, clock } = setup([fixedWindow({ limit: 3, windowMs: 1000 })])
    await at(0, 'k', 3)
    clock.now = 10
    await limiter.refund('k', { cost: 2 })
    expect(said(await peekAt(10))).toMatchObject({ allowed: true, remaining: 1 })
    await limiter.refund('k', { cost: 50 })
    expect(said(await peekAt(10))).toMatchObject({ allowed: true, remaining: 2 })
    // A refund in a later window leaves that window alone.
    await at(20, 'k', 3)
    clock.now = 1000
    await limiter.refund('k')
    expect(said(await peekAt(1000))).toMatchObject({ allowed: true, remaining: 2 })

    clock.now = 2000
    expect(said(await limiter.penalize('p', { cost: 5 }))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 1000,
      retryAfterMs: 1000,
    })
    // 5 + 2 = 7 is more than 3 + 2: the count stays at 5.
    clock.now = 2001
    await limiter.penalize('p', { cost: 2 })
    await limiter.refund('p', { cost: 4 })
    expect(said(await peekAt(2001, 'p'))).toMatchObject({ allowed: true, remaining: 1 })
    // 1 + 10 is within 3 + 10: 11.
    await limiter.penalize('p', { cost: 10 })
    await limiter.refund('p', { cost: 9 })
    expect(said(await peekAt(2001, 'p'))).toMatchObject({ allowed: true, remaining: 0 })
  })

  it('slidingLog: a refund drops the newest units; a penalty logs them now', async () => {
    const { at, peekAt, limiter, clock } = setup([slidingLog({ limit: 5, windowMs: 1000 })])
    await at(0, 'k', 2)
    await at(10, 'k', 2)
    await at(20, 'k', 1)
    clock.now = 30
    // Drops the call at 20 and one unit of the one at 10: 2 at 0 and 1 at 10 stay.
    await limiter.refund('k', { cost: 2 })
    expect(said(await peekAt(30))).toMatchObject({ allowed: true, remaining: 1, resetMs: 1000 })
    expect((await at(30, 'k', 2)).allowed).toBe(true)
    // Full again: the oldest unit (at 0) frees the first room, at 1000.
    expect(said(await at(30))).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 970,
      resetMs: 1000,
    })
    // At 1000 the 2 units from 0 are gone: 3 live (1 at 10, 2 at 30).
    expect(said(await peekAt(1000))).toMatchObject({ allowed: true, remaining: 1 })
    clock.now = 1000
    await limiter.refund('k', { cost: 100 })
    expect(said(await peekAt(1000))).toMatchObject({ allowed: true, remaining: 4, resetMs: 1000 })

    clock.now = 5000
    expect(said(await limiter.penalize('p', { cost: 7 }))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 1000,
      retryAfterMs: 1000,
    })
    expect((await at(5999, 'p')).allowed).toBe(false)
    expect((await at(6000, 'p')).allowed).toBe(true)
  })

  it('slidingWindow: a refund lowers the newest non-empty buckets; a penalty fills the current one', async () => {
    const { at, peekAt, limiter, clock } = setup([slidingWindow({ limit: 6, windowMs: 300, buckets: 3 })])
    await at(0, 'k', 2)
    await at(100, 'k', 1)
    await at(200, 'k', 3)
    clock.now = 250
    // 3 from the bucket at 200, then 1 from the one at 100: the 2 at 0 stay.
    await limiter.refund('k', { cost: 4 })
    expect(said(await peekAt(250))).toMatchObject({ allowed: true, remaining: 3, resetMs: 250 })
    // At 300 the bucket at 0 has left the window: nothing is left.
    expect(said(await peekAt(300))).toMatchObject({ allowed: true, remaining: 5 })

    clock.now = 1000
    expect(said(await limiter.penalize('p', { cost: 10 }))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 300,
      retryAfterMs: 300,
    })
    // 10 is already past 6 + 1: a penalty of 1 counts nothing more.
    await limiter.penalize('p', { cost: 1 })
    await limiter.refund('p', { cost: 5 })
    expect(said(await peekAt(1000, 'p'))).toMatchObject({ allowed: true, remaining: 0 })
  })

  it('tokenBucket: a refund adds tokens up to capacity; a penalty goes below zero by at most the penalty', async () => {
    const { at, peekAt, limiter, clock } = setup([tokenBucket({ capacity: 4, refillPerSecond: 2 })])
    await at(0, 'k', 4)
    await limiter.refund('k')
    expect(said(await peekAt(0))).toMatchObject({ allowed: true, remaining: 0, resetMs: 2000 })
    await limiter.refund('k', { cost: 10 })
    expect(said(await peekAt(0))).toMatchObject({ allowed: true, remaining: 3, resetMs: 500 })

    clock.now = 0
    // Full (4) minus 6: -2 tokens. A token is there in 1500 ms, all 4 in 3000.
    expect(said(await limiter.penalize('p', { cost: 6 }))).toEqual({
      allowed: false,
      reason: 'rules',
      remaining: 0,
      resetMs: 3000,
      retryAfterMs: 1500,
    })
    // Already below -1: a penalty of 1 leaves it at -2.
    expect((await limiter.penalize('p', { cost: 1 })).retryAfterMs).toBe(1500)
    // A penalty of 3 takes it to -3 (at most 3 below zero).
    expect((await limiter.penalize('p', { cost: 3 })).retryAfterMs).toBe(2000)
    expect((await at(1999, 'p')).allowed).toBe(false)
    expect((await at(2000, 'p')).allowed).toBe(true)
  })

  it('leakyBucket: a refund moves the queue back, not before now; a penalty moves it on, at most cost past a full queue', async () => {
    const { at, peekAt, limiter, clock } = setup([leakyBucket({ ratePerSecond: 10, maxQueueMs: 300 })])
    await at(0)
    expect((await at(0)).waitMs).toBe(100)
    expect((await at(0)).waitMs).toBe(200)
    clock.now = 50
    await limiter.refund('k')
    // The queue now ends at 100: the next call waits until 200.
    expect((await peekAt(50)).waitMs).toBe(150)
    clock.now = 50
    await limiter.refund('k', { cost: 5 })
    // Not before now: the queue ends at 50, the next call's slot is 150.
    expect((await peekAt(50)).waitMs).toBe(100)
    clock.now = 1000
    await limiter.refund('k')
    expect((await peekAt(1000)).waitMs).toBe(0)

    clock.now = 0
    // A fresh queue: moved on 2 intervals from now, to 200; the next call waits 300.
    expect((await limiter.penalize('p', { cost: 2 })).waitMs).toBe(300)
    // 7 intervals: the queue ends at 700, a call would wait 800 > 300.
    expect(said(await limiter.penalize('p', { cost: 5 }))).toMatchObject({
      allowed: false,
      retryAfterMs: 500,
    })
    // 12 would pass a full queue (300) by more than 5 intervals: it ends at 300 + 500 = 800.
    expect(said(await limiter.penalize('p', { cost: 5 }))).toMatchObject({
      allowed: false,
      retryAfterMs: 600,
    })
    // Already past 300 + 100: a penalty of 1 leaves it.
    expect(said(await limiter.penalize('p', { cost: 1 }))).toMatchObject({
      allowed: false,
      retryAfterMs: 600,
    })
    expect((await at(599, 'p')).allowed).toBe(false)
    expect((await at(600, 'p')).waitMs).toBe(300)
  })

  it('gives a queued slot back only while the queue is as the call left it', async () => {
    const { at, peekAt, limiter, clock } = setup([leakyBucket({ ratePerSecond: 10, maxQueueMs: 300 })])
    await at(0)
    const first = await at(0)
    expect(first.rules[0]!.queue).toBe('0:1')
    const second = await at(0)
    expect(second.rules[0]!.queue).toBe('0:2')
    clock.now = 10
    // The first caller leaves, but the second queued behind it: nothing moves.
    await limiter.unqueue('k', first)
    expect((await peekAt(10)).waitMs).toBe(290)
    // The second is last in line: its slot goes back.
    await limiter.unqueue('k', second)
    expect((await peekAt(10)).waitMs).toBe(190)
    // Twice is once: the queue no longer stands where the second left it.
    await limiter.unqueue('k', second)
    expect((await peekAt(10)).waitMs).toBe(190)
    // A decision with no wait has no slot to give back.
    const drained = await at(5000)
    expect(drained.rules[0]!.queue).toBeUndefined()
  })

  it('a refund never creates state, and a store without adjust cannot refund', async () => {
    const { limiter, store } = setup([tokenBucket({ capacity: 2, refillPerSecond: 1 })])
    await limiter.refund('never-seen', { cost: 3 })
    expect(store.size).toBe(0)
    const bare = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 10 })],
      store: { apply: () => [], reset: () => {} },
      prefix: 'bare',
    })
    const error = await bare.refund('k').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SluiceError)
    expect((error as SluiceError).code).toBe(ErrorCode.UNSUPPORTED)
  })

  it.each([0, -1, 1.5, 2 ** 50 + 1, '1', Number.NaN])(
    'rejects a refund or penalty of cost %s',
    async (cost) => {
      const { limiter } = setup([fixedWindow({ limit: 1, windowMs: 10 })])
      for (const call of [limiter.refund, limiter.penalize]) {
        const error = await call('k', { cost: cost as number }).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(InvalidCostError)
      }
    },
  )

  it('takes costs beyond the limit, and answers an unlimited key with the unlimited decision', async () => {
    const limiter = createLimiter({
      rules: (key: string) => (key === 'free' ? null : [fixedWindow({ limit: 1, windowMs: 10 })]),
    })
    expect((await limiter.penalize('free', { cost: 2 ** 50 })).reason).toBe('unlimited')
    expect((await limiter.penalize('k', { cost: 2 ** 50 })).allowed).toBe(false)
    await limiter.refund('k', { cost: 2 ** 50 })
    expect((await limiter.peek('k')).allowed).toBe(true)
  })
})
