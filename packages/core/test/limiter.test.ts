import { createHash } from 'node:crypto'
import {
  createLimiter,
  type Decision,
  DuplicateRuleError,
  ErrorCode,
  fixedWindow,
  InvalidCostError,
  InvalidOptionError,
  leakyBucket,
  MemoryStore,
  RateLimitedError,
  type Rule,
  type RuleDecision,
  type RuleInput,
  SluiceError,
  type Store,
  StoreError,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MAX_KEY_LENGTH, STORE_ERROR_RETRY_MS, UNLIMITED_DECISION } from '../src/limiter/limiter.ts'
import { admitted, catchError, denied, figures, harness } from './support.ts'

afterEach(() => {
  vi.useRealTimers()
})

function manualStore(start = 0) {
  const clock = { now: start }
  return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
}

/** A store that fails every call, synchronously or with a rejected promise. */
class FailingStore implements Store {
  calls = 0
  constructor(
    readonly how: 'throw' | 'reject',
    readonly error: unknown = new Error('connection refused'),
  ) {}
  apply(): readonly RuleDecision[] | Promise<readonly RuleDecision[]> {
    this.calls++
    if (this.how === 'throw') throw this.error
    return Promise.reject(this.error)
  }
  reset(): void | Promise<void> {
    this.calls++
    if (this.how === 'throw') throw this.error
    return Promise.reject(this.error)
  }
}

