/**
 * @module What each entry point of @sluice/core offers at run time. Growing a surface is a decision: it
 * changes this list.
 */
import * as core from '@sluice/core'
import * as http from '@sluice/core/http'
import * as store from '@sluice/core/store'
import { describe, expect, it } from 'vitest'

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

  it('@sluice/core/http offers the HTTP kit for adapter authors', () => {
    expect(Object.keys(http).sort()).toEqual([
      'DEFAULT_HEADER_DRAFT',
      'HEADER_DRAFTS',
      'HTTP_OPTION_NAMES',
      'JSON_TYPE',
      'LIMITER_OPTION_NAMES',
      'NO_HEADERS',
      'PROBLEM_JSON',
      'REQUEST_OPTION_NAMES',
      'RequestRecord',
      'booleanOption',
      'buildRequestLimit',
      'compileKey',
      'describeValue',
      'functionOption',
      'headerValues',
      'holdResponse',
      'isPromise',
      'labelledPrefix',
      'limitedBody',
      'limitedDetail',
      'mergeHttpOptions',
      'parseHttpOptions',
      'rateLimitHeaders',
      'resolveHeaderOptions',
      'retryAfterSeconds',
      'stackedHeaders',
      'whenResponseEnds',
    ])
  })

  it('@sluice/core/store offers the store contract helpers and the option validators', () => {
    expect(Object.keys(store).sort()).toEqual([
      'MAX_BLOCK_HISTORY',
      'MAX_TIMER_MS',
      'RULE_KINDS',
      'TABLE_BOUNDS',
      'TableState',
      'algorithmOf',
      'blockLength',
      'blockedAnswer',
      'booleanOption',
      'checkEntryName',
      'durationLabel',
      'functionOption',
      'given',
      'integerOption',
      'isValidPrefix',
      'labelOption',
      'newLease',
      'oneOfOption',
      'parseEntry',
      'parseEntryJson',
      'positiveOption',
      'prefixOption',
      'readOptions',
      'refundMark',
      'ruleDecision',
      'storeOption',
      'tooManyEntries',
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
