/**
 * Token budgets in core: a call's cost per rule by name (all or none across its rules), and `settle`, which
 * makes an admitted call's reservation its true cost (docs/design/store.md, docs/design/layers.md). A
 * memory store on a manual clock; every figure exact.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import {
  type Adjustment,
  type Costs,
  createLimiter,
  type Decision,
  type DecisionMessage,
  ErrorCode,
  type Limiter,
  MemoryStore,
  parseRuleSpec,
  type RuleInput,
  type Store,
} from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { answersRandomTraces } from '../../../test/store-conformance.ts'

const REQUESTS_AND_TOKENS = ['fixedWindow:10/1m@requests', 'fixedWindow:1000/1m@tokens']

/** A limiter on a memory store with a manual clock, and every `apply` and `adjust` it asked of its store. */
function onClock(rules: readonly (RuleInput | string)[] | Parameters<typeof createLimiter>[0]['rules']) {
  const clock = { now: 0 }
  const memory = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  const asked: {
    act: 'apply' | Adjustment
    cost: number | Costs
    marks?: readonly (string | undefined)[]
  }[] = []
  const store: Store = {
    apply(prefix, key, rs, cost, mode, block) {
      asked.push({ act: 'apply', cost })
      return memory.apply(prefix, key, rs, cost, mode, block)
    },
    adjust(prefix, key, rs, cost, adjustment, block, marks) {
      asked.push({ act: adjustment, cost, marks })
      return memory.adjust(prefix, key, rs, cost, adjustment, block, marks)
    },
    reset: (prefix, key) => memory.reset(prefix, key),
  }
  const limiter = createLimiter({ rules, store })
  return { clock, limiter, asked, memory }
}

/** Each rule's remaining, as a peek of cost 1 says (what one more call would leave). */
async function left(limiter: Limiter, key = 'k'): Promise<number[]> {
  return (await limiter.peek(key)).rules.map((d) => d.remaining)
}

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise
  } catch (error) {
    return (error as { code?: string }).code
  }
  throw new Error('expected a rejection')
}