/** Wraps a MemoryStore, answering through promises and recording the keys it is given. */
class AsyncStore implements Store {
  readonly keys: string[] = []
  constructor(readonly inner: MemoryStore) {}
  async apply(prefix: string, key: string, rules: readonly Rule[], cost: number, mode: 'consume' | 'peek') {
    this.keys.push(key)
    return this.inner.apply(prefix, key, rules, cost, mode)
  }
  async reset(prefix: string, key: string) {
    this.inner.reset(prefix, key)
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

describe('the DESIGN worked example, figure by figure', () => {
  it('slidingLog limit 2 per 1000 ms', async () => {
    const h = harness([slidingLog({ limit: 2, windowMs: 1000 })])
    expect(await h.at(100)).toEqual(admitted(1, 1000))
    expect(await h.at(400)).toEqual(admitted(0, 1000))
    expect(await h.at(500)).toEqual(denied(0, 900, 600))
    expect(await h.at(1100)).toEqual(admitted(0, 1000))
    expect(await h.at(1101)).toEqual(denied(0, 999, 299))
  })
})

describe('several rules: all or nothing', () => {
  it('a call denied by one rule counts under none', async () => {
    const h = harness([fixedWindow({ limit: 5, windowMs: 10_000 }), slidingLog({ limit: 2, windowMs: 1000 })])
    await h.at(0)
    await h.at(0)
    for (let i = 0; i < 10; i++) expect((await h.at(500)).allowed).toBe(false)
    // The fixed window still holds 2, not 12. The peek is denied by the log, so the window reports
    // what it has left (5 - 2), not what the denied call would have left.
    const peeked = await h.limiter.peek('k')
    expect(peeked.rules.map((r) => [r.rule, r.allowed, r.remaining])).toEqual([
      ['5-per-10s', true, 3],
      ['2-per-1s', false, 0],
    ])
    expect((await h.at(1000)).allowed).toBe(true)
    const d = await h.limiter.consume('k')
    expect(d.rules.map((r) => r.remaining)).toEqual([1, 0])
  })

  it('a denied call takes no tokens and reserves no leaky-bucket slot', async () => {
    const h = harness([
      tokenBucket({ capacity: 3, refillPerSecond: 1 }),
      leakyBucket({ ratePerSecond: 10, maxQueueMs: 1000 }),
      fixedWindow({ limit: 2, windowMs: 60_000 }),
    ])
    expect(await h.at(0)).toMatchObject({ allowed: true, waitMs: 0 })
    expect(await h.at(0)).toMatchObject({ allowed: true, waitMs: 100 })
    for (let i = 0; i < 5; i++) expect(await h.at(0)).toMatchObject({ allowed: false, waitMs: 0 })
    const d = await h.limiter.peek('k')
    // Denied by the fixed window, so the bucket keeps its 1 token and the queue its 9 free slots.
    expect(d.rules.map((r) => [r.allowed, r.remaining, r.waitMs])).toEqual([
      [true, 1, 0],
      [true, 9, 0],
      [false, 0, 0],
    ])
  })

  it('the deciding rule is the denying one with the longest retry (the first on a tie)', async () => {
    const h = harness([
      fixedWindow({ limit: 1, windowMs: 1000, name: 'short' }),
      fixedWindow({ limit: 1, windowMs: 5000, name: 'long' }),
      slidingLog({ limit: 1, windowMs: 5000, name: 'tie' }),
      fixedWindow({ limit: 10, windowMs: 100_000, name: 'open' }),
    ])
    await h.at(0)
    const d = await h.limiter.consume('k')
    expect(d.allowed).toBe(false)
    expect(d.rules.map((r) => [r.rule, r.allowed, r.retryAfterMs])).toEqual([
      ['short', false, 1000],
      ['long', false, 5000],
      ['tie', false, 5000],
      ['open', true, 0],
    ])
    expect(d).toMatchObject({ rule: 'long', limit: 1, remaining: 0, resetMs: 5000, retryAfterMs: 5000 })
  })

  it('when every rule admits, the deciding rule has the least remaining (the first on a tie)', async () => {
    const h = harness([
      fixedWindow({ limit: 10, windowMs: 1000, name: 'wide' }),
      slidingLog({ limit: 3, windowMs: 1000, name: 'narrow' }),
      tokenBucket({ capacity: 3, refillPerSecond: 1, name: 'bucket' }),
    ])
    const d = await h.limiter.consume('k')
    expect(d).toMatchObject({ allowed: true, rule: 'narrow', limit: 3, remaining: 2, resetMs: 1000 })
    expect(d.rules.map((r) => r.remaining)).toEqual([9, 2, 2])
  })

  it('waitMs is the longest wait of the admitting rules, and 0 when denied', async () => {
    const h = harness([
      leakyBucket({ ratePerSecond: 10, maxQueueMs: 1000, name: 'fast' }),
      leakyBucket({ ratePerSecond: 4, maxQueueMs: 1000, name: 'slow' }),
      fixedWindow({ limit: 3, windowMs: 60_000 }),
    ])
    expect((await h.at(0)).waitMs).toBe(0)
    const second = await h.limiter.consume('k')
    expect(second.rules.map((r) => r.waitMs)).toEqual([100, 250, 0])
    expect(second).toMatchObject({ allowed: true, waitMs: 250 })
    expect((await h.at(0)).waitMs).toBe(500)
    const d = await h.limiter.consume('k')
    expect(d).toMatchObject({ allowed: false, waitMs: 0, rule: '3-per-60s', retryAfterMs: 60_000 })
  })

  it('rejects two rules sharing a state identity (kind, shape, name), whatever their limits', () => {
    const error = catchError(() =>
      createLimiter({
        rules: [slidingLog({ limit: 5, windowMs: 1000 }), slidingLog({ limit: 9, windowMs: 1000 })],
      }),
    )
    expect(error).toBeInstanceOf(DuplicateRuleError)
    expect(error).toMatchObject({
      code: ErrorCode.DUPLICATE_RULE,
      where: 'createLimiter.rules',
      identity: 'slidingLog:1000',
      rules: ['5-per-1s', '9-per-1s'],
      message:
        'Rules "5-per-1s" and "9-per-1s" of createLimiter.rules would share their state (slidingLog:1000): ' +
        'give them different names.',
    })
    // The same numbers under one name twice share an identity too.
    expect(
      catchError(() =>
        createLimiter({
          rules: [
            tokenBucket({ capacity: 5, refillPerSecond: 1, name: 'b' }),
            tokenBucket({ capacity: 9, refillPerSecond: 2, name: 'b' }),
          ],
        }),
      ),
    ).toMatchObject({ code: ErrorCode.DUPLICATE_RULE, identity: 'tokenBucket@b' })
  })

  it('accepts rules of one kind and shape told apart by their names', async () => {
    const h = harness([
      slidingLog({ limit: 5, windowMs: 1000 }),
      slidingLog({ limit: 5, windowMs: 1000, name: 'again' }),
    ])
    expect((await h.limiter.consume('k')).rules.map((r) => r.remaining)).toEqual([4, 4])
  })

  it('accepts rules that differ only in their numbers', async () => {
    const h = harness([
      slidingWindow({ limit: 5, windowMs: 1000 }),
      slidingWindow({ limit: 5, windowMs: 1000, buckets: 5 }),
    ])
    expect((await h.at(0)).allowed).toBe(true)
  })
})

describe('rules as a function of the key', () => {
  const table: Record<string, number> = { 'PAYMENT:ALIPAY': 2, 'PAYMENT:WECHAT': 1, 'REFUND:ALIPAY': -1 }
  const byTable = (key: string): RuleInput[] | null =>
    key in table ? [slidingLog({ limit: table[key]!, windowMs: 1000 })] : null

  it('gives each key its limit from a table; a missing entry or -1 is not limited and stores nothing', async () => {
    const { store } = manualStore()
    const limiter = createLimiter({ rules: byTable, store })
    expect(await limiter.consume('QUERY:UNIONPAY')).toBe(UNLIMITED_DECISION)
    expect(await limiter.consume('REFUND:ALIPAY')).toBe(UNLIMITED_DECISION)
    expect(store.size).toBe(0)
    expect((await limiter.consume('PAYMENT:ALIPAY')).remaining).toBe(1)
    expect((await limiter.consume('PAYMENT:ALIPAY')).remaining).toBe(0)
    expect((await limiter.consume('PAYMENT:ALIPAY')).allowed).toBe(false)
    expect((await limiter.consume('PAYMENT:WECHAT')).remaining).toBe(0)
    expect(store.size).toBe(2)
  })

  it('checks a frozen list once while the function keeps answering it, and a list that can change on every call', async () => {
    const { store } = manualStore()
    const frozen = Object.freeze([fixedWindow({ limit: 5, windowMs: 1000 })])
    const open: RuleInput[] = [fixedWindow({ limit: 5, windowMs: 1000 })]
    let answer: readonly RuleInput[] = frozen
    const limiter = createLimiter({ rules: () => answer, store })
    expect((await limiter.consume('k')).remaining).toBe(4)
    expect((await limiter.consume('k')).remaining).toBe(3)
    answer = open
    expect((await limiter.consume('k')).remaining).toBe(2)
    // The same array, changed in place: the change is seen at the next call.
    open.push({ kind: 'fixedWindow', limit: 1 } as unknown as RuleInput)
    await expect(limiter.consume('k')).rejects.toMatchObject({ code: ErrorCode.INVALID_RULES })
    open.pop()
    open.push(fixedWindow({ limit: 5, windowMs: 1000 }))
    await expect(limiter.consume('k')).rejects.toBeInstanceOf(DuplicateRuleError)
  })

  it('checks each frozen list once, however the calls alternate between the lists of several entries', async () => {
    const { store } = manualStore()
    // Two entries' frozen lists, each read through a proxy that counts the reads of its elements.
    const reads = { a: 0, b: 0 }
    const counted = (name: 'a' | 'b', windowMs: number) =>
      new Proxy(Object.freeze([fixedWindow({ limit: 100, windowMs })]), {
        get(target, property, receiver) {
          if (property === '0') reads[name]++
          return Reflect.get(target, property, receiver)
        },
      })
    const lists = { a: counted('a', 1000), b: counted('b', 2000) }
    const limiter = createLimiter({ rules: (key: string) => lists[key as 'a' | 'b'], store })
    for (const key of ['a', 'b', 'a', 'b']) expect((await limiter.consume(key)).allowed).toBe(true)
    const afterFirst = { ...reads }
    expect(afterFirst.a).toBeGreaterThan(0)
    expect(afterFirst.b).toBeGreaterThan(0)
    for (let i = 0; i < 10; i++) for (const key of ['a', 'b']) await limiter.consume(key)
    expect(reads).toEqual(afterFirst)
    expect((await limiter.consume('a')).remaining).toBe(100 - 13)
    expect((await limiter.consume('b')).remaining).toBe(100 - 13)
  })

  it('an admitted decision says when it was counted; its rules are a plain list of its own, without it in their JSON, equality or copies', async () => {
    const { clock, store } = manualStore()
    clock.now = 1234
    const limiter = createLimiter({ rules: [fixedWindow({ limit: 5, windowMs: 1000 })], store })
    const d = await limiter.consume('k')
    expect(d.countedAt).toBe(1234)
    expect('countedAt' in d.rules).toBe(false)
    expect(Object.keys(d.rules)).toEqual(['0'])
    expect(d.rules).toEqual([{ ...d.rules[0] }])
    expect(JSON.parse(JSON.stringify(d))).toEqual(JSON.parse(JSON.stringify({ ...d, rules: [d.rules[0]] })))
    expect((d.rules.map((r) => r) as { countedAt?: number }).countedAt).toBeUndefined()
    expect(Array.isArray(d.rules)).toBe(true)
  })

  it('the unlimited decision says so in every field', () => {
    expect(UNLIMITED_DECISION).toEqual({
      allowed: true,
      limit: Number.POSITIVE_INFINITY,
      remaining: Number.POSITIVE_INFINITY,
      resetMs: 0,
      retryAfterMs: 0,
      waitMs: 0,
      rule: 'unlimited',
      rules: [],
      reason: 'unlimited',
    })
    expect(Object.isFrozen(UNLIMITED_DECISION)).toBe(true)
  })

  it('drops unlimited markers from a list and applies the rest', async () => {
    const { store } = manualStore()
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: -1, windowMs: 1000 }), slidingLog({ limit: 1, windowMs: 1000 })],
      store,
    })
    const d = await limiter.consume('k')
    expect(d.rules.map((r) => r.rule)).toEqual(['1-per-1s'])
    expect((await limiter.consume('k')).allowed).toBe(false)
  })

  it('passes the key as given and the call context, and resolves per call', async () => {
    const { store } = manualStore()
    const seen: [string, unknown][] = []
    const limiter = createLimiter<{ plan: 'free' | 'pro' }>({
      rules: (key, context) => {
        seen.push([key, context])
        return [fixedWindow({ limit: context.plan === 'pro' ? 100 : 1, windowMs: 1000 })]
      },
      store,
    })
    const long = 'u'.repeat(500)
    expect((await limiter.consume(long, { context: { plan: 'pro' } })).remaining).toBe(99)
    expect((await limiter.consume(long, { context: { plan: 'free' } })).remaining).toBe(0)
    expect((await limiter.peek(long, { context: { plan: 'free' } })).allowed).toBe(false)
    await limiter.reset(long, { context: { plan: 'free' } })
    expect((await limiter.peek(long, { context: { plan: 'free' } })).allowed).toBe(true)
    expect(seen.map(([key]) => key)).toEqual([long, long, long, long, long])
    expect(seen[0]![1]).toEqual({ plan: 'pro' })
  })

  it.each([
    ['a number', 5],
    ['a string', 'slidingLog'],
    ['an object', {}],
    ['a list with junk', [5]],
    ['a list with null', [null]],
    ['a hand-made rule', [{ kind: 'bogus', limit: 1 }]],
  ])('rejects the call with ERR_SLUICE_INVALID_RULES when it returns %s', async (_, value) => {
    const limiter = createLimiter({ rules: () => value as never, store: manualStore().store })
    const error = await rejection(limiter.consume('k'))
    expect(error).toBeInstanceOf(SluiceError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_INVALID_RULES' })
    expect(await rejection(limiter.peek('k'))).toMatchObject({ code: 'ERR_SLUICE_INVALID_RULES' })
  })

  it('rejects the call with ERR_SLUICE_DUPLICATE_RULE when it returns two rules sharing a state identity', async () => {
    const limiter = createLimiter({
      rules: () => [fixedWindow({ limit: 1, windowMs: 10 }), fixedWindow({ limit: 2, windowMs: 10 })],
      store: manualStore().store,
    })
    const error = await rejection(limiter.consume('k'))
    expect(error).toBeInstanceOf(DuplicateRuleError)
    expect(error).toMatchObject({
      code: 'ERR_SLUICE_DUPLICATE_RULE',
      where: 'the rules function',
      identity: 'fixedWindow:10',
    })
  })

  it('rejects the call with the error a rules function throws', async () => {
    const boom = new Error('table unavailable')
    const limiter = createLimiter({
      rules: () => {
        throw boom
      },
      store: manualStore().store,
    })
    expect(await rejection(limiter.consume('k'))).toBe(boom)
  })
})

