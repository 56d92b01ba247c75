/**
 * The command line's spec grammar: each form parses to the spec its factory takes, and anything else is
 * a coded error saying what was expected.
 */
import { ErrorCode, InvalidSpecError, ruleFromSpec } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { parseDuration, parseSpec, parseSpecs } from '../src/spec.ts'

describe('parseSpec', () => {
  it.each([
    ['slidingLog:100/1s', { kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ['fixedWindow:1000/1h', { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 }],
    ['fixedWindow:5/250ms', { kind: 'fixedWindow', limit: 5, windowMs: 250 }],
    ['slidingLog:100/s', { kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ['slidingLog:10/1.5s', { kind: 'slidingLog', limit: 10, windowMs: 1500 }],
    ['slidingWindow:600/1m', { kind: 'slidingWindow', limit: 600, windowMs: 60_000 }],
    ['slidingWindow:600/1m/6', { kind: 'slidingWindow', limit: 600, windowMs: 60_000, buckets: 6 }],
    ['tokenBucket:50+10/s', { kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
    ['tokenBucket:50+600/1m', { kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
    ['tokenBucket:5+0.5/s', { kind: 'tokenBucket', capacity: 5, refillPerSecond: 0.5 }],
    ['leakyBucket:5/s', { kind: 'leakyBucket', ratePerSecond: 5 }],
    ['leakyBucket:300/1m~2s', { kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 }],
    ['slidingLog:100/1s@pay-burst', { kind: 'slidingLog', limit: 100, windowMs: 1000, name: 'pay-burst' }],
    ['slidingLog:-1/1s', { kind: 'slidingLog', limit: -1, windowMs: 1000 }],
    ['-1', { kind: 'unlimited' }],
    ['null', { kind: 'unlimited' }],
    ['{"kind":"slidingLog","limit":3,"windowMs":1000}', { kind: 'slidingLog', limit: 3, windowMs: 1000 }],
  ])('%s', (text, spec) => {
    expect(parseSpec(text)).toEqual([spec])
    // Every parsed spec is one its factory takes.
    ruleFromSpec(parseSpec(text)[0]!)
  })

  it('reads a JSON list as several specs, and a command line in order', () => {
    expect(parseSpecs(['[{"kind":"slidingLog","limit":3,"windowMs":1000}]', 'tokenBucket:5+1/s'])).toEqual([
      { kind: 'slidingLog', limit: 3, windowMs: 1000 },
      { kind: 'tokenBucket', capacity: 5, refillPerSecond: 1 },
    ])
  })

  it.each([
    ['slidingLog', 'Invalid rule spec "slidingLog": expected -1, JSON, or KIND:NUMBERS[@NAME]'],
    [
      'gcra:5/1s',
      'Invalid rule spec "gcra:5/1s": expected a known kind (fixedWindow, slidingLog, slidingWindow, tokenBucket, leakyBucket)',
    ],
    ['toString:5/1s', 'expected a known kind'],
    [
      'slidingLog:100',
      'Invalid rule spec "slidingLog:100": expected slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s.',
    ],
    ['slidingLog:100/1x', 'expected slidingLog:LIMIT/WINDOW'],
    ['slidingLog:1e3/1s', 'expected slidingLog:LIMIT/WINDOW'],
    ['tokenBucket:50/s', 'expected tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s.'],
    ['leakyBucket:5/s~', 'expected leakyBucket:RATE/PER[~MAXQUEUE]'],
    ['slidingWindow:1/1s/x', 'expected slidingWindow:LIMIT/WINDOW[/BUCKETS]'],
    ['{"kind":', 'expected valid JSON'],
    ['', 'expected -1, JSON'],
  ])('refuses %j with ERR_SLUICE_INVALID_SPEC', (text, message) => {
    let error: unknown
    try {
      parseSpec(text)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidSpecError)
    expect(error).toMatchObject({ code: ErrorCode.INVALID_SPEC })
    expect((error as Error).message).toContain(message)
  })

  it('leaves the numbers to the factories', () => {
    expect(() => ruleFromSpec(parseSpec('slidingLog:0/1s')[0]!)).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'slidingLog.limit' }),
    )
    expect(() => ruleFromSpec(parseSpec('slidingWindow:10/1s/7')[0]!)).toThrow(
      expect.objectContaining({ option: 'slidingWindow.buckets' }),
    )
  })

  it('reads durations', () => {
    expect([parseDuration('1d'), parseDuration('2h'), parseDuration('m'), parseDuration('0.25s')]).toEqual([
      86_400_000, 7_200_000, 60_000, 250,
    ])
  })
})