describe('per-rule costs', () => {
  it('counts each rule its own cost, all or none, and records what the call reserved', async () => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 400 } })
    expect(d).toMatchObject({ allowed: true, rule: 'requests', remaining: 9, cost: [1, 400] })
    expect(d.rules.map((r) => r.remaining)).toEqual([9, 600])
    expect(asked).toEqual([{ act: 'apply', cost: [1, 400] }])
    // 700 tokens do not fit in the 600 left: denied, and the requests rule counts nothing either.
    const no = await limiter.consume('k', { cost: { tokens: 700 } })
    expect(no).toMatchObject({ allowed: false, rule: 'tokens', remaining: 600, retryAfterMs: 60_000 })
    expect(no.cost).toBeUndefined()
    expect(await left(limiter)).toEqual([8, 599])
    // The denied call's decision reads back from JSON as it was.
    expect(JSON.parse(JSON.stringify(d))).toEqual(d)
  })

  it('passes the store one number when every rule takes the same cost, and records none for cost 1', async () => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    const five = await limiter.consume('k', { cost: { requests: 5, tokens: 5 } })
    const one = await limiter.consume('k', { cost: { tokens: 1 } })
    const plain = await limiter.consume('k', { cost: 2 })
    expect(asked.map((a) => a.cost)).toEqual([5, 1, 2])
    expect([five.cost, one.cost, plain.cost]).toEqual([5, undefined, 2])
    expect(await left(limiter)).toEqual([1, 991])
  })

  it('refuses a name no rule of the call has, naming it, and changes nothing', async () => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    const error = await limiter.consume('k', { cost: { token: 5 } }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_COST })
    expect((error as Error).message).toBe(
      'Invalid cost an object: token names no rule of this call (its rules: requests, tokens).',
    )
    expect(asked).toEqual([])
    expect(await left(limiter)).toEqual([9, 999])
  })

  it.each([
    ['negative', { tokens: -1 }, 'Invalid cost -1: expected an integer >= 1 for rule tokens.'],
    ['zero', { tokens: 0 }, 'Invalid cost 0: expected an integer >= 1 for rule tokens.'],
    ['fractional', { tokens: 1.5 }, 'Invalid cost 1.5: expected an integer >= 1 for rule tokens.'],
    ['NaN', { tokens: Number.NaN }, 'Invalid cost NaN: expected an integer >= 1 for rule tokens.'],
    [
      'huge',
      { tokens: 2 ** 60 },
      'Invalid cost 1152921504606847000: expected an integer >= 1 for rule tokens.',
    ],
    ['a string', { tokens: '5' }, 'Invalid cost "5": expected an integer >= 1 for rule tokens.'],
    ['over maxCost', { tokens: 1001 }, 'Invalid cost 1001: rule tokens can never admit more than 1000.'],
    ['a list', [1, 2], 'Invalid cost an array of 2: expected an integer >= 1.'],
    ['null', null, 'Invalid cost null: expected an integer >= 1.'],
  ])('refuses a %s cost with ERR_SLUICE_INVALID_COST and changes nothing', async (_, cost, message) => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    await limiter.consume('k', { cost: { tokens: 10 } })
    const error = await limiter.consume('k', { cost: cost as never }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_COST, message })
    expect(asked).toHaveLength(1)
    expect(await left(limiter)).toEqual([8, 989])
  })

  it('resolves names after the rules resolve: a rules function, a limit table, a key no rule limits', async () => {
    const plans: Record<string, (string | RuleInput)[] | null> = {
      free: ['fixedWindow:2/1m@requests', 'fixedWindow:100/1m@tokens'],
      small: ['fixedWindow:50/1m@tokens'],
      admin: null,
    }
    const { limiter } = onClock(async (key: string) => plans[key]!)
    expect((await limiter.consume('free', { cost: { tokens: 60 } })).rules.map((r) => r.remaining)).toEqual([
      1, 40,
    ])
    // A name only another key's rules have is refused for this key.
    expect(await codeOf(limiter.consume('small', { cost: { requests: 1, tokens: 5 } }))).toBe(
      ErrorCode.INVALID_COST,
    )
    // Over this key's rule, not another's.
    expect(await codeOf(limiter.consume('small', { cost: { tokens: 60 } }))).toBe(ErrorCode.INVALID_COST)
    expect((await limiter.consume('small', { cost: { tokens: 50 } })).remaining).toBe(0)
    // A key no rule limits counts nothing, so its names are not checked (their figures are).
    expect(await limiter.consume('admin', { cost: { tokens: 10_000 } })).toMatchObject({
      reason: 'unlimited',
    })
    expect(await codeOf(limiter.consume('admin', { cost: { tokens: -1 } }))).toBe(ErrorCode.INVALID_COST)
  })

  it('gives two concurrency rules of one call one cost: they hold one lease', async () => {
    const { limiter } = onClock([
      parseRuleSpec('concurrency:10@a'),
      parseRuleSpec('concurrency:5@b'),
      'fixedWindow:100/1m@tokens',
    ])
    expect(await codeOf(limiter.consume('k', { cost: { a: 2 } }))).toBe(ErrorCode.INVALID_COST)
    const d = await limiter.consume('k', { cost: { a: 2, b: 2, tokens: 30 } })
    expect(d.rules.map((r) => r.remaining)).toEqual([8, 3, 70])
    expect(d.lease).toMatch(/:2$/)
    await limiter.release('k', d)
    expect(await left(limiter)).toEqual([9, 4, 69])
  })

  it('publishes the costs on sluice:decision, one per rule when they differ', async () => {
    const { limiter } = onClock(REQUESTS_AND_TOKENS)
    const seen: (number | Costs)[] = []
    const listen = (message: unknown) => seen.push((message as DecisionMessage).cost)
    subscribe('sluice:decision', listen)
    try {
      await limiter.consume('k', { cost: { tokens: 40 } })
      await limiter.consume('k', { cost: { requests: 3, tokens: 3 } })
      await limiter.peek('k', { cost: { tokens: 2000 - 1000 } })
      await limiter.consume('k')
    } finally {
      unsubscribe('sluice:decision', listen)
    }
    expect(seen).toEqual([[1, 40], 3, [1, 1000], 1])
  })

  it('asks the insurance limiter with the same costs by name when the store fails', async () => {
    const insurance = createLimiter({
      rules: REQUESTS_AND_TOKENS,
      store: new MemoryStore({ clock: () => 0, sweepIntervalMs: 0 }),
    })
    const failing: Store = {
      apply: () => {
        throw new Error('down')
      },
      reset: () => undefined,
    }
    const limiter = createLimiter({ rules: REQUESTS_AND_TOKENS, store: failing, onStoreError: insurance })
    const d = await limiter.consume('k', { cost: { tokens: 300 } })
    expect(d).toMatchObject({ allowed: true, reason: 'insurance', remaining: 9 })
    expect(d.rules.map((r) => r.remaining)).toEqual([9, 700])
  })

  it('gives a queued call back under its own cost (unqueue, acquire given up)', async () => {
    const { limiter, clock, asked } = onClock(['leakyBucket:10/s~1s@queue', 'fixedWindow:1000/1m@tokens'])
    clock.now = 1000
    await limiter.consume('k', { cost: { tokens: 10 } })
    const before = await limiter.peek('k')
    const queued = await limiter.consume('k', { cost: { queue: 3, tokens: 50 } })
    // Three intervals of 100 ms behind the call before it.
    expect(queued).toMatchObject({ allowed: true, waitMs: 300, cost: [3, 50] })
    await limiter.unqueue('k', queued)
    expect(asked.at(-1)).toMatchObject({ act: 'unqueue', cost: [3, 50] })
    // The queue is as before; the tokens rule is not a queue, and keeps the call's 50.
    const after = await limiter.peek('k')
    expect(after.rules[0]).toEqual(before.rules[0])
    expect(after.rules[1]!.remaining).toBe(before.rules[1]!.remaining - 50)

    // acquire, given up while waiting: the same, from the call's own options.
    const controller = new AbortController()
    const waiting = limiter.acquire('k', { cost: { queue: 3, tokens: 5 }, signal: controller.signal })
    controller.abort(new Error('gone'))
    await expect(waiting).rejects.toThrow('gone')
    expect(asked.at(-1)).toMatchObject({ act: 'unqueue', cost: [3, 5] })
    expect((await limiter.peek('k')).rules[0]).toEqual(before.rules[0])
  })
})