describe('cost', () => {
  const limiter = () =>
    createLimiter({
      rules: [
        slidingLog({ limit: 5, windowMs: 1000 }),
        tokenBucket({ capacity: 4, refillPerSecond: 1 }),
        leakyBucket({ ratePerSecond: 10, maxQueueMs: 200 }),
      ],
      store: manualStore().store,
    })

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '2', null])(
    'rejects cost %j with ERR_SLUICE_INVALID_COST',
    async (cost) => {
      const l = limiter()
      let promise: Promise<Decision> | undefined
      expect(() => {
        promise = l.consume('k', { cost: cost as never })
      }).not.toThrow()
      const error = await rejection(promise!)
      expect(error).toBeInstanceOf(InvalidCostError)
      expect(error).toMatchObject({ code: ErrorCode.INVALID_COST, cost })
      expect(await rejection(l.peek('k', { cost: cost as never }))).toBeInstanceOf(InvalidCostError)
      expect(await rejection(l.acquire('k', { cost: cost as never }))).toBeInstanceOf(InvalidCostError)
    },
  )

  it('rejects a cost above any rule limit or bucket capacity, and takes the largest that fits (a leaky bucket takes any cost whose slot is free)', async () => {
    const l = limiter()
    // Limits: slidingLog 5, tokenBucket capacity 4; the leakyBucket's (3) bounds no cost: its slot is free.
    for (const cost of [5, 6]) {
      const error = await rejection(l.consume('k', { cost }))
      expect(error).toMatchObject({ code: ErrorCode.INVALID_COST, cost })
    }
    expect((await l.consume('k', { cost: 4 })).allowed).toBe(true)
  })

  it('defaults to 1', async () => {
    const l = limiter()
    expect((await l.consume('k')).rules[0]!.remaining).toBe(4)
    expect((await l.consume('k', { cost: undefined })).rules[0]!.remaining).toBe(3)
  })
})

