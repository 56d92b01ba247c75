/**
 * @module What each entry point of @sluice/core offers at run time. Growing a surface is a decision: it
 * changes this list.
 */
import * as core from '@sluice/core'
import { fixedWindow, type Rule } from '@sluice/core'
import * as http from '@sluice/core/http'
import * as store from '@sluice/core/store'
import { describe, expect, it, vi } from 'vitest'

/**
 * What adapters import from @sluice/core/http, and what a server answering a limiter's decisions itself writes
 * its headers and 429 body with (rateLimitHeaders, resolveHeaderOptions, limitedBody, JSON_TYPE, PROBLEM_JSON).
 */
const HTTP_KIT = [
  'JSON_TYPE',
  'LIMITER_OPTION_NAMES',
  'PROBLEM_JSON',
  'REQUEST_OPTION_NAMES',
  'RequestRecord',
  'booleanOption',
  'buildRequestLimit',
  'functionOption',
  'headerValues',
  'isPromise',
  'labelledPrefix',
  'limitedBody',
  'limitedDetail',
  'mergeHttpOptions',
  'parseHttpOptions',
  'rateLimitHeaders',
  'resolveHeaderOptions',
  'respondOnNode',
]

/** Offered until this release, used by no adapter: kept one release, each warning once (http/deprecated.ts). */
const HTTP_DEPRECATED = [
  'DEFAULT_HEADER_DRAFT',
  'HEADER_DRAFTS',
  'HTTP_OPTION_NAMES',
  'NO_HEADERS',
  'compileKey',
  'describeValue',
  'holdResponse',
  'retryAfterSeconds',
  'stackedHeaders',
  'whenResponseEnds',
]

/**
 * What stores and limit tables kept elsewhere import from @sluice/core/store (ruleDecision and booleanOption for
 * stores other than @sluice/redis, which decodes its decisions itself and has no on/off option).
 */
const STORE_KIT = [
  'MAX_TIMER_MS',
  'TABLE_BOUNDS',
  'TableState',
  'blockedAnswer',
  'booleanOption',
  'checkEntryName',
  'functionOption',
  'given',
  'integerOption',
  'labelOption',
  'newLease',
  'parseEntry',
  'parseEntryJson',
  'prefixOption',
  'readOptions',
  'refundMark',
  'ruleDecision',
  'tooManyEntries',
]

/** Offered until this release, used by no store: kept one release, each warning once (store/deprecated.ts). */
const STORE_DEPRECATED = [
  'MAX_BLOCK_HISTORY',
  'RULE_KINDS',
  'algorithmOf',
  'blockLength',
  'durationLabel',
  'isValidPrefix',
  'oneOfOption',
  'positiveOption',
  'storeOption',
]

describe('entry points', () => {
  it('@sluice/core offers what a user of the library writes, and nothing else', () => {
    expect(Object.keys(core).sort()).toEqual([
      'DuplicateRuleError',
      'ErrorCode',
      'InvalidCostError',
      'InvalidOptionError',
      'InvalidSpecError',
      'MemoryStore',
      'RateLimitedError',
      'SluiceError',
      'StoreError',
      'concurrency',
      'createLimitTable',
      'createLimiter',
      'fixedWindow',
      'formatRuleSpec',
      'ipKey',
      'leakyBucket',
      'overload',
      'parseRuleSpec',
      'parseRuleSpecs',
      'ruleFromSpec',
      'slidingLog',
      'slidingWindow',
      'tokenBucket',
      'warmUp',
    ])
  })

  it('@sluice/core/http offers the HTTP kit for adapter authors, and the names it deprecated', () => {
    expect(Object.keys(http).sort()).toEqual([...HTTP_KIT, ...HTTP_DEPRECATED].sort())
  })

  it('@sluice/core/store offers the store contract helpers and the option validators, and the names it deprecated', () => {
    expect(Object.keys(store).sort()).toEqual([...STORE_KIT, ...STORE_DEPRECATED].sort())
  })

  it('each deprecated name still works and warns once, with its code, when first used', () => {
    const warnings: { message: string; code: string | undefined; type: string | undefined }[] = []
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(((message: string, options: unknown) => {
      const o = options as { code?: string; type?: string } | undefined
      warnings.push({ message, code: o?.code, type: o?.type })
    }) as typeof process.emitWarning)
    try {
      // Functions warn when called, lists and objects when read; a plain constant cannot warn.
      expect(http.describeValue('x')).toBe('"x"')
      expect(http.describeValue('y')).toBe('"y"')
      expect(
        http.retryAfterSeconds({ retryAfterMs: 1500 } as Parameters<typeof http.retryAfterSeconds>[0]),
      ).toBe(2)
      expect(http.HEADER_DRAFTS.length).toBeGreaterThan(0)
      expect(http.HEADER_DRAFTS.includes(http.DEFAULT_HEADER_DRAFT)).toBe(true)
      expect(store.algorithmOf(fixedWindow({ limit: 1, windowMs: 1000 }) as Rule)).toBeTypeOf('object')
      expect(store.RULE_KINDS.fixedWindow).toBeTypeOf('object')
      expect(store.MAX_BLOCK_HISTORY).toBe(63)
      expect(store.isValidPrefix('ok')).toBe(true)
    } finally {
      emit.mockRestore()
    }
    expect(warnings.map((w) => [w.message.split(' is deprecated')[0], w.code, w.type])).toEqual([
      ['describeValue (@sluice/core/http)', 'SLUICE_DEP_HTTP_KIT', 'DeprecationWarning'],
      ['retryAfterSeconds (@sluice/core/http)', 'SLUICE_DEP_HTTP_KIT', 'DeprecationWarning'],
      ['HEADER_DRAFTS (@sluice/core/http)', 'SLUICE_DEP_HTTP_KIT', 'DeprecationWarning'],
      ['algorithmOf (@sluice/core/store)', 'SLUICE_DEP_STORE_KIT', 'DeprecationWarning'],
      ['RULE_KINDS (@sluice/core/store)', 'SLUICE_DEP_STORE_KIT', 'DeprecationWarning'],
      ['isValidPrefix (@sluice/core/store)', 'SLUICE_DEP_STORE_KIT', 'DeprecationWarning'],
    ])
  })

  it('the built entries share one copy of each class (an error from /http is an InvalidOptionError of the main entry)', async () => {
    const builtCore = await import(new URL('../dist/index.js', import.meta.url).href)
    const builtHttp = await import(new URL('../dist/http.js', import.meta.url).href)
    let thrown: unknown
    try {
      builtHttp.parseHttpOptions('rateLimit', { cost: 0 })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(builtCore.InvalidOptionError)
  })
})