describe('settle', () => {
  it('asks the store nothing when the true cost is what was reserved, and answers nothing', async () => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    const calls = asked.length
    expect(await limiter.settle('k', { decision: d, cost: { requests: 1, tokens: 500 } })).toBeUndefined()
    expect(asked.length).toBe(calls)
    expect((await limiter.peek('k')).rules.map((r) => r.remaining)).toEqual([8, 499])
  })

  it('gives back what a smaller true cost did not use, and counts what a larger one used beyond', async () => {
    const { limiter, asked, clock } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    clock.now = 1000
    await limiter.settle('k', { decision: d, cost: { tokens: 200 } })
    const after = await limiter.peek('k')
    // What a peek of cost 1 answers after the settle: 9 requests and 800 tokens left before it.
    expect(after.rules.map((r) => r.remaining)).toEqual([8, 799])
    expect(after).toMatchObject({ allowed: true, rule: 'requests', resetMs: 59_000 })
    expect(asked.at(-2)).toEqual({ act: 'settle', cost: [-300], marks: ['0'] }) // only the rule it changes

    const e = await limiter.consume('k', { cost: { tokens: 100 } })
    await limiter.settle('k', { decision: e, cost: { requests: 1, tokens: 350 } })
    const more = await limiter.peek('k')
    expect(more.rules.map((r) => r.remaining)).toEqual([7, 449])
    expect(asked.at(-2)).toEqual({ act: 'settle', cost: [250], marks: [undefined] })
  })

  it('counts a larger true cost past the limit, so later calls wait it off', async () => {
    const { limiter, clock } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 900 } })
    clock.now = 20_000
    await limiter.settle('k', { decision: d, cost: { tokens: 1600 } })
    const after = await limiter.peek('k')
    expect(after).toMatchObject({ allowed: false, rule: 'tokens', remaining: 0, retryAfterMs: 40_000 })
    clock.now = 60_000
    expect(await left(limiter)).toEqual([9, 999])
  })

  it('settles an equal cost to nothing, and a zero cost to the whole reservation back', async () => {
    const { limiter } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    await limiter.settle('k', { decision: d, cost: { tokens: 500 } })
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(499)
    const e = await limiter.consume('k', { cost: { tokens: 100 } })
    // A number is every rule's true cost: 0 gives back the request as well as the tokens.
    await limiter.settle('k', { decision: e, cost: 0 })
    const after = await limiter.peek('k')
    expect(after.rules.map((r) => r.remaining)).toEqual([8, 499])
  })

  it('settles a call of one rule and a plain number cost', async () => {
    const { limiter } = onClock(['slidingLog:100/1m@tokens'])
    const d = await limiter.consume('k', { cost: 40 })
    expect(d.cost).toBe(40)
    await limiter.settle('k', { decision: d, cost: 15 })
    expect((await limiter.peek('k')).remaining).toBe(84)
    // A decision of cost 1 records nothing: its reservation was 1 under each rule.
    const e = await limiter.consume('k')
    expect(e.cost).toBeUndefined()
    await limiter.settle('k', { decision: e, cost: 6 })
    expect((await limiter.peek('k')).remaining).toBe(78)
  })

  it('settles a decision once; a second settle, a denied decision or a peek is ERR_SLUICE_INVALID_SETTLE', async () => {
    const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    await limiter.settle('k', { decision: d, cost: { tokens: 100 } })
    const n = asked.length
    const twice = limiter.settle('k', { decision: d, cost: { tokens: 50 } })
    await expect(twice).rejects.toMatchObject({ code: ErrorCode.INVALID_SETTLE })
    await expect(twice).rejects.toThrow('it has been settled, or refunded naming it, already')
    const no = await limiter.consume('k', { cost: { tokens: 950 } })
    expect(no.allowed).toBe(false)
    await expect(limiter.settle('k', { decision: no, cost: 1 })).rejects.toThrow(
      'it was denied, so it reserved nothing',
    )
    const peeked = await limiter.peek('k')
    expect(await codeOf(limiter.settle('k', { decision: peeked, cost: 1 }))).toBe(ErrorCode.INVALID_SETTLE)
    expect(await codeOf(limiter.settle('k', { decision: {} as Decision, cost: 1 }))).toBe(
      ErrorCode.INVALID_SETTLE,
    )
    expect(await codeOf(limiter.settle('k', undefined as never))).toBe(ErrorCode.INVALID_SETTLE)
    const forged = { ...(await limiter.consume('k', { cost: { tokens: 2 } })), cost: [1, -2] }
    expect(await codeOf(limiter.settle('k', { decision: forged, cost: 1 }))).toBe(ErrorCode.INVALID_SETTLE)
    // Two settles of one decision at once: the second is refused before the first reaches the store.
    const e = await limiter.consume('k', { cost: { tokens: 10 } })
    const both = await Promise.allSettled([
      limiter.settle('k', { decision: e, cost: 0 }),
      limiter.settle('k', { decision: e, cost: 0 }),
    ])
    expect(both.map((s) => s.status)).toEqual(['fulfilled', 'rejected'])
    expect(asked.filter((a) => a.act === 'settle')).toHaveLength(2)
    expect(asked.length).toBe(n + 5)
  })

  it('a decision read back from JSON is a new object: it settles once more, so keep one settle per call', async () => {
    const { limiter } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    const copy = JSON.parse(JSON.stringify(d)) as Decision
    await limiter.settle('k', { decision: copy, cost: { tokens: 200 } })
    expect(await left(limiter)).toEqual([8, 799])
    await limiter.settle('k', { decision: d, cost: { tokens: 200 } })
    // The window's count cannot tell whose units it holds: the second settle gave 300 back again.
    expect(await left(limiter)).toEqual([8, 999])
  })

  it.each([
    ['negative', -1, 'Invalid cost -1: expected an integer from 0 to 2^50.'],
    ['fractional', 2.5, 'Invalid cost 2.5: expected an integer from 0 to 2^50.'],
    ['NaN', Number.NaN, 'Invalid cost NaN: expected an integer from 0 to 2^50.'],
    ['huge', 2 ** 50 + 1, 'Invalid cost 1125899906842625: expected an integer from 0 to 2^50.'],
    [
      'a negative figure',
      { tokens: -5 },
      'Invalid cost -5: expected an integer from 0 to 2^50 for rule tokens.',
    ],
    [
      'an unknown name',
      { token: 5 },
      'Invalid cost an object: token names no rule of this call (its rules: requests, tokens).',
    ],
  ])(
    'refuses a %s true cost with ERR_SLUICE_INVALID_COST, changes nothing, and may settle after',
    async (_, cost, message) => {
      const { limiter, asked } = onClock(REQUESTS_AND_TOKENS)
      const d = await limiter.consume('k', { cost: { tokens: 500 } })
      const error = await limiter.settle('k', { decision: d, cost: cost as never }).catch((e: unknown) => e)
      expect(error).toMatchObject({ code: ErrorCode.INVALID_COST, message })
      expect(asked).toHaveLength(1)
      expect(await left(limiter)).toEqual([8, 499])
      await limiter.settle('k', { decision: d, cost: { tokens: 300 } })
      expect(await left(limiter)).toEqual([8, 699])
    },
  )

  it('bounds the excess as a penalty is bounded', async () => {
    const { limiter } = onClock(['tokenBucket:10+1/s@tokens'])
    const d = await limiter.consume('k', { cost: 5 })
    const error = await limiter.settle('k', { decision: d, cost: 2 ** 50 }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_COST })
    expect((await limiter.peek('k')).remaining).toBe(4)
  })

  it('the excess still counts after the window passed; the units that left give nothing back', async () => {
    const { limiter, clock } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    const e = await limiter.consume('k', { cost: { tokens: 100 } })
    clock.now = 60_000
    await limiter.consume('k', { cost: { tokens: 50 } })
    // d's 500 left with their window: a smaller true cost gives nothing back, nor takes the new window's.
    await limiter.settle('k', { decision: d, cost: { tokens: 10 } })
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(949)
    // e's excess counts now, in the window it is settled in.
    await limiter.settle('k', { decision: e, cost: { tokens: 400 } })
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(649)
  })

  it("after a reset the call's units are gone: a smaller true cost gives nothing, an excess counts afresh", async () => {
    const { limiter } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    const e = await limiter.consume('k', { cost: { tokens: 100 } })
    await limiter.reset('k')
    await limiter.settle('k', { decision: d, cost: { tokens: 0 } })
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(999)
    await limiter.settle('k', { decision: e, cost: { tokens: 300 } })
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(799)
    expect(await left(limiter)).toEqual([9, 799])
  })

  it('leaves rules the call was not decided by alone (a table edit), and a key no rule limits now', async () => {
    let rules: string[] | null = REQUESTS_AND_TOKENS
    const { limiter, asked } = onClock(() => rules)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    rules = ['fixedWindow:10/1m@requests', 'fixedWindow:1000/1m@prompt']
    await limiter.settle('k', { decision: d, cost: { requests: 0, prompt: 7 } })
    const after = await limiter.peek('k')
    expect(after.rules.map((r) => r.remaining)).toEqual([9, 999])
    expect(asked.at(-2)).toMatchObject({ act: 'settle', cost: [-1] })
    rules = null
    const e = await limiter.consume('j')
    rules = REQUESTS_AND_TOKENS
    expect(await limiter.settle('j', { decision: e, cost: 5 })).toBeUndefined()
  })

  it('changes nothing for a decision that counted nothing in the store, however often: unlimited, store-error, insurance', async () => {
    const unlimited = onClock(() => null)
    const free = await unlimited.limiter.consume('k')
    expect(await unlimited.limiter.settle('k', { decision: free, cost: 5 })).toBeUndefined()
    expect(await unlimited.limiter.settle('k', { decision: free, cost: 5 })).toBeUndefined()
    // Its cost is checked all the same.
    expect(await codeOf(unlimited.limiter.settle('k', { decision: free, cost: -5 }))).toBe(
      ErrorCode.INVALID_COST,
    )

    const failing: Store = {
      apply: () => {
        throw new Error('down')
      },
      reset: () => undefined,
      adjust: () => {
        throw new Error('asked')
      },
    }
    const allowing = createLimiter({ rules: REQUESTS_AND_TOKENS, store: failing })
    const allowed = await allowing.consume('k', { cost: { tokens: 5 } })
    expect(allowed.reason).toBe('store-error')
    expect(await allowing.settle('k', { decision: allowed, cost: 1 })).toBeUndefined()

    const insurance = onClock(REQUESTS_AND_TOKENS)
    const insured = createLimiter({
      rules: REQUESTS_AND_TOKENS,
      store: failing,
      prefix: 'insured',
      onStoreError: insurance.limiter,
    })
    const d = await insured.consume('k', { cost: { tokens: 300 } })
    expect(d.reason).toBe('insurance')
    expect(await insured.settle('k', { decision: d, cost: { tokens: 1 } })).toBeUndefined()
    // The insurance limiter keeps the reservation it counted.
    expect(await left(insurance.limiter)).toEqual([8, 699])
  })

  it('rejects with a StoreError when the store fails, and never settles that decision again (the failed call may have landed)', async () => {
    const memory = new MemoryStore({ clock: () => 0, sweepIntervalMs: 0 })
    let fail = true
    const store: Store = {
      apply: (...args) => memory.apply(...args),
      reset: (prefix, key) => memory.reset(prefix, key),
      adjust(...args) {
        if (fail) return Promise.reject(new Error('connection refused'))
        return memory.adjust(...args)
      },
    }
    const limiter = createLimiter({ rules: REQUESTS_AND_TOKENS, store })
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    expect(await codeOf(limiter.settle('k', { decision: d, cost: { tokens: 100 } }))).toBe(
      ErrorCode.STORE_ERROR,
    )
    fail = false
    expect(await codeOf(limiter.settle('k', { decision: d, cost: { tokens: 100 } }))).toBe(
      ErrorCode.INVALID_SETTLE,
    )
    // The reservation stands: charged the most, never twice.
    expect((await limiter.peek('k')).rules[1]!.remaining).toBe(499)
  })

  it('gives a call back once: a settle after a refund naming it, a refund after a settle, and a second refund change nothing', async () => {
    const { limiter } = onClock(REQUESTS_AND_TOKENS)
    const d = await limiter.consume('k', { cost: { tokens: 500 } })
    await limiter.refund('k', { decision: d, cost: 500 })
    const left = (await limiter.peek('k')).rules.map((r) => r.remaining)
    expect(left).toEqual([9, 999])
    expect(await codeOf(limiter.settle('k', { decision: d, cost: { tokens: 0 } }))).toBe(
      ErrorCode.INVALID_SETTLE,
    )
    await limiter.refund('k', { decision: d, cost: 500 })
    expect((await limiter.peek('k')).rules.map((r) => r.remaining)).toEqual(left)
    const e = await limiter.consume('k', { cost: { tokens: 300 } })
    await limiter.settle('k', { decision: e, cost: { tokens: 100 } })
    await limiter.refund('k', { decision: e, cost: 100 })
    expect((await limiter.peek('k')).rules.map((r) => r.remaining)).toEqual([8, 899])
  })

  it('settles under blocks: a settle counts past the limit without beginning a block, and answers one', async () => {
    const clock = { now: 0 }
    const limiter = createLimiter({
      rules: REQUESTS_AND_TOKENS,
      store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }),
      block: { ms: 5000 },
    })
    const d = await limiter.consume('k', { cost: { tokens: 900 } })
    await limiter.settle('k', { decision: d, cost: { tokens: 1200 } })
    const over = await limiter.peek('k')
    // Counted past the limit (the peek after it is denied by the rule), but no block: only a consume begins one.
    expect(over).toMatchObject({ allowed: false, reason: 'rules', retryAfterMs: 60_000 })
    const denied = await limiter.consume('k')
    expect(denied).toMatchObject({ allowed: false, reason: 'rules', retryAfterMs: 60_000 })
    const e = await limiter.consume('j', { cost: { tokens: 10 } })
    await limiter.consume('j', { cost: { tokens: 991 } })
    // A blocked key: the settle still gives back (a refund leaves a block standing), and answers the block.
    await limiter.settle('j', { decision: e, cost: { tokens: 0 } })
    const blocked = await limiter.peek('j')
    expect(blocked).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 5000 })
    clock.now = 5000
    expect(await left(limiter, 'j')).toEqual([8, 999])
  })
})