describe('keys', () => {
  it.each([
    ['empty', ''],
    ['undefined', undefined],
    ['a number', 42],
    ['null', null],
  ])('rejects a key that is %s with ERR_SLUICE_INVALID_KEY', async (_, key) => {
    const l = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 1000 })],
      store: manualStore().store,
    })
    for (const call of [l.consume, l.peek, l.acquire, l.reset]) {
      const error = await rejection(call(key as never))
      expect(error).toBeInstanceOf(SluiceError)
      expect(error).toMatchObject({ code: ErrorCode.INVALID_KEY })
    }
  })

  it('stores keys longer than MAX_KEY_LENGTH as digests that stay distinct', async () => {
    const { store } = manualStore()
    const recording = new AsyncStore(store)
    const l = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], store: recording })
    const exact = 'k'.repeat(MAX_KEY_LENGTH)
    const long1 = 'k'.repeat(300)
    const long2 = `${'k'.repeat(299)}j`
    for (const key of [exact, long1, long2]) expect((await l.consume(key)).allowed).toBe(true)
    for (const key of [exact, long1, long2]) expect((await l.consume(key)).allowed).toBe(false)
    expect(recording.keys[0]).toBe(exact)
    for (const key of recording.keys) expect(key.length).toBeLessThanOrEqual(MAX_KEY_LENGTH)
    expect(new Set(recording.keys).size).toBe(3)
    expect(store.size).toBe(3)
  })

  it("stores a key that starts with NUL as it is, unless it has a digest's length", async () => {
    const { store } = manualStore()
    const recording = new AsyncStore(store)
    const l = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1000 }) as Rule], store: recording })
    const marked = '\u0000k'
    const longer = `\u0000${'k'.repeat(44)}`
    const unmarked = 'k'.repeat(44)
    const digestLong = `\u0000${'k'.repeat(43)}`
    const keys = [marked, 'k', longer, unmarked, digestLong]
    for (const key of keys) expect((await l.consume(key)).allowed).toBe(true)
    for (const key of keys) expect((await l.consume(key)).allowed).toBe(false)
    // As they are: shorter or longer than a digest, or of its length without its mark.
    expect(recording.keys.slice(0, 4)).toEqual([marked, 'k', longer, unmarked])
    expect(recording.keys[4]).not.toBe(digestLong)
    expect(recording.keys[4]).toHaveLength(44)
    expect(recording.keys[4]!.charCodeAt(0)).toBe(0)
    expect(store.size).toBe(5)
  })

  it('never lets a short key collide with the digest of a long one', async () => {
    const { store } = manualStore()
    const l = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], store })
    const long = 'x'.repeat(1000)
    const lookalike = `\u0000${createHash('sha256').update(long).digest('base64url')}`
    expect((await l.consume(long)).allowed).toBe(true)
    expect((await l.consume(lookalike)).allowed).toBe(true)
    expect((await l.consume(long)).allowed).toBe(false)
    expect((await l.consume(lookalike)).allowed).toBe(false)
    expect(store.size).toBe(2)
  })
})

