/**
 * Per-rule costs and settle on Redis (docs/design/redis.md, "Arguments"): a call with one cost per rule is
 * one script call, all or none; per-rule costs that are all the same go as a plain cost, by the same script;
 * a settle changes each rule by its own signed amount in one script call and answers as a peek right after.
 * The memory store and Redis agree on random traces of both in test/redis-conformance.test.ts.
 */
import {
  createLimiter,
  type Decision,
  ErrorCode,
  fixedWindow,
  type Rule,
  type RuleDecision,
  type StoreAnswer,
  slidingWindow,
} from '@sluice/core'
import { refundMark } from '@sluice/core/store'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { commandCalls, type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** A whole hour: every window and bucket below starts at T. */
const T = 1_800_000_000_000
let run = 0

/** 10 requests and 100 tokens a minute, as an AI gateway limits a key. */
const RULES = [
  fixedWindow({ limit: 10, windowMs: 60_000, name: 'requests' }),
  slidingWindow({ limit: 100, windowMs: 60_000, name: 'tokens' }),
] as Rule[]

/** Per rule: allowed, remaining, resetMs, retryAfterMs. */
const brief = (answer: StoreAnswer | undefined) =>
  answer?.map((d: RuleDecision) => [d.allowed, d.remaining, d.resetMs, d.retryAfterMs])

async function scriptCalls(): Promise<number> {
  return (await commandCalls(server, 'evalsha')) + (await commandCalls(server, 'eval'))
}

async function cachedScripts(): Promise<number> {
  return Number(/number_of_cached_scripts:(\d+)/.exec(await server.cli('INFO', 'memory'))![1])
}

describe.each(CLIENT_KINDS)('per-rule costs and settle on Redis (%s)', (kind) => {
  async function rig() {
    const clock = { now: T }
    const store = new RedisStore({
      client: await clientOf(kind, server),
      clock: () => clock.now,
      deniedCache: false,
      timeoutMs: 5000,
    })
    return { store, clock, prefix: `costs${run++}` }
  }

  it('decides a call of one cost per rule in one script call, all or none', async () => {
    const { store, prefix } = await rig()
    await store.apply(prefix, 'warm', RULES, [1, 2], 'consume')
    await server.cli('CONFIG', 'RESETSTAT')
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 60], 'consume'))).toEqual([
      [true, 9, 60_000, 0],
      [true, 40, 60_000, 0],
    ])
    // The tokens deny: nothing is counted, and the requests answer as of cost 0.
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 50], 'consume'))).toEqual([
      [true, 9, 60_000, 0],
      [false, 40, 60_000, 60_000],
    ])
    expect(brief(await store.apply(prefix, 'k', RULES, [2, 40], 'peek'))).toEqual([
      [true, 7, 60_000, 0],
      [true, 0, 60_000, 0],
    ])
    expect(brief(await store.apply(prefix, 'k', RULES, [1, 40], 'consume'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 0, 60_000, 0],
    ])
    expect(await scriptCalls()).toBe(4)
  })

  it('sends per-rule costs that are all the same as a plain cost: the same script and arguments', async () => {
    const { store, prefix } = await rig()
    await server.cli('SCRIPT', 'FLUSH')
    await store.apply(prefix, 'k', RULES, 3, 'consume')
    const scripts = await cachedScripts()
    expect(brief(await store.apply(prefix, 'k', RULES, [3, 3], 'consume'))).toEqual([
      [true, 4, 60_000, 0],
      [true, 94, 60_000, 0],
    ])
    expect(await cachedScripts()).toBe(scripts)
    await store.apply(prefix, 'k', RULES, [3, 4], 'consume')
    expect(await cachedScripts()).toBe(scripts + 1)
  })

  it('settles each rule by its signed amount in one script call, and answers as a peek of cost 1 right after', async () => {
    const { store, prefix } = await rig()
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    await server.cli('CONFIG', 'RESETSTAT')
    // 40 of the 60 tokens reserved go back; the request stays counted.
    expect(brief(await store.adjust!(prefix, 'k', RULES, [0, -40], 'settle', undefined, marks))).toEqual([
      [true, 8, 60_000, 0],
      [true, 79, 60_000, 0],
    ])
    // More than reserved: counted whatever the rule says, past the limit if need be.
    // The tokens now deny a peek: the requests answer as of cost 0.
    expect(brief(await store.adjust!(prefix, 'k', RULES, [3, 90], 'settle', undefined, marks))).toEqual([
      [true, 6, 60_000, 0],
      [false, 0, 60_000, 60_000],
    ])
    expect(await scriptCalls()).toBe(2)
    expect(brief(await store.apply(prefix, 'k', RULES, 1, 'peek'))).toEqual([
      [true, 6, 60_000, 0],
      [false, 0, 60_000, 60_000],
    ])
  })

  it('a settle gives back only under a mark, and only while the units still count', async () => {
    const { store, clock, prefix } = await rig()
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    // No marks: nothing is given back.
    expect(brief(await store.adjust!(prefix, 'k', RULES, [-1, -60], 'settle'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 39, 60_000, 0],
    ])
    // A minute on, the call's units no longer count: nothing to give back, and none is made up.
    clock.now = T + 60_000
    expect(brief(await store.adjust!(prefix, 'k', RULES, [-1, -60], 'settle', undefined, marks))).toEqual([
      [true, 9, 60_000, 0],
      [true, 99, 60_000, 0],
    ])
  })

  it('refuses a settle whose amounts are not one per rule, sending nothing', async () => {
    const { store, prefix } = await rig()
    await store.apply(prefix, 'k', RULES, [1, 60], 'consume')
    await server.cli('CONFIG', 'RESETSTAT')
    for (const amounts of [[-1], [1, 2, 3]]) {
      const error = await store.adjust!(prefix, 'k', RULES, amounts, 'settle').catch((e: unknown) => e)
      expect(error).toMatchObject({ code: ErrorCode.INVALID_COST })
    }
    expect(await scriptCalls()).toBe(0)
  })

  it('a settle on a blocked key changes its rules and answers the block', async () => {
    const { store, prefix } = await rig()
    const block = { ms: 5000, factor: 1, maxMs: 5000, forgetMs: 5000, keep: 1 }
    const call = await store.apply(prefix, 'k', RULES, [1, 60], 'consume', block)
    expect((await store.apply(prefix, 'k', RULES, [1, 50], 'consume', block)).every((d) => d.allowed)).toBe(
      false,
    )
    const marks = RULES.map((rule, i) => refundMark(rule, call[i]!, call.countedAt!))
    const settled = await store.adjust!(prefix, 'k', RULES, [0, -60], 'settle', block, marks)
    expect(settled?.reason).toBe('blocked')
    expect(brief(await store.apply(prefix, 'k', RULES, 1, 'peek'))).toEqual([
      [true, 8, 60_000, 0],
      [true, 99, 60_000, 0],
    ])
  })
})

