/** The shape an edit's body must have; its strings are read by core's rule grammar (rule-text.test.ts in core). */
import { ErrorCode, InvalidOptionError, InvalidSpecError } from '@sluice/core'
import { MAX_RULES_PER_ENTRY } from '@sluice/dashboard'
import { describe, expect, it, vi } from 'vitest'
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

describe('parseSpec and parseSpecs (deprecated)', () => {
  it("read text through core's grammar, as specs, and warn once", async () => {
    const { parseSpec, parseSpecs } = await import('@sluice/dashboard')
    const warnings: Error[] = []
    const listen = (warning: Error) => warnings.push(warning)
    process.on('warning', listen)
    try {
      expect(parseSpec('concurrency:10~30s')).toEqual([{ kind: 'concurrency', limit: 10, leaseMs: 30_000 }])
      expect(parseSpecs(['-1', '[{"kind":"slidingLog","limit":3,"windowMs":1000}]'])).toEqual([
        { kind: 'unlimited' },
        { kind: 'slidingLog', limit: 3, windowMs: 1000 },
      ])
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', listen)
    }
    expect(warnings.map((w) => (w as { code?: string }).code)).toEqual(['SLUICE_DEP_PARSE_SPEC'])
  })

  it('parseDuration and SPEC_FORMS, which the dashboard exported before, still answer as they did', async () => {
    const { parseDuration, SPEC_FORMS } = await import('@sluice/dashboard')
    expect(parseDuration('250ms')).toBe(250)
    expect(parseDuration('s')).toBe(1000)
    expect(parseDuration('1.5m')).toBe(90_000)
    expect(parseDuration('0.5ms')).toBe(0.5)
    expect(parseDuration('1d')).toBe(86_400_000)
    expect(() => parseDuration('5 minutes')).toThrow(
      'Invalid rule spec "5 minutes": expected a duration such as 250ms, 1s, 5m, 1h or 1d.',
    )
    // The five forms it described before, as they read then; and the two kinds added since.
    expect(SPEC_FORMS).toMatchObject({
      fixedWindow: 'fixedWindow:LIMIT/WINDOW, e.g. fixedWindow:1000/1h',
      slidingLog: 'slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s',
      slidingWindow: 'slidingWindow:LIMIT/WINDOW[/BUCKETS], e.g. slidingWindow:600/1m/10',
      tokenBucket: 'tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s',
      leakyBucket: 'leakyBucket:RATE/PER[~MAXQUEUE], e.g. leakyBucket:5/s~2s',
    })
    expect(Object.keys(SPEC_FORMS)).toEqual([
      'fixedWindow',
      'slidingLog',
      'slidingWindow',
      'tokenBucket',
      'leakyBucket',
      'concurrency',
      'warmUp',
    ])
  })

  it('warns once a process on the first use of parseDuration or SPEC_FORMS, and not on import', async () => {
    for (const use of [
      (d: typeof import('@sluice/dashboard')) => d.parseDuration('1s'),
      (d: typeof import('@sluice/dashboard')) => d.SPEC_FORMS.fixedWindow,
    ]) {
      vi.resetModules()
      const warnings: Error[] = []
      const listen = (warning: Error) => warnings.push(warning)
      process.on('warning', listen)
      try {
        const dashboard = await import('@sluice/dashboard')
        await new Promise((resolve) => setImmediate(resolve))
        expect(warnings).toEqual([])
        use(dashboard)
        use(dashboard)
        await new Promise((resolve) => setImmediate(resolve))
      } finally {
        process.off('warning', listen)
      }
      expect(warnings.map((w) => (w as { code?: string }).code)).toEqual(['SLUICE_DEP_PARSE_SPEC'])
    }
  })
})