describe('prefixes', () => {
  it('keep two limiters on one store apart', async () => {
    const { store } = manualStore()
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const a = createLimiter({ rules, store, prefix: 'a' })
    const b = createLimiter({ rules, store, prefix: 'b' })
    expect((await a.consume('k')).allowed).toBe(true)
    expect((await b.consume('k')).allowed).toBe(true)
    expect((await a.consume('k')).allowed).toBe(false)
    await a.reset('k')
    expect((await a.consume('k')).allowed).toBe(true)
    expect((await b.consume('k')).allowed).toBe(false)
    expect(store.size).toBe(2)
    expect([a.prefix, b.prefix, a.store]).toEqual(['a', 'b', store])
  })

  it('may not be shared by two limiters on one store: ERR_SLUICE_PREFIX_COLLISION', () => {
    const { store } = manualStore()
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    createLimiter({ rules, store })
    const error = catchError(() => createLimiter({ rules, store, prefix: 'sluice' }))
    expect(error).toBeInstanceOf(SluiceError)
    expect(error).toMatchObject({ code: ErrorCode.PREFIX_COLLISION })
    createLimiter({ rules, store, prefix: 'other' })
    expect(createLimiter({ rules, store: manualStore().store }).prefix).toBe('sluice')
  })
})

describe('options', () => {
  const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]

  it.each([
    [{}, 'createLimiter.rules'],
    [{ rules: [] }, 'createLimiter.rules'],
    [{ rules: 'slidingLog' }, 'createLimiter.rules'],
    [{ rules: [{}] }, 'createLimiter.rules'],
    [{ rules: [null] }, 'createLimiter.rules'],
    [{ rules: [{ kind: 'fixedWindow' }, 5] }, 'createLimiter.rules'],
    [{ rules, store: {} }, 'createLimiter.store'],
    [{ rules, store: { apply() {} } }, 'createLimiter.store'],
    [{ rules, store: null }, 'createLimiter.store'],
    [{ rules, prefix: '' }, 'createLimiter.prefix'],
    [{ rules, prefix: 'a{b}' }, 'createLimiter.prefix'],
    [{ rules, prefix: 'a"b' }, 'createLimiter.prefix'],
    [{ rules, prefix: ' lead' }, 'createLimiter.prefix'],
    [{ rules, prefix: 'tab\there' }, 'createLimiter.prefix'],
    [{ rules, prefix: 'p'.repeat(129) }, 'createLimiter.prefix'],
    [{ rules, prefix: 7 }, 'createLimiter.prefix'],
    [{ rules, prefix: null }, 'createLimiter.prefix'],
    [{ rules, onStoreError: 'ignore' }, 'createLimiter.onStoreError'],
    [{ rules, onStoreError: {} }, 'createLimiter.onStoreError'],
    [{ rules, onStoreError: null }, 'createLimiter.onStoreError'],
    [{ rules, onstoreerror: 'allow' }, 'createLimiter.onstoreerror'],
    // Regressions from an outside trial: each of these was accepted.
    [{ rules: [{ kind: 'fixedWindow' }] }, 'createLimiter.rules'],
    [{ rules: [{ kind: 'slidingLog', id: 'x' }] }, 'createLimiter.rules'],
    [{ rules: [{ ...fixedWindow({ limit: 5, windowMs: 1000 }) }] }, 'createLimiter.rules'],
    [
      { rules: [Object.freeze({ ...fixedWindow({ limit: 5, windowMs: 1000 }), limit: 6 })] },
      'createLimiter.rules',
    ],
    [{ rules, onStoreError: { consume: async () => undefined } }, 'createLimiter.onStoreError'],
    [JSON.parse('{"rules": [], "__proto__": {"prefix": "x"}}'), 'createLimiter.__proto__'],
    [{ rules, onStoreError: undefined, ...{ sotre: undefined } }, 'createLimiter.sotre'],
  ])('rejects %o naming %s', (options, option) => {
    const error = catchError(() => createLimiter(options as never))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option })
    expect((error as Error).message).toContain(option)
  })

  it('rejects a missing options object', () => {
    expect(catchError(() => createLimiter(undefined as never))).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'createLimiter.rules',
    })
    expect(catchError(() => createLimiter(null as never))).toMatchObject({ code: ErrorCode.INVALID_OPTION })
  })

  it('treats options given as undefined as not given', async () => {
    const l = createLimiter({ rules, store: undefined, prefix: undefined, onStoreError: undefined })
    expect(l.prefix).toBe('sluice')
    expect(l.store).toBeInstanceOf(MemoryStore)
    expect((await l.consume('k')).allowed).toBe(true)
    await l.store.close?.()
  })
})