describe.each(CLIENT_KINDS)('a limiter settling on Redis (%s)', (kind) => {
  async function rig() {
    const clock = { now: T }
    const client = await clientOf(kind, server)
    const store = new RedisStore({ client, clock: () => clock.now, timeoutMs: 5000 })
    const limiter = createLimiter({ rules: RULES, store, prefix: `settle${run++}` })
    const left = async () => (await limiter.peek('k')).rules.map((d) => d.remaining)
    // Redis's clock learnt, and the scripts loaded (a script's first call may go as EVALSHA, then EVAL).
    const warm = await limiter.consume('warm', { cost: { tokens: 2 } })
    await limiter.settle('warm', { decision: warm, cost: { tokens: 1 } })
    return { limiter, left }
  }

  it('reserves per rule, then settles to the true cost in one script call each', async () => {
    const { limiter, left } = await rig()
    await server.cli('CONFIG', 'RESETSTAT')
    const ok = await limiter.consume('k', { cost: { tokens: 90 } })
    expect([ok.allowed, ok.rules.map((r) => r.remaining)]).toEqual([true, [9, 10]])
    expect((await limiter.consume('k', { cost: { tokens: 20 } })).allowed).toBe(false)
    const after = await limiter.settle('k', { decision: ok, cost: { tokens: 30 } })
    expect(after.rules.map((r) => r.remaining)).toEqual([8, 69])
    expect(await scriptCalls()).toBe(3)
    expect(await left()).toEqual([8, 69])
  })

  it('bad input to settle never reaches Redis, and changes nothing', async () => {
    const { limiter, left } = await rig()
    const ok = await limiter.consume('k', { cost: { tokens: 90 } })
    const denied = await limiter.consume('k', { cost: { tokens: 20 } })
    expect(denied.allowed).toBe(false)
    const settled = await limiter.consume('k', { cost: { tokens: 5 } })
    await limiter.settle('k', { decision: settled, cost: { tokens: 5 } })
    const before = await left()
    await server.cli('CONFIG', 'RESETSTAT')
    const bad: [Decision, unknown, string][] = [
      [denied, 1, ErrorCode.INVALID_SETTLE],
      [settled, 1, ErrorCode.INVALID_SETTLE],
      [await limiter.peek('k'), 1, ErrorCode.INVALID_SETTLE],
      [{} as Decision, 1, ErrorCode.INVALID_SETTLE],
      [ok, -1, ErrorCode.INVALID_COST],
      [ok, 2.5, ErrorCode.INVALID_COST],
      [ok, 2 ** 50 + 1, ErrorCode.INVALID_COST],
      [ok, { tokens: -5 }, ErrorCode.INVALID_COST],
      [ok, { token: 5 }, ErrorCode.INVALID_COST],
    ]
    for (const [decision, cost, code] of bad) {
      const error = await limiter.settle('k', { decision, cost: cost as never }).catch((e: unknown) => e)
      expect(error).toMatchObject({ code })
    }
    expect(await scriptCalls()).toBe(1) // the peek above
    expect(await left()).toEqual(before)
    // The call refused a bad cost may still settle.
    expect(
      (await limiter.settle('k', { decision: ok, cost: { tokens: 0 } })).rules.map((r) => r.remaining),
    ).toEqual([before[0], before[1]! + 90])
  })
})