/**
 * Every kind: a settle smaller than the reservation is a refund naming the call of the difference, a larger
 * one a penalty of the excess; concurrency takes neither (its units are held by the lease until release).
 */
describe.each([
  ['fixedWindow', 'fixedWindow:10/1s'],
  ['slidingLog', 'slidingLog:10/1s'],
  ['slidingWindow', 'slidingWindow:10/1s'],
  ['tokenBucket', 'tokenBucket:10+5/s'],
  ['leakyBucket', 'leakyBucket:5/s~2s'],
  ['warmUp', 'warmUp:5/s,1s~2s'],
  ['concurrency', 'concurrency:10'],
])('settle under %s', (_, text) => {
  /** Two limiters on one trace: consume 2, then 4 at 50 ms, then the act at 120 ms; each peek after. */
  async function both(
    act: (limiter: Limiter, d: Decision) => Promise<unknown>,
    settled: (limiter: Limiter, d: Decision) => Promise<unknown>,
  ): Promise<[Decision, Decision]> {
    const a = onClock([text])
    const b = onClock([text])
    const run = async (
      h: ReturnType<typeof onClock>,
      f: (limiter: Limiter, d: Decision) => Promise<unknown>,
    ) => {
      h.clock.now = 1000
      await h.limiter.consume('k', { cost: 2 })
      h.clock.now = 1050
      const d = await h.limiter.consume('k', { cost: 4 })
      expect(d.allowed).toBe(true)
      h.clock.now = 1120
      await f(h.limiter, d)
      return h.limiter.peek('k')
    }
    return [await run(a, act), await run(b, settled)]
  }

  it('a smaller true cost is a refund of the difference naming the call', async () => {
    const [refunded, settled] = await both(
      (limiter, d) => limiter.refund('k', { decision: d, cost: 3 }),
      (limiter, d) => limiter.settle('k', { decision: d, cost: 1 }),
    )
    expect(settled).toEqual(refunded)
  })

  it('a larger true cost is a penalty of the excess', async () => {
    const [penalized, settled] = await both(
      (limiter) => limiter.penalize('k', { cost: 3 }),
      (limiter, d) => limiter.settle('k', { decision: d, cost: 7 }),
    )
    expect(settled).toEqual(penalized)
  })

  it('an equal true cost changes nothing', async () => {
    const [untouched, settled] = await both(
      async () => undefined,
      (limiter, d) => limiter.settle('k', { decision: d, cost: 4 }),
    )
    expect(settled).toEqual(untouched)
  })
})

it('concurrency takes no settle: its units are held by the lease, which release ends', async () => {
  const { limiter } = onClock(['concurrency:10@lease', 'fixedWindow:100/1m@tokens'])
  const d = await limiter.consume('k', { cost: { tokens: 50 } })
  await limiter.settle('k', { decision: d, cost: { lease: 5, tokens: 5 } })
  const after = await limiter.peek('k')
  expect(after.rules.map((r) => r.remaining)).toEqual([8, 94])
  await limiter.release('k', d)
  expect(await left(limiter)).toEqual([9, 94])
})

it('the store-conformance traces with per-rule costs and settles run memory against memory', async () => {
  await answersRandomTraces(
    (clock) => new MemoryStore({ clock, sweepIntervalMs: 0 }),
    { followsRealTime: false },
    {
      perRuleCosts: true,
    },
  )
}, 60_000)