describe('onStoreError', () => {
  const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]

  it.each(['throw', 'reject'] as const)(
    "'allow' (the default) admits when the store fails (%s)",
    async (how) => {
      const store = new FailingStore(how)
      for (const l of [
        createLimiter({ rules, store }),
        createLimiter({ rules, store, prefix: 'x', onStoreError: 'allow' }),
      ]) {
        const d = await l.consume('k')
        expect(d).toMatchObject({
          allowed: true,
          retryAfterMs: 0,
          waitMs: 0,
          rule: '',
          rules: [],
          reason: 'store-error',
        })
        expect((await l.peek('k')).allowed).toBe(true)
        // A reset is never reported as done when the store failed to do it.
        expect(await rejection(l.reset('k'))).toMatchObject({ code: ErrorCode.STORE_ERROR })
      }
      expect(store.calls).toBe(6)
    },
  )

  it.each(['throw', 'reject'] as const)(
    "'deny' denies for STORE_ERROR_RETRY_MS when the store fails (%s)",
    async (how) => {
      const l = createLimiter({ rules, store: new FailingStore(how), onStoreError: 'deny' })
      expect(STORE_ERROR_RETRY_MS).toBe(1000)
      const d = await l.consume('k')
      expect(figures(d)).toEqual(denied(0, 1000, 1000))
      // A store failure is told by reason, never by a rule name.
      expect(d.rule).toBe('')
      expect(d.reason).toBe('store-error')
      const error = await rejection(l.acquire('k'))
      expect(error).toBeInstanceOf(RateLimitedError)
      expect((error as RateLimitedError).decision.retryAfterMs).toBe(1000)
    },
  )

  it.each(['throw', 'reject'] as const)(
    "'throw' rejects with a StoreError carrying the cause (%s)",
    async (how) => {
      const cause = new Error('connection refused')
      const l = createLimiter({ rules, store: new FailingStore(how, cause), onStoreError: 'throw' })
      for (const call of [l.consume, l.peek, l.reset]) {
        const error = await rejection(call('k'))
        expect(error).toBeInstanceOf(StoreError)
        expect(error).toMatchObject({ code: ErrorCode.STORE_ERROR, cause })
      }
    },
  )

  it("'throw' passes a store's own sluice error through unchanged", async () => {
    const timeout = new StoreError(ErrorCode.STORE_TIMEOUT, 'took longer than 50 ms')
    const l = createLimiter({ rules, store: new FailingStore('reject', timeout), onStoreError: 'throw' })
    expect(await rejection(l.consume('k'))).toBe(timeout)
  })

  it.each(['throw', 'reject'] as const)(
    'asks an insurance limiter when the store fails (%s)',
    async (how) => {
      const insurance = createLimiter({ rules, store: manualStore().store })
      const l = createLimiter({ rules, store: new FailingStore(how), onStoreError: insurance })
      expect((await l.peek('k')).allowed).toBe(true)
      expect((await l.consume('k')).allowed).toBe(true)
      expect((await l.consume('k')).allowed).toBe(false)
      expect((await insurance.peek('k')).allowed).toBe(false)
      // The insurance is reset as well; the failed store's reset still rejects.
      expect(await rejection(l.reset('k'))).toMatchObject({ code: ErrorCode.STORE_ERROR })
      expect((await insurance.peek('k')).allowed).toBe(true)
    },
  )

  it('never asks the policy when the store works', async () => {
    const { store } = manualStore()
    const l = createLimiter({ rules, store: new AsyncStore(store), onStoreError: 'deny' })
    expect((await l.consume('k')).allowed).toBe(true)
    expect((await l.consume('k')).rule).toBe('1-per-1s')
  })
})

