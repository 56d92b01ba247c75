/**
 * createLimitTable: entries to rules in memory, with `"*"` as the default entry, versions, change
 * listeners, and every change checked before anything is written.
 */
import {
  createLimiter,
  createLimitTable,
  DuplicateRuleError,
  ErrorCode,
  fixedWindow,
  InvalidOptionError,
  InvalidSpecError,
  MemoryStore,
  SluiceError,
  slidingLog,
  tokenBucket,
} from '@sluice/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { TABLE_BOUNDS } from '../src/table.ts'
import { catchError } from './support.ts'

const tps = (limit: number) => ({ kind: 'slidingLog', limit, windowMs: 1000 }) as const

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('createLimitTable', () => {
  it('answers get from its entries, "*" for missing ones, and null for not limited', async () => {
    const table = createLimitTable({
      'PAYMENT:ALIPAY': [tps(5)],
      'REFUND:ALIPAY': [tps(-1)],
      'QUERY:ALIPAY': null,
    })
    expect(table.version).toBe(0)
    expect(table.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 5, windowMs: 1000 })])
    expect(table.get('REFUND:ALIPAY')).toBe(null)
    expect(table.get('QUERY:ALIPAY')).toBe(null)
    expect(table.get('PAYMENT:WECHAT')).toBe(null)
    // The same frozen list every time, so stores can remember their plan for it.
    expect(table.get('PAYMENT:ALIPAY')).toBe(table.get('PAYMENT:ALIPAY'))
    expect(Object.isFrozen(table.get('PAYMENT:ALIPAY'))).toBe(true)

    await table.set('*', [tps(1)])
    expect(table.get('PAYMENT:WECHAT')).toEqual([slidingLog({ limit: 1, windowMs: 1000 })])
    // An entry set to null or to -1 is not limited even with "*".
    expect(table.get('REFUND:ALIPAY')).toBe(null)
    expect(table.get('QUERY:ALIPAY')).toBe(null)
    await table.delete('QUERY:ALIPAY')
    expect(table.get('QUERY:ALIPAY')).toEqual([slidingLog({ limit: 1, windowMs: 1000 })])
    expect(table.version).toBe(2)
    expect([...table.entries()]).toEqual([
      ['PAYMENT:ALIPAY', [slidingLog({ limit: 5, windowMs: 1000 })]],
      ['REFUND:ALIPAY', null],
      ['*', [slidingLog({ limit: 1, windowMs: 1000 })]],
    ])
  })

  it('takes rules and specs alike, keeps the rule objects it is given, and drops unlimited markers', async () => {
    const rule = tokenBucket({ capacity: 50, refillPerSecond: 10 })
    const table = createLimitTable()
    await table.set('a', [
      rule,
      { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 },
      fixedWindow({ limit: -1, windowMs: 1 }),
    ])
    expect(table.get('a')![0]).toBe(rule)
    expect(JSON.stringify(table.get('a'))).toBe(
      '[{"kind":"tokenBucket","capacity":50,"refillPerSecond":10},{"kind":"fixedWindow","limit":1000,"windowMs":3600000}]',
    )
    await table.set('b', [])
    expect(table.get('b')).toBe(null)
  })

  it('rises by one per change and tells listeners after the change, before set resolves', async () => {
    const table = createLimitTable()
    const seen: [string, number, number][] = []
    const off = table.onChange((entry, version) => seen.push([entry, version, table.get(entry)?.length ?? 0]))
    const done = table.set('a', [tps(5)])
    expect(seen).toEqual([['a', 1, 1]])
    await done
    await table.delete('a')
    await table.delete('never-there') // no change: no version, no call
    off()
    await table.set('b', null)
    expect(seen).toEqual([
      ['a', 1, 1],
      ['a', 2, 0],
    ])
    expect(table.version).toBe(3)
  })

  it('a throwing listener breaks neither the table nor the other listeners: it becomes a warning', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const table = createLimitTable()
    const later: number[] = []
    table.onChange(() => {
      throw new Error('listener bug')
    })
    table.onChange((_, v) => later.push(v))
    await table.set('a', [tps(1)])
    expect(later).toEqual([1])
    expect(table.get('a')).not.toBe(null)
    expect(warn).toHaveBeenCalledWith(
      'A limit table change listener threw (entry "a", version 1): Error: listener bug',
      { code: 'SLUICE_TABLE_LISTENER' },
    )
  })

  describe('checks everything before anything is written', () => {
    const cases: [string, unknown, unknown, string][] = [
      ['a spec its factory rejects', 'a', [tps(0)], ErrorCode.INVALID_OPTION],
      [
        'an unknown field',
        'a',
        [{ kind: 'slidingLog', limit: 1, windowMs: 1, burst: 2 }],
        ErrorCode.INVALID_OPTION,
      ],
      ['an unknown kind', 'a', [{ kind: 'gcra', limit: 1 }], ErrorCode.INVALID_SPEC],
      ['a value that is no list', 'a', tps(1), ErrorCode.INVALID_SPEC],
      ['undefined', 'a', undefined, ErrorCode.INVALID_SPEC],
      [
        'a bad spec after good ones',
        'a',
        [tps(1), { kind: 'fixedWindow', limit: 1, windowMs: 10 }, null],
        ErrorCode.INVALID_SPEC,
      ],
      ['two rules sharing an identity', 'a', [tps(1), tps(2)], ErrorCode.DUPLICATE_RULE],
      [
        'too many rules',
        'a',
        Array.from({ length: 17 }, (_, i) => ({ ...tps(1), name: `r${i}` })),
        ErrorCode.TABLE_TOO_LARGE,
      ],
      ['an empty entry name', '', [tps(1)], ErrorCode.INVALID_ENTRY],
      ['an entry name of 257 characters', 'x'.repeat(257), [tps(1)], ErrorCode.INVALID_ENTRY],
      ['a control character', 'PAY\nMENT', [tps(1)], ErrorCode.INVALID_ENTRY],
      ['a NUL', 'a\u0000', [tps(1)], ErrorCode.INVALID_ENTRY],
      ['a bidi override', 'PAY\u202eTNEM', [tps(1)], ErrorCode.INVALID_ENTRY],
      ['a lone surrogate', 'a\ud800', [tps(1)], ErrorCode.INVALID_ENTRY],
      ['a number as entry', 5, [tps(1)], ErrorCode.INVALID_ENTRY],
    ]
    it.each(cases)('%s', async (_, entry, value, code) => {
      const table = createLimitTable({ a: [tps(3)] })
      const heard: string[] = []
      table.onChange((e) => heard.push(e))
      const error = await rejection(table.set(entry as string, value as never))
      expect(error).toBeInstanceOf(SluiceError)
      expect(error).toMatchObject({ code })
      expect(table.version).toBe(0)
      expect(heard).toEqual([])
      expect(JSON.stringify([...table.entries()])).toBe(
        '[["a",[{"kind":"slidingLog","limit":3,"windowMs":1000}]]]',
      )
    })

    it('names the rules that share an identity', async () => {
      const error = await rejection(createLimitTable().set('PAYMENT:ALIPAY', [tps(1), tps(2)]))
      expect(error).toBeInstanceOf(DuplicateRuleError)
      expect((error as Error).message).toBe(
        'Rules "1-per-1s" and "2-per-1s" of limit table entry "PAYMENT:ALIPAY" would share their state ' +
          '(slidingLog:1000): give them different names.',
      )
    })

    it('accepts 256 characters of any script, and "*"', async () => {
      const table = createLimitTable()
      await table.set('ключ:支付:🔑'.padEnd(256, 'x'), [tps(1)])
      await table.set('*', null)
      await table.set('POST /pay:{x}:%s "quoted"', [tps(1)])
      expect(table.version).toBe(3)
    })

    it(`holds at most ${TABLE_BOUNDS.entries} entries`, async () => {
      const initial = Object.fromEntries(
        Array.from({ length: TABLE_BOUNDS.entries }, (_, i) => [`e${i}`, null]),
      )
      const table = createLimitTable(initial)
      expect(await rejection(table.set('one-more', null))).toMatchObject({ code: ErrorCode.TABLE_TOO_LARGE })
      await table.set('e1', [tps(2)]) // an existing entry may change
      expect(table.version).toBe(1)
      expect(catchError(() => createLimitTable({ ...initial, extra: null }))).toMatchObject({
        code: ErrorCode.TABLE_TOO_LARGE,
      })
    })
  })

  it('checks its initial entries at once', () => {
    expect(catchError(() => createLimitTable({ a: [tps(0)] }))).toBeInstanceOf(InvalidOptionError)
    expect(catchError(() => createLimitTable({ a: 5 as never }))).toBeInstanceOf(InvalidSpecError)
    expect(catchError(() => createLimitTable([] as never))).toMatchObject({ option: 'createLimitTable' })
  })

  it('refuses changes once closed, and keeps answering get', async () => {
    const table = createLimitTable({ a: [tps(1)] })
    await table.close()
    expect(await rejection(table.set('a', null))).toMatchObject({ code: ErrorCode.TABLE_CLOSED })
    expect(await rejection(table.delete('a'))).toMatchObject({ code: ErrorCode.TABLE_CLOSED })
    expect(table.get('a')).not.toBe(null)
  })

  it('drives a limiter per call, and an edit keeps the counts (state identity)', async () => {
    let now = 0
    const table = createLimitTable({ '*': [tps(4)] })
    const limiter = createLimiter({
      rules: (key) => table.get(key),
      store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
    })
    for (let i = 0; i < 3; i++) expect((await limiter.consume('PAYMENT:ALIPAY')).allowed).toBe(true)
    await table.set('PAYMENT:ALIPAY', [tps(2)])
    expect(await limiter.consume('PAYMENT:ALIPAY')).toMatchObject({
      allowed: false,
      rule: '2-per-1s',
      remaining: 0,
    })
    now = 999
    expect((await limiter.consume('PAYMENT:ALIPAY')).allowed).toBe(false)
    now = 1000
    expect(await limiter.consume('PAYMENT:ALIPAY')).toMatchObject({ allowed: true, remaining: 1 })
    await table.set('PAYMENT:ALIPAY', null)
    expect(await limiter.consume('PAYMENT:ALIPAY')).toMatchObject({ allowed: true, reason: 'unlimited' })
  })
})

describe('limit table object', () => {
  // The table is read on every call of a limiter whose rules come from it: `version` is defined on it, not
  // written as a literal getter, which would make the object slow to read (dictionary mode).
  it('keeps version as an enumerable, read-only property beside its methods', async () => {
    const table = createLimitTable({ '*': ['fixedWindow:10/1s'] })
    expect(Object.keys(table).sort()).toStrictEqual(
      ['close', 'delete', 'entries', 'get', 'onChange', 'set', 'version'].sort(),
    )
    expect(table.version).toBe(0)
    await table.set('a', ['fixedWindow:5/1s'])
    expect(table.version).toBe(1)
    expect(() => {
      ;(table as { version: number }).version = 7
    }).toThrow(TypeError)
    expect(table.version).toBe(1)
  })
})
