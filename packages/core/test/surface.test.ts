/**
 * @module What each entry point of @sluice/core offers at run time. Growing a surface is a decision: it
 * changes this list.
 */

import { createRequire } from 'node:module'
import * as core from '@sluice/core'
import * as http from '@sluice/core/http'
import * as options from '@sluice/core/options'
import * as store from '@sluice/core/store'
import { describe, expect, it } from 'vitest'

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
  'buildRequestLimit',
  'headerValues',
  'labelledPrefix',
  'limitedBody',
  'limitedDetail',
  'mergeHttpOptions',
  'parseHttpOptions',
  'rateLimitHeaders',
  'resolveHeaderOptions',
  'respondOnNode',
]

/**
 * What stores and limit tables kept elsewhere import from @sluice/core/store (ruleDecision for stores other
 * than @sluice/redis, which decodes its decisions itself).
 */
const STORE_KIT = [
  'TABLE_BOUNDS',
  'TableState',
  'blockedAnswer',
  'certainRetry',
  'checkEntryName',
  'newLease',
  'parseEntry',
  'parseEntryJson',
  'refundMark',
  'ruleDecision',
  'tooManyEntries',
]

/** The option checks every sluice package imports from @sluice/core/options. */
const OPTION_CHECKS = [
  'MAX_TIMER_MS',
  'booleanOption',
  'durationLabel',
  'functionOption',
  'given',
  'integerOption',
  'isPromise',
  'isValidPrefix',
  'labelOption',
  'limitOption',
  'positiveOption',
  'prefixOption',
  'readOptions',
  'ruleOptions',
  'storeOption',
  'stringOption',
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
      'quota',
      'quotaPeriod',
      'ruleFromSpec',
      'slidingLog',
      'slidingWindow',
      'tokenBucket',
      'warmUp',
    ])
  })

  it('@sluice/core/http offers the HTTP kit for adapter authors, and nothing else', () => {
    expect(Object.keys(http).sort()).toEqual(HTTP_KIT)
  })

  it('@sluice/core/store offers the store contract helpers and the limit table pieces, and nothing else', () => {
    expect(Object.keys(store).sort()).toEqual(STORE_KIT)
  })

  it('@sluice/core/options offers the option checks, and nothing else', () => {
    expect(Object.keys(options).sort()).toEqual(OPTION_CHECKS)
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

  it("a quota rule built by the CommonJS build is a rule to the ESM build's limiter (another copy of core)", async () => {
    const esm = await import(new URL('../dist/index.js', import.meta.url).href)
    const cjs = createRequire(import.meta.url)('../dist/index.cjs')
    const rule = cjs.quota({ limit: 2, per: 'day', timeZone: 'Europe/Berlin' })
    const limiter = esm.createLimiter({
      rules: [rule],
      store: new esm.MemoryStore({ clock: () => 1_800_000_000_000 }),
    })
    const said = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
    expect(said.map((d: { allowed: boolean }) => d.allowed)).toEqual([true, true, false])
    expect(esm.quotaPeriod(rule, 1_800_000_000_000)).toEqual(cjs.quotaPeriod(rule, 1_800_000_000_000))
  })
})
