/**
 * Rules as text: each form of the grammar builds the rule its factory builds, anything else is a coded
 * error naming the text, and every rule a factory accepts is written as text that reads back to a rule
 * with the same JSON.
 */
import {
  concurrency,
  createLimiter,
  createLimitTable,
  ErrorCode,
  fixedWindow,
  formatRuleSpec,
  InvalidOptionError,
  InvalidSpecError,
  leakyBucket,
  MemoryStore,
  parseRuleSpec,
  parseRuleSpecs,
  type RuleInput,
  type RuleSpec,
  ruleFromSpec,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

const json = (rule: RuleInput) => JSON.parse(JSON.stringify(rule)) as unknown

describe('parseRuleSpec', () => {
  it.each([
    ['slidingLog:100/1s', { kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ['fixedWindow:1000/1h', { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 }],
    ['fixedWindow:5/250ms', { kind: 'fixedWindow', limit: 5, windowMs: 250 }],
    ['fixedWindow:1000/1d', { kind: 'fixedWindow', limit: 1000, windowMs: 86_400_000 }],
    ['slidingLog:100/s', { kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ['slidingLog:10/1.5s', { kind: 'slidingLog', limit: 10, windowMs: 1500 }],
    ['slidingWindow:600/1m', { kind: 'slidingWindow', limit: 600, windowMs: 60_000, buckets: 10 }],
    ['slidingWindow:600/1m/6', { kind: 'slidingWindow', limit: 600, windowMs: 60_000, buckets: 6 }],
    ['tokenBucket:50+10/s', { kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
    ['tokenBucket:50+600/1m', { kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
    ['tokenBucket:5+0.5/s', { kind: 'tokenBucket', capacity: 5, refillPerSecond: 0.5 }],
    ['tokenBucket:5+2.5e-3/s', { kind: 'tokenBucket', capacity: 5, refillPerSecond: 0.0025 }],
    ['leakyBucket:5/s', { kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 0 }],
    ['leakyBucket:300/1m~2s', { kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 }],
    ['concurrency:10', { kind: 'concurrency', limit: 10, leaseMs: 60_000 }],
    ['concurrency:10~30s', { kind: 'concurrency', limit: 10, leaseMs: 30_000 }],
    [
      'warmUp:100/s,30s',
      { kind: 'warmUp', ratePerSecond: 100, warmUpMs: 30_000, coldFactor: 3, maxQueueMs: 0 },
    ],
    [
      'warmUp:6000/1m,30sx4~1s',
      { kind: 'warmUp', ratePerSecond: 100, warmUpMs: 30_000, coldFactor: 4, maxQueueMs: 1000 },
    ],
    [
      'warmUp:100/s,1mx2.5',
      { kind: 'warmUp', ratePerSecond: 100, warmUpMs: 60_000, coldFactor: 2.5, maxQueueMs: 0 },
    ],
    ['slidingLog:100/1s@pay-burst', { kind: 'slidingLog', limit: 100, windowMs: 1000, name: 'pay-burst' }],
    ['concurrency:3@a@b:c', { kind: 'concurrency', limit: 3, leaseMs: 60_000, name: 'a@b:c' }],
    ['  fixedWindow:1/1s  ', { kind: 'fixedWindow', limit: 1, windowMs: 1000 }],
    ['slidingLog:-1/1s', { kind: 'unlimited' }],
    ['tokenBucket:-1+1/s', { kind: 'unlimited' }],
    ['concurrency:-1', { kind: 'unlimited' }],
    ['-1', { kind: 'unlimited' }],
    ['null', { kind: 'unlimited' }],
    ['{"kind":"slidingLog","limit":3,"windowMs":1000}', { kind: 'slidingLog', limit: 3, windowMs: 1000 }],
    ['100/1m', { kind: 'slidingWindow', limit: 100, windowMs: 60_000, buckets: 10 }],
    [' 5/s@api:v1 ', { kind: 'slidingWindow', limit: 5, windowMs: 1000, buckets: 10, name: 'api:v1' }],
  ])('%s', (text, spec) => {
    const rule = parseRuleSpec(text)
    expect(json(rule)).toEqual(spec)
    // The rule is the one its factory builds from the same spec.
    expect(rule).toStrictEqual(ruleFromSpec(spec as RuleSpec))
  })

  it('reads a list of texts, a JSON list among them, in order', () => {
    expect(
      parseRuleSpecs(['[{"kind":"slidingLog","limit":3,"windowMs":1000}]', 'tokenBucket:5+1/s']).map(json),
    ).toEqual([
      { kind: 'slidingLog', limit: 3, windowMs: 1000 },
      { kind: 'tokenBucket', capacity: 5, refillPerSecond: 1 },
    ])
  })

  it.each([
    ['slidingLog', 'Invalid rule spec "slidingLog": expected -1, JSON, KIND:NUMBERS[@NAME] with one of:'],
    [
      'gcra:5/1s',
      'Invalid rule spec "gcra:5/1s": expected a known kind (fixedWindow, slidingLog, slidingWindow, tokenBucket, leakyBucket, concurrency, warmUp, quota)',
    ],
    ['toString:5/1s', 'expected a known kind'],
    [
      'slidingLog:100',
      'Invalid rule spec "slidingLog:100": expected slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s.',
    ],
    ['slidingLog:100/1x', 'expected slidingLog:LIMIT/WINDOW'],
    ['slidingLog:1e3/1s', 'expected slidingLog:LIMIT/WINDOW'],
    ['fixedWindow:10/1s/5', 'expected fixedWindow:LIMIT/WINDOW'],
    ['tokenBucket:50/s', 'expected tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s.'],
    ['leakyBucket:5/s~', 'expected leakyBucket:RATE/PER[~MAXQUEUE]'],
    ['slidingWindow:1/1s/x', 'expected slidingWindow:LIMIT/WINDOW[/BUCKETS]'],
    ['concurrency:10/1s', 'expected concurrency:LIMIT[~LEASE]'],
    ['warmUp:100/s', 'expected warmUp:RATE/PER,WARMUP[xCOLD][~MAXQUEUE]'],
    ['warmUp:100/s,30sx', 'expected warmUp:RATE/PER,WARMUP[xCOLD][~MAXQUEUE]'],
    ['{"kind":', 'expected valid JSON'],
    ['[{"kind":"slidingLog","limit":3,"windowMs":1000}]', 'expected one rule: a JSON list holds several'],
    ['', 'expected -1, JSON'],
    [`slidingLog:1/1s@${'x'.repeat(5000)}`, 'expected at most 4096 characters'],
    ['100/1m/6', 'expected a bare rate LIMIT/WINDOW, e.g. 100/1m (read as slidingWindow:100/1m).'],
    ['100', 'expected a bare rate LIMIT/WINDOW'],
    ['100+1/s', 'expected a bare rate LIMIT/WINDOW'],
  ])('refuses %j with ERR_SLUICE_INVALID_SPEC naming the text', (text, message) => {
    let error: unknown
    try {
      parseRuleSpec(text)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidSpecError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_SPEC, spec: text })
    expect((error as Error).message).toContain(message)
  })

  it('leaves the figures to the factories, whose errors name the option', () => {
    expect(() => parseRuleSpec('slidingLog:0/1s')).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'slidingLog.limit' }),
    )
    expect(() => parseRuleSpec('slidingWindow:10/1s/7')).toThrow(
      expect.objectContaining({ option: 'slidingWindow.buckets' }),
    )
    expect(() => parseRuleSpec('leakyBucket:5/s~0.5ms')).toThrow(
      expect.objectContaining({ option: 'leakyBucket.maxQueueMs' }),
    )
    expect(() => parseRuleSpec('warmUp:5/s,1sx0.5')).toThrow(
      expect.objectContaining({ option: 'warmUp.coldFactor' }),
    )
    expect(() => parseRuleSpec('{"kind":"slidingLog","limit":3,"windowMs":1000,"x":1}')).toThrow(
      expect.objectContaining({ option: 'slidingLog.x' }),
    )
  })
})

describe('wrong input to the text helpers', () => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn()
    } catch (error) {
      return { type: (error as Error).constructor.name, code: (error as { code?: string }).code }
    }
    return 'no error'
  }
  const INVALID_SPEC = { type: 'InvalidSpecError', code: ErrorCode.INVALID_SPEC }

  it('parseRuleSpecs given one text instead of a list throws ERR_SLUICE_INVALID_SPEC, not "texts.flatMap is not a function"', () => {
    expect(codeOf(() => parseRuleSpecs('slidingLog:1/1s' as never))).toEqual(INVALID_SPEC)
    expect(() => parseRuleSpecs('slidingLog:1/1s' as never)).toThrow(
      'Invalid rule spec "slidingLog:1/1s": expected a list of rule texts',
    )
    for (const texts of [null, undefined, 5, { 0: 'slidingLog:1/1s' }, [42], [null], ['[1]']]) {
      expect(
        codeOf(() => parseRuleSpecs(texts as never)),
        JSON.stringify(texts),
      ).toEqual(INVALID_SPEC)
    }
  })

  it('formatRuleSpec of {}, null or a hand-made rule throws ERR_SLUICE_INVALID_SPEC, never a TypeError or "undefined:undefined"', () => {
    const handMade = { kind: 'slidingLog', limit: 1, windowMs: 1000 }
    for (const rule of [{}, null, undefined, 'slidingLog:1/1s', 7, [], handMade]) {
      expect(
        codeOf(() => formatRuleSpec(rule as never)),
        JSON.stringify(rule),
      ).toEqual(INVALID_SPEC)
    }
    expect(() => formatRuleSpec({} as never)).toThrow(
      'Invalid rule spec an object: expected a rule built by a rule factory',
    )
  })
})

describe('formatRuleSpec', () => {
  it.each([
    [slidingLog({ limit: 100, windowMs: 1000 }), 'slidingLog:100/1s'],
    [fixedWindow({ limit: 1000, windowMs: 3_600_000 }), 'fixedWindow:1000/1h'],
    [fixedWindow({ limit: 7, windowMs: 90_000 }), 'fixedWindow:7/90s'],
    [fixedWindow({ limit: 7, windowMs: 1500 }), 'fixedWindow:7/1500ms'],
    [slidingWindow({ limit: 600, windowMs: 60_000 }), 'slidingWindow:600/1m'],
    [slidingWindow({ limit: 600, windowMs: 60_000, buckets: 6 }), 'slidingWindow:600/1m/6'],
    [tokenBucket({ capacity: 50, refillPerSecond: 10 }), 'tokenBucket:50+10/s'],
    [leakyBucket({ ratePerSecond: 5, maxQueueMs: 2000 }), 'leakyBucket:5/s~2s'],
    [concurrency({ limit: 10 }), 'concurrency:10'],
    [concurrency({ limit: 10, leaseMs: 30_000, name: 'uploads' }), 'concurrency:10~30s@uploads'],
    [warmUp({ ratePerSecond: 100, warmUpMs: 30_000 }), 'warmUp:100/s,30s'],
    [warmUp({ ratePerSecond: 0.5, warmUpMs: 1, coldFactor: 4, maxQueueMs: 10 }), 'warmUp:0.5/s,1msx4~10ms'],
    [tokenBucket({ capacity: 1, refillPerSecond: 1e-7 }), 'tokenBucket:1+1e-7/s'],
    [slidingLog({ limit: -1, windowMs: 1000 }), '-1'],
    [parseRuleSpec('100/1m'), 'slidingWindow:100/1m'],
  ])('writes %j as %s', (rule, text) => {
    expect(formatRuleSpec(rule)).toBe(text)
  })

  // Rules from every factory, over the whole range each accepts, with or without a name.
  const name = fc.option(
    fc.stringMatching(/^[!-~]([ -~]{0,10}[!-~])?$/).filter((s) => !/["\\]/.test(s)),
    { nil: undefined },
  )
  const rate = fc.double({ min: 1e-3, max: 1e6, noNaN: true })
  const ms = (max: number) => fc.integer({ min: 1, max })
  const limit = fc.oneof(fc.constant(-1), fc.integer({ min: 1, max: 2 ** 40 }))
  const specs: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
    fc.record({ kind: fc.constantFrom('fixedWindow', 'slidingLog'), limit, windowMs: ms(2 ** 45) }),
    fc
      .record({ kind: fc.constant('slidingWindow'), limit, buckets: ms(1000), per: ms(2 ** 30) })
      .map(({ per, ...spec }) => ({ ...spec, windowMs: per * spec.buckets })),
    fc.record({
      kind: fc.constant('tokenBucket'),
      capacity: fc.oneof(fc.constant(-1), fc.integer({ min: 1, max: 1e9 })),
      refillPerSecond: rate,
    }),
    fc.record({
      kind: fc.constant('leakyBucket'),
      ratePerSecond: rate,
      maxQueueMs: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    }),
    fc.record({
      kind: fc.constant('concurrency'),
      limit: fc.integer({ min: -1, max: 10_000 }),
      leaseMs: ms(2 ** 50),
    }),
    fc.record(
      {
        kind: fc.constant('warmUp'),
        ratePerSecond: rate,
        warmUpMs: ms(2 ** 36),
        coldFactor: fc.double({ min: 1, max: 100, noNaN: true }),
        maxQueueMs: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      },
      { requiredKeys: ['kind', 'ratePerSecond', 'warmUpMs'] },
    ),
  )
  const rules = fc
    .tuple(specs, name)
    .map(([spec, given]) => {
      try {
        return ruleFromSpec((given === undefined ? spec : { ...spec, name: given }) as RuleSpec)
      } catch {
        return undefined // a combination the factory refuses (a strict meter faster than 1000/s, say)
      }
    })
    .filter((rule): rule is RuleInput => rule !== undefined)

  it('writes every rule as text that reads back to a rule with the same JSON and state identity', () => {
    fc.assert(
      fc.property(rules, (rule) => {
        const back = parseRuleSpec(formatRuleSpec(rule))
        expect(JSON.stringify(back)).toBe(JSON.stringify(rule))
        expect((back as { id?: string }).id).toBe((rule as { id?: string }).id)
        expect(back.name).toBe(rule.name)
      }),
      { seed: 32, numRuns: 2000 },
    )
  })
})

describe('rule text wherever rules are taken', () => {
  const clocked = () => {
    const clock = { now: 0 }
    return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
  }

  it('createLimiter reads rules as text: the worked example, written as slidingLog:2/1s', async () => {
    const { clock, store } = clocked()
    const limiter = createLimiter({ rules: ['slidingLog:2/1s', 'fixedWindow:1000/1d'], store })
    const at = async (t: number) => {
      clock.now = t
      const d = await limiter.consume('k')
      return [d.allowed, d.retryAfterMs, d.rules.map((r) => r.rule)]
    }
    expect(await at(100)).toEqual([true, 0, ['2-per-1s', '1000-per-86400s']])
    expect(await at(400)).toEqual([true, 0, ['2-per-1s', '1000-per-86400s']])
    expect(await at(500)).toEqual([false, 600, ['2-per-1s', '1000-per-86400s']])
    expect(await at(1100)).toEqual([true, 0, ['2-per-1s', '1000-per-86400s']])
    expect((await at(1101))[0]).toBe(false)
  })

  it('mixes text and rules; -1 as text is not limited; two texts of one identity are refused', async () => {
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 1000 }), '-1', 'concurrency:1'],
    })
    const first = await limiter.consume('k')
    expect(first.rules.map((r) => r.rule)).toEqual(['1-per-1s', '1-concurrent'])
    expect(() => createLimiter({ rules: ['slidingLog:5/1s', 'slidingLog:9/1s'] })).toThrow(
      expect.objectContaining({ code: ErrorCode.DUPLICATE_RULE }),
    )
  })

  it('refuses text outside the grammar at construction, naming the option, its index and the text', () => {
    let error: unknown
    try {
      createLimiter({ rules: ['slidingLog:5/1s', 'slidingWindow:100'] })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'createLimiter.rules[1]',
      value: 'slidingWindow:100',
    })
    expect((error as Error).message).toContain('rule text such as slidingWindow:LIMIT/WINDOW[/BUCKETS]')
    // A figure the factory refuses is named as the factory names it.
    expect(() => createLimiter({ rules: ['fixedWindow:0/1s'] })).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'fixedWindow.limit' }),
    )
  })

  it('limit tables take text in their entries, checked before anything is written', async () => {
    const table = createLimitTable({ 'PAYMENT:ALIPAY': ['slidingLog:100/1s', 'fixedWindow:1000/1h'] })
    expect(table.get('PAYMENT:ALIPAY')?.map(formatRuleSpec)).toEqual([
      'slidingLog:100/1s',
      'fixedWindow:1000/1h',
    ])
    await table.set('*', ['tokenBucket:50+10/s@default'])
    expect(JSON.stringify(table.get('REFUND:ALIPAY'))).toBe(
      '[{"kind":"tokenBucket","capacity":50,"refillPerSecond":10,"name":"default"}]',
    )
    await expect(table.set('*', ['tokenBucket:50/s'])).rejects.toMatchObject({ code: ErrorCode.INVALID_SPEC })
    expect(table.version).toBe(1)
    expect(table.get('REFUND:ALIPAY')?.map(formatRuleSpec)).toEqual(['tokenBucket:50+10/s@default'])
  })

  it('takes a bare rate (100/1m, read as slidingWindow) in createLimiter, a limit table and a rules function', async () => {
    const bare = { kind: 'slidingWindow', limit: 2, windowMs: 60_000, buckets: 10 }
    const { store } = clocked()
    const fixed = createLimiter({ rules: ['2/1m'], store, prefix: 'fixed' })
    const table = createLimitTable({ '*': ['2/1m'] })
    expect(table.get('k')?.map(json)).toEqual([bare])
    const fromTable = createLimiter({ rules: (key) => table.get(key), store, prefix: 'table' })
    const fromFunction = createLimiter({ rules: () => '2/1m', store, prefix: 'function' })
    for (const limiter of [fixed, fromTable, fromFunction]) {
      const decisions = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, false])
      expect(decisions[0]!.rule).toBe('2-per-60s')
    }
  })
})
