/** The shape an edit's body must have; its strings are read by core's rule grammar (rule-text.test.ts in core). */
import { ErrorCode, InvalidOptionError, InvalidSpecError } from '@sluice/core'
import { MAX_RULES_PER_ENTRY } from '@sluice/dashboard'
import { describe, expect, it } from 'vitest'
import { readRuleSpecs } from '../src/spec.ts'

describe('readRuleSpecs', () => {
  it('takes null, spec objects and strings in the grammar, in order', () => {
    expect(readRuleSpecs(null)).toBeNull()
    expect(
      readRuleSpecs([
        ' slidingLog:3/1s ',
        { kind: 'fixedWindow', limit: 1, windowMs: 10 },
        'slidingWindow:600/1m/6@minute',
        'leakyBucket:5/s~2s',
        '-1',
      ]),
    ).toEqual([
      { kind: 'slidingLog', limit: 3, windowMs: 1000 },
      { kind: 'fixedWindow', limit: 1, windowMs: 10 },
      { kind: 'slidingWindow', limit: 600, windowMs: 60_000, buckets: 6, name: 'minute' },
      { kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 },
      { kind: 'unlimited' },
    ])
  })

  it('throws InvalidOptionError naming the item for a wrong shape', () => {
    const cases: [unknown, string][] = [
      [{ kind: 'fixedWindow' }, 'rules'],
      ['slidingLog:3/1s', 'rules'],
      [[1], 'rules[0]'],
      [[null], 'rules[0]'],
      [[{ kind: 'slidingLog', limit: 1, windowMs: 1 }, ['slidingLog:1/1s']], 'rules[1]'],
      [[{ limit: 1 }], 'rules[0].kind'],
      [Array.from({ length: MAX_RULES_PER_ENTRY + 1 }, () => 'slidingLog:1/1s'), 'rules'],
    ]
    for (const [body, option] of cases) {
      let error: unknown
      try {
        readRuleSpecs(body)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(InvalidOptionError)
      expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
      expect((error as InvalidOptionError).option).toBe(option)
    }
  })

  it("throws the grammar's InvalidSpecError for a string that does not parse", () => {
    expect(() => readRuleSpecs(['slidingLog:5/1s', 'slidingLog:lots'])).toThrow(InvalidSpecError)
    expect(() => readRuleSpecs(['tokenBucket:50/s'])).toThrow(
      'Invalid rule spec "tokenBucket:50/s": expected tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s.',
    )
  })
})
