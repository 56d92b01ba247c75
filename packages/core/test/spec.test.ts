/**
 * Rules as data: `ruleFromSpec` builds a rule from `{ kind, ...options }` with the factory's checks, and
 * `JSON.stringify(rule)` gives exactly that spec back (derived fields stay out), for every kind.
 */
import {
  concurrency,
  ErrorCode,
  fixedWindow,
  InvalidOptionError,
  InvalidSpecError,
  leakyBucket,
  type Rule,
  type RuleInput,
  type RuleSpec,
  ruleFromSpec,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { isFactoryRule } from '../src/rules/index.ts'
import { UNLIMITED } from '../src/rules/unlimited.ts'
import { catchError } from './support.ts'

/** Every field of a rule, enumerable or not, for exact comparisons. */
function allFields(rule: object): Record<string, PropertyDescriptor> {
  return Object.getOwnPropertyDescriptors(rule)
}

const RULES: [string, RuleInput, string][] = [
  [
    'fixedWindow',
    fixedWindow({ limit: 100, windowMs: 60_000 }),
    '{"kind":"fixedWindow","limit":100,"windowMs":60000}',
  ],
  [
    'fixedWindow, named',
    fixedWindow({ limit: 100, windowMs: 60_000, name: 'hourly' }),
    '{"kind":"fixedWindow","limit":100,"windowMs":60000,"name":"hourly"}',
  ],
  ['slidingLog', slidingLog({ limit: 5, windowMs: 1000 }), '{"kind":"slidingLog","limit":5,"windowMs":1000}'],
  [
    'slidingLog, named',
    slidingLog({ limit: 5, windowMs: 1000, name: 'tps' }),
    '{"kind":"slidingLog","limit":5,"windowMs":1000,"name":"tps"}',
  ],
  [
    'slidingWindow (default buckets written out)',
    slidingWindow({ limit: 600, windowMs: 60_000 }),
    '{"kind":"slidingWindow","limit":600,"windowMs":60000,"buckets":10}',
  ],
  [
    'slidingWindow, named',
    slidingWindow({ limit: 600, windowMs: 60_000, buckets: 4, name: 'w' }),
    '{"kind":"slidingWindow","limit":600,"windowMs":60000,"buckets":4,"name":"w"}',
  ],
  [
    'tokenBucket',
    tokenBucket({ capacity: 50, refillPerSecond: 10 }),
    '{"kind":"tokenBucket","capacity":50,"refillPerSecond":10}',
  ],
  [
    'tokenBucket, named',
    tokenBucket({ capacity: 50, refillPerSecond: 0.25, name: 'burst' }),
    '{"kind":"tokenBucket","capacity":50,"refillPerSecond":0.25,"name":"burst"}',
  ],
  [
    'leakyBucket (default maxQueueMs written out)',
    leakyBucket({ ratePerSecond: 5 }),
    '{"kind":"leakyBucket","ratePerSecond":5,"maxQueueMs":0}',
  ],
  [
    'leakyBucket, named',
    leakyBucket({ ratePerSecond: 5, maxQueueMs: 2000, name: 'queue' }),
    '{"kind":"leakyBucket","ratePerSecond":5,"maxQueueMs":2000,"name":"queue"}',
  ],
  [
    'concurrency (default leaseMs written out)',
    concurrency({ limit: 4 }),
    '{"kind":"concurrency","limit":4,"leaseMs":60000}',
  ],
  [
    'concurrency, named',
    concurrency({ limit: 4, leaseMs: 30_000, name: 'uploads' }),
    '{"kind":"concurrency","limit":4,"leaseMs":30000,"name":"uploads"}',
  ],
  [
    'warmUp (default coldFactor and maxQueueMs written out)',
    warmUp({ ratePerSecond: 10, warmUpMs: 5000 }),
    '{"kind":"warmUp","ratePerSecond":10,"warmUpMs":5000,"coldFactor":3,"maxQueueMs":0}',
  ],
  [
    'warmUp, named',
    warmUp({ ratePerSecond: 2.5, warmUpMs: 10_000, coldFactor: 4, maxQueueMs: 500, name: 'boot' }),
    '{"kind":"warmUp","ratePerSecond":2.5,"warmUpMs":10000,"coldFactor":4,"maxQueueMs":500,"name":"boot"}',
  ],
  ['concurrency, unlimited', concurrency({ limit: -1 }), '{"kind":"unlimited"}'],
  ['the unlimited marker', fixedWindow({ limit: -1, windowMs: 1000 }), '{"kind":"unlimited"}'],
]

describe('rules as data', () => {
  it.each(RULES)('%s: JSON is the spec, and the spec builds the same rule', (_, rule, json) => {
    expect(JSON.stringify(rule)).toBe(json)
    const back = ruleFromSpec(JSON.parse(JSON.stringify(rule)) as RuleSpec)
    if (rule === UNLIMITED) expect(back).toBe(UNLIMITED)
    else {
      expect(allFields(back)).toEqual(allFields(rule))
      expect(Object.isFrozen(back)).toBe(true)
    }
    expect(isFactoryRule(back)).toBe(true)
  })

  it('leaves derived fields out of JSON but keeps them readable', () => {
    const rule = leakyBucket({ ratePerSecond: 5, maxQueueMs: 600 })
    expect(Object.keys(rule)).toEqual(['kind', 'ratePerSecond', 'maxQueueMs'])
    expect(rule).toMatchObject({
      id: 'leakyBucket',
      name: '5-per-s-queue-600ms',
      policyWindowSeconds: 1,
      intervalMs: 200,
      limit: 4,
    })
    const window = slidingWindow({ limit: 10, windowMs: 1000, buckets: 4 })
    expect(window).toMatchObject({ bucketMs: 250, id: 'slidingWindow:1000:4' })
    expect(Object.keys(window)).toEqual(['kind', 'limit', 'windowMs', 'buckets'])
  })

  it('concurrency and warmUp keep their derived figures out of JSON, and their limits out of the identity', () => {
    const held = concurrency({ limit: 3, leaseMs: 30_000 })
    expect(Object.keys(held)).toEqual(['kind', 'limit', 'leaseMs'])
    expect(held).toMatchObject({ id: 'concurrency:30000', name: '3-concurrent', policyWindowSeconds: 30 })
    expect((concurrency({ limit: 9, leaseMs: 30_000 }) as Rule).id).toBe('concurrency:30000')
    expect((concurrency({ limit: 3, name: 'up' }) as Rule).id).toBe('concurrency:60000@up')

    const meter = warmUp({ ratePerSecond: 10, warmUpMs: 5000, maxQueueMs: 1000 })
    expect(Object.keys(meter)).toEqual(['kind', 'ratePerSecond', 'warmUpMs', 'coldFactor', 'maxQueueMs'])
    expect(meter).toMatchObject({
      id: 'warmUp',
      name: '10-per-s-warm-5s',
      limit: 11,
      stableMs: 100,
      coldMs: 300,
      thresholdPermits: 25,
      maxPermits: 50,
      slope: 8,
      coolDownMs: 100,
    })
    for (const field of [
      'limit',
      'stableMs',
      'coldMs',
      'thresholdPermits',
      'maxPermits',
      'slope',
      'coolDownMs',
    ]) {
      expect(Object.getOwnPropertyDescriptor(meter, field)?.enumerable).toBe(false)
    }
    // Another rate, warm-up or cold factor is the same state: only a given name makes another.
    expect(warmUp({ ratePerSecond: 50, warmUpMs: 100, coldFactor: 2 }).id).toBe('warmUp')
    expect(warmUp({ ratePerSecond: 10, warmUpMs: 5000, name: 'boot' }).id).toBe('warmUp@boot')
  })

  it('a default name is never part of the identity; a given one is, after @', () => {
    const id = (rule: RuleInput) => (rule as Rule).id
    expect(id(fixedWindow({ limit: 1, windowMs: 10 }))).toBe(id(fixedWindow({ limit: 2, windowMs: 10 })))
    expect(fixedWindow({ limit: 1, windowMs: 10, name: 'a:b@c' })).toMatchObject({
      id: 'fixedWindow:10@a:b@c',
      name: 'a:b@c',
    })
    // A name equal to the default name is still a given name: it is in the JSON and the identity.
    const named = fixedWindow({ limit: 1, windowMs: 10, name: '1-per-10ms' })
    expect(JSON.stringify(named)).toBe('{"kind":"fixedWindow","limit":1,"windowMs":10,"name":"1-per-10ms"}')
    expect(id(named)).toBe('fixedWindow:10@1-per-10ms')
  })

  it('limit -1 (capacity -1) gives the unlimited marker', () => {
    expect(ruleFromSpec({ kind: 'slidingLog', limit: -1, windowMs: 1000 })).toBe(UNLIMITED)
    expect(ruleFromSpec({ kind: 'tokenBucket', capacity: -1, refillPerSecond: 1 })).toBe(UNLIMITED)
    expect(ruleFromSpec({ kind: 'unlimited' })).toBe(UNLIMITED)
  })

  it("names an unknown field with the factory's words and code", () => {
    const error = catchError(() =>
      ruleFromSpec({ kind: 'fixedWindow', limit: 1, windowMs: 10, windowMS: 5 } as never),
    )
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'fixedWindow.windowMS',
      value: 5,
      message:
        'Invalid option fixedWindow.windowMS: 5; expected one of the known options: limit, windowMs, name.',
    })
    // Derived fields are not options: a rule's full field list is not a spec.
    expect(
      catchError(() => ruleFromSpec({ kind: 'leakyBucket', ratePerSecond: 1, intervalMs: 1000 } as never)),
    ).toMatchObject({
      option: 'leakyBucket.intervalMs',
    })
    expect(catchError(() => ruleFromSpec({ kind: 'unlimited', limit: 1 } as never))).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'unlimited.limit',
    })
  })

  it('rejects what the factory rejects, naming the option', () => {
    expect(catchError(() => ruleFromSpec({ kind: 'slidingLog', limit: 0, windowMs: 1000 }))).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'slidingLog.limit',
      value: 0,
    })
    expect(
      catchError(() => ruleFromSpec({ kind: 'slidingWindow', limit: 3, windowMs: 1000, buckets: 7 })),
    ).toMatchObject({
      option: 'slidingWindow.buckets',
    })
    expect(catchError(() => ruleFromSpec({ kind: 'fixedWindow', limit: 3 } as never))).toMatchObject({
      option: 'fixedWindow.windowMs',
      value: undefined,
    })
    expect(
      catchError(() => ruleFromSpec({ kind: 'fixedWindow', limit: 3, windowMs: 10, name: 'a"b' })),
    ).toMatchObject({
      option: 'fixedWindow.name',
    })
    // A bad name is refused even with limit -1, which builds nothing.
    expect(
      catchError(() => ruleFromSpec({ kind: 'fixedWindow', limit: -1, windowMs: 10, name: '' })),
    ).toMatchObject({
      option: 'fixedWindow.name',
    })
  })

  it.each([
    [
      'an unknown kind',
      { kind: 'bogus', limit: 1 },
      'Invalid rule spec an object: expected a kind of fixedWindow, slidingLog, slidingWindow, tokenBucket, leakyBucket, concurrency, warmUp, quota or unlimited (got "bogus").',
    ],
    [
      'no kind',
      { limit: 1, windowMs: 10 },
      'Invalid rule spec an object: expected a kind of fixedWindow, slidingLog, slidingWindow, tokenBucket, leakyBucket, concurrency, warmUp, quota or unlimited (got undefined).',
    ],
    ['an inherited kind', Object.create({ kind: 'fixedWindow' }), undefined],
    ['a kind from the prototype chain', { kind: 'toString' }, undefined],
    ['null', null, 'Invalid rule spec null: expected an object { kind, ...options }.'],
    ['an array', [], 'Invalid rule spec an array of 0: expected an object { kind, ...options }.'],
    [
      'a string',
      'slidingLog:5/1s',
      'Invalid rule spec "slidingLog:5/1s": expected an object { kind, ...options }.',
    ],
  ])('rejects %s with ERR_SLUICE_INVALID_SPEC', (_, spec, message) => {
    const error = catchError(() => ruleFromSpec(spec as never))
    expect(error).toBeInstanceOf(InvalidSpecError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_SPEC })
    if (message !== undefined) expect((error as Error).message).toBe(message)
  })

  it('isFactoryRule refuses look-alikes: hand-made copies, enumerable derived fields, thawed rules', () => {
    const rule = fixedWindow({ limit: 3, windowMs: 1000 })
    expect(isFactoryRule(rule)).toBe(true)
    expect(isFactoryRule(Object.freeze({ ...rule }))).toBe(false) // no id, no name: spread drops them
    expect(
      isFactoryRule(
        Object.freeze({
          kind: 'fixedWindow',
          limit: 3,
          windowMs: 1000,
          id: 'fixedWindow:1000',
          name: '3-per-1s',
          policyWindowSeconds: 1,
        }),
      ),
    ).toBe(false)
    const forged = Object.freeze(
      Object.defineProperties(
        { kind: 'fixedWindow', limit: 3, windowMs: 1000 },
        {
          id: { value: 'fixedWindow:1000', enumerable: false },
          name: { value: '3-per-1s', enumerable: false },
          policyWindowSeconds: { value: 999, enumerable: false },
        },
      ),
    )
    expect(isFactoryRule(forged)).toBe(false)
    expect(isFactoryRule({ ...rule })).toBe(false) // not frozen
  })
})