describe('acquire', () => {
  const queue = () => {
    const { clock, store } = manualStore()
    return {
      clock,
      limiter: createLimiter({ rules: [leakyBucket({ ratePerSecond: 10, maxQueueMs: 300 })], store }),
    }
  }

  it('resolves at once when there is no wait, after waitMs when queued', async () => {
    vi.useFakeTimers()
    const { limiter } = queue()
    expect((await limiter.acquire('k')).waitMs).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
    let settled: Decision | undefined
    const pending = limiter.acquire('k').then((d) => {
      settled = d
    })
    await vi.advanceTimersByTimeAsync(99)
    expect(settled).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    await pending
    expect(settled).toMatchObject({ allowed: true, waitMs: 100 })
    expect(vi.getTimerCount()).toBe(0)
  })

  it('rejects with RateLimitedError carrying the decision when denied', async () => {
    vi.useFakeTimers()
    const { limiter } = queue()
    for (let i = 0; i < 4; i++) await limiter.consume('k')
    const error = await rejection(limiter.acquire('k'))
    expect(error).toBeInstanceOf(RateLimitedError)
    expect(error).toMatchObject({ code: ErrorCode.RATE_LIMITED })
    expect(figures((error as RateLimitedError).decision)).toEqual(denied(0, 400, 100))
    expect(vi.getTimerCount()).toBe(0)
  })

  it("stops waiting when aborted, rejects with the signal's reason and leaves no timer", async () => {
    vi.useFakeTimers()
    const { clock, limiter } = queue()
    await limiter.consume('k')
    const controller = new AbortController()
    const pending = rejection(limiter.acquire('k', { signal: controller.signal }))
    await vi.advanceTimersByTimeAsync(50)
    clock.now = 50
    expect(vi.getTimerCount()).toBe(1)
    const reason = new Error('client went away')
    controller.abort(reason)
    expect(await pending).toBe(reason)
    expect(vi.getTimerCount()).toBe(0)
    // Nobody queued behind it, so its slot went back: the queue ends at now (50), not at its slot (100).
    expect((await limiter.peek('k')).waitMs).toBe(100)
  })

  it("keeps an aborted wait's slot taken when a later call queued behind it", async () => {
    vi.useFakeTimers()
    const { clock, limiter } = queue()
    await limiter.consume('k')
    const controller = new AbortController()
    const pending = rejection(limiter.acquire('k', { signal: controller.signal }))
    await vi.advanceTimersByTimeAsync(0)
    expect((await limiter.consume('k')).waitMs).toBe(200)
    clock.now = 50
    controller.abort(new Error('gone'))
    await pending
    // The later call holds the slot at 200: the queue still ends there.
    expect((await limiter.peek('k')).waitMs).toBe(250)
  })

  it('rejects at once, counting nothing, when the signal is already aborted', async () => {
    vi.useFakeTimers()
    const { limiter } = queue()
    const controller = new AbortController()
    controller.abort()
    const error = await rejection(limiter.acquire('k', { signal: controller.signal }))
    expect(error).toBe(controller.signal.reason)
    expect((error as Error).name).toBe('AbortError')
    expect(vi.getTimerCount()).toBe(0)
    expect((await limiter.peek('k')).remaining).toBe(3)
  })
})

