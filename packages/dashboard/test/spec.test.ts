/** The short forms an edit may use, and the shape an edit's body must have. */
import {
  ErrorCode,
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  slidingLog,
  tokenBucket,
} from '@sluice/core'
import { MAX_RULES_PER_ENTRY, parseShortSpec } from '@sluice/dashboard'
import { describe, expect, it } from 'vitest'
import { readRuleSpecs } from '../src/spec.ts'

describe('parseShortSpec', () => {
  it('reads each short form as the spec its factory takes', () => {
    expect(parseShortSpec('slidingLog:100/1s')).toEqual({ kind: 'slidingLog', limit: 100, windowMs: 1000 })
    expect(parseShortSpec('fixedWindow:1000/1h')).toEqual({
      kind: 'fixedWindow',
      limit: 1000,
      windowMs: 3_600_000,
    })
    expect(parseShortSpec('slidingWindow:60/m')).toEqual({
      kind: 'slidingWindow',
      limit: 60,
      windowMs: 60_000,
    })
    expect(parseShortSpec('slidingLog:5/500ms')).toEqual({ kind: 'slidingLog', limit: 5, windowMs: 500 })
    expect(parseShortSpec('tokenBucket:50+10/s')).toEqual({
      kind: 'tokenBucket',
      capacity: 50,
      refillPerSecond: 10,
    })
    expect(parseShortSpec('tokenBucket:50+30/1m')).toEqual({
      kind: 'tokenBucket',
      capacity: 50,
      refillPerSecond: 0.5,
    })
    expect(parseShortSpec('leakyBucket:2/s')).toEqual({
      kind: 'leakyBucket',
      ratePerSecond: 2,
      maxQueueMs: 0,
    })
    expect(parseShortSpec('leakyBucket:2/s~2s')).toEqual({
      kind: 'leakyBucket',
      ratePerSecond: 2,
      maxQueueMs: 2000,
    })
  })

  it('gives specs the factories accept', () => {
    const { kind: _a, ...log } = parseShortSpec('slidingLog:100/1s')!
    expect(slidingLog(log as never)).toMatchObject({ limit: 100, windowMs: 1000 })
    const { kind: _b, ...window } = parseShortSpec('fixedWindow:1000/1h')!
    expect(fixedWindow(window as never)).toMatchObject({ limit: 1000 })
    const { kind: _c, ...bucket } = parseShortSpec('tokenBucket:50+10/s')!
    expect(tokenBucket(bucket as never)).toMatchObject({ capacity: 50 })
    const { kind: _d, ...leaky } = parseShortSpec('leakyBucket:2/s~2s')!
    expect(leakyBucket(leaky as never)).toMatchObject({ ratePerSecond: 2, maxQueueMs: 2000 })
  })

  it('answers undefined for anything else', () => {
    for (const text of [
      '',
      'slidingLog',
      'slidingLog:100',
      'slidingLog:100/1x',
      'slidingLog:x/1s',
      'magic:1/1s',
      'tokenBucket:50/s',
      'leakyBucket:2/s~',
      'slidingLog:1/1s/2',
    ]) {
      expect(parseShortSpec(text), text).toBeUndefined()
    }
  })
})

describe('readRuleSpecs', () => {
  it('takes null, spec objects and short forms', () => {
    expect(readRuleSpecs(null)).toBeNull()
    expect(readRuleSpecs([' slidingLog:3/1s ', { kind: 'fixedWindow', limit: 1, windowMs: 10 }])).toEqual([
      { kind: 'slidingLog', limit: 3, windowMs: 1000 },
      { kind: 'fixedWindow', limit: 1, windowMs: 10 },
    ])
  })

  it('throws InvalidOptionError naming the item for anything else', () => {
    const cases: [unknown, string][] = [
      [{ kind: 'fixedWindow' }, 'rules'],
      ['slidingLog:3/1s', 'rules'],
      [[1], 'rules[0]'],
      [[null], 'rules[0]'],
      [[{ kind: 'slidingLog', limit: 1, windowMs: 1 }, 'nope'], 'rules[1]'],
      [[{ limit: 1 }], 'rules[0].kind'],
      [Array.from({ length: MAX_RULES_PER_ENTRY + 1 }, () => 'slidingLog:1/1s'), 'rules'],
    ]
    for (const [body, option] of cases) {
      try {
        readRuleSpecs(body)
        expect.unreachable()
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidOptionError)
        expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
        expect((error as InvalidOptionError).option).toBe(option)
      }
    }
  })
})