describe('reset', () => {
  it('forgets the key under every rule', async () => {
    const h = harness([
      fixedWindow({ limit: 1, windowMs: 1000 }),
      tokenBucket({ capacity: 1, refillPerSecond: 0.001 }),
    ])
    await h.at(0)
    expect((await h.at(1)).allowed).toBe(false)
    await h.limiter.reset('k')
    expect(await h.at(2)).toEqual(admitted(0, 998))
  })
})

describe('close', () => {
  it('releases the prefix, so a limiter built again on the same store may take it', () => {
    const store = new MemoryStore()
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const first = createLimiter({ rules, store, prefix: 'app' })
    expect(() => createLimiter({ rules, store, prefix: 'app' })).toThrowError(
      expect.objectContaining({ code: ErrorCode.PREFIX_COLLISION }),
    )
    first.close()
    expect(() => createLimiter({ rules, store, prefix: 'app' })).not.toThrow()
  })
})

describe('a rules function that returns a promise', () => {
  it('waits for the rules (a plan looked up in a cache), and its rejection rejects the call', async () => {
    const store = new MemoryStore({ clock: () => 1_000_000, sweepIntervalMs: 0 })
    const limiter = createLimiter({
      store,
      rules: async (key: string) => (key === 'free' ? [fixedWindow({ limit: 1, windowMs: 60_000 })] : null),
    })
    expect((await limiter.consume('free')).allowed).toBe(true)
    expect((await limiter.consume('free')).allowed).toBe(false)
    expect((await limiter.consume('gold')).reason).toBe('unlimited')
    await limiter.reset('free')
    expect((await limiter.peek('free')).allowed).toBe(true)
    const failing = createLimiter({
      store,
      prefix: 'failing',
      rules: () => Promise.reject(new Error('db down')),
    })
    await expect(failing.consume('k')).rejects.toThrow('db down')
  })

  it('keeps a synchronous rules function on a memory store in the same tick', () => {
    const limiter = createLimiter({
      store: new MemoryStore({ clock: () => 1_000_000, sweepIntervalMs: 0 }),
      rules: () => [fixedWindow({ limit: 1, windowMs: 60_000 })],
    })
    expect(limiter.consumeNow('k')).toMatchObject({ allowed: true })
  })
})
