import {
  createLimiter,
  type Decision,
  fixedWindow,
  type HeaderOptions,
  InvalidOptionError,
  MemoryStore,
  type RuleDecision,
  slidingLog,
} from '@sluice/core'
import { rateLimitHeaders, resolveHeaderOptions } from '@sluice/core/http'
import { describe, expect, it } from 'vitest'
import { duration, stackedHeaders } from '../src/http/headers.ts'
import { UNLIMITED_DECISION } from '../src/limiter/limiter.ts'

const perSecond: RuleDecision = {
  rule: '10-per-1s',
  allowed: true,
  limit: 10,
  remaining: 4,
  resetMs: 400,
  retryAfterMs: 0,
  waitMs: 0,
  windowSeconds: 1,
}
const perMinute: RuleDecision = {
  rule: '100-per-60s',
  allowed: true,
  limit: 100,
  remaining: 99,
  resetMs: 59_001,
  retryAfterMs: 0,
  waitMs: 0,
  windowSeconds: 60,
}
const perMinuteDenied: RuleDecision = {
  ...perMinute,
  allowed: false,
  remaining: 0,
  resetMs: 42_500,
  retryAfterMs: 2_001,
}

/** A decision as the limiter composes it: `deciding` gives the single figures. */
function decision(rules: RuleDecision[], deciding: RuleDecision): Decision {
  const allowed = rules.every((r) => r.allowed)
  return {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: allowed ? 0 : deciding.retryAfterMs,
    waitMs: 0,
    rule: deciding.rule,
    rules,
    reason: 'rules',
  }
}

const one = decision([perMinute], perMinute)
const oneDenied = decision([perMinuteDenied], perMinuteDenied)
const two = decision([perSecond, perMinute], perSecond)
const twoDenied = decision([perSecond, perMinuteDenied], perMinuteDenied)
const storeDenied: Decision = {
  ...UNLIMITED_DECISION,
  allowed: false,
  limit: 0,
  remaining: 0,
  resetMs: 1000,
  retryAfterMs: 1000,
  rule: '',
  reason: 'store-error',
}

const headers = (d: Decision, option?: HeaderOptions | boolean | 'openai') =>
  rateLimitHeaders(d, resolveHeaderOptions(option))

describe('current draft (default)', () => {
  it('lists one policy and one service limit per rule, seconds rounded up', () => {
    expect(headers(one)).toStrictEqual({
      'RateLimit-Policy': '"100-per-60s";q=100;w=60',
      RateLimit: '"100-per-60s";r=99;t=60',
    })
    expect(headers(two)).toStrictEqual({
      'RateLimit-Policy': '"10-per-1s";q=10;w=1, "100-per-60s";q=100;w=60',
      RateLimit: '"10-per-1s";r=4;t=1, "100-per-60s";r=99;t=60',
    })
  })

  it('adds Retry-After in whole seconds, rounded up, when denied', () => {
    expect(headers(oneDenied)).toStrictEqual({
      'RateLimit-Policy': '"100-per-60s";q=100;w=60',
      RateLimit: '"100-per-60s";r=0;t=43',
      'Retry-After': '3',
    })
    expect(headers(twoDenied)).toStrictEqual({
      'RateLimit-Policy': '"10-per-1s";q=10;w=1, "100-per-60s";q=100;w=60',
      RateLimit: '"10-per-1s";r=4;t=1, "100-per-60s";r=0;t=43',
      'Retry-After': '3',
    })
  })

  it('is what true, undefined, {} and every name of the same wire format give', () => {
    const expected = headers(twoDenied, { standard: 'draft-11' })
    for (const option of [
      undefined,
      true,
      {},
      { standard: true },
      { standard: undefined, legacy: undefined, retryAfter: undefined },
      { standard: 'draft-10' },
      { standard: 'draft-9' },
      { standard: 'draft-8' },
    ] as const) {
      expect(headers(twoDenied, option)).toStrictEqual(expected)
    }
    expect(resolveHeaderOptions(undefined)).toMatchObject({
      standard: 'draft-11',
      legacy: false,
      retryAfter: true,
      enabled: true,
    })
  })
})

describe('older drafts', () => {
  it('draft-7: one RateLimit dictionary for the deciding rule, a policy list for all', () => {
    expect(headers(one, { standard: 'draft-7' })).toStrictEqual({
      'RateLimit-Policy': '100;w=60',
      RateLimit: 'limit=100, remaining=99, reset=60',
    })
    expect(headers(two, { standard: 'draft-7' })).toStrictEqual({
      'RateLimit-Policy': '10;w=1, 100;w=60',
      RateLimit: 'limit=10, remaining=4, reset=1',
    })
    expect(headers(twoDenied, { standard: 'draft-7' })).toStrictEqual({
      'RateLimit-Policy': '10;w=1, 100;w=60',
      RateLimit: 'limit=100, remaining=0, reset=43',
      'Retry-After': '3',
    })
  })

  it('draft-6: separate Limit, Remaining and Reset fields', () => {
    expect(headers(one, { standard: 'draft-6' })).toStrictEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '99',
      'RateLimit-Reset': '60',
    })
    expect(headers(two, { standard: 'draft-6' })).toStrictEqual({
      'RateLimit-Policy': '10;w=1, 100;w=60',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '4',
      'RateLimit-Reset': '1',
    })
    expect(headers(twoDenied, { standard: 'draft-6' })).toStrictEqual({
      'RateLimit-Policy': '10;w=1, 100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '43',
      'Retry-After': '3',
    })
  })
})

describe('legacy and Retry-After switches', () => {
  it('legacy X-RateLimit-* gives the deciding rule, reset in seconds from now', () => {
    expect(headers(two, { standard: false, legacy: true })).toStrictEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '4',
      'X-RateLimit-Reset': '1',
    })
    expect(headers(oneDenied, { legacy: true })).toStrictEqual({
      'RateLimit-Policy': '"100-per-60s";q=100;w=60',
      RateLimit: '"100-per-60s";r=0;t=43',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '43',
      'Retry-After': '3',
    })
  })

  it('leaves Retry-After out when asked, and sends it alone when nothing else is on', () => {
    expect(headers(oneDenied, { retryAfter: false })).toStrictEqual({
      'RateLimit-Policy': '"100-per-60s";q=100;w=60',
      RateLimit: '"100-per-60s";r=0;t=43',
    })
    expect(headers(oneDenied, { standard: false })).toStrictEqual({ 'Retry-After': '3' })
    expect(headers(one, { standard: false })).toStrictEqual({})
    expect(resolveHeaderOptions({ standard: false })).toMatchObject({ enabled: true })
    expect(resolveHeaderOptions({ standard: false, retryAfter: false })).toMatchObject({ enabled: false })
  })

  it('false turns every header off, Retry-After too', () => {
    const none = resolveHeaderOptions(false)
    expect(none).toMatchObject({ standard: false, legacy: false, retryAfter: false, enabled: false })
    expect(rateLimitHeaders(twoDenied, none)).toStrictEqual({})
  })
})

describe('decisions no rule limits', () => {
  it('an unlimited key gets no headers', () => {
    for (const option of [
      undefined,
      { standard: 'draft-7', legacy: true },
      { standard: 'draft-6' },
    ] as const) {
      expect(headers(UNLIMITED_DECISION, option)).toStrictEqual({})
    }
  })

  it('a denial by store policy gets Retry-After only', () => {
    for (const option of [
      undefined,
      { standard: 'draft-7', legacy: true },
      { standard: 'draft-6' },
    ] as const) {
      expect(headers(storeDenied, option)).toStrictEqual({ 'Retry-After': '1' })
    }
  })

  it('never writes Infinity or NaN', () => {
    const odd: Decision = { ...UNLIMITED_DECISION, allowed: false, retryAfterMs: Number.NaN }
    for (const standard of ['draft-11', 'draft-7', 'draft-6', false] as const) {
      for (const d of [UNLIMITED_DECISION, storeDenied, odd]) {
        const values = Object.values(headers(d, { standard, legacy: true }))
        expect(values.join(' ')).not.toMatch(/Infinity|NaN|undefined/)
      }
    }
  })
})

describe('rounding', () => {
  const at = (resetMs: number, retryAfterMs: number): Decision => {
    const rule = { ...perMinuteDenied, resetMs, retryAfterMs }
    return decision([rule], rule)
  }

  it.each([
    [0, '0'],
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [59_999, '60'],
  ])('reset of %i ms is %s s', (resetMs, seconds) => {
    const h = headers(at(resetMs, 1), { legacy: true, standard: 'draft-6' })
    expect(h['RateLimit-Reset']).toBe(seconds)
    expect(h['X-RateLimit-Reset']).toBe(seconds)
  })

  it.each([
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [2001, '3'],
    [3_600_000, '3600'],
  ])('Retry-After for %i ms is %s s', (retryAfterMs, seconds) => {
    expect(headers(at(1000, retryAfterMs))['Retry-After']).toBe(seconds)
  })

  it('a denial always asks for at least 1 s', () => {
    expect(headers(at(1000, 0))['Retry-After']).toBe('1')
  })
})

describe('resolveHeaderOptions validation', () => {
  function optionOf(option: unknown): string {
    try {
      resolveHeaderOptions(option as HeaderOptions)
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidOptionError)
      expect((error as InvalidOptionError).code).toBe('ERR_SLUICE_INVALID_OPTION')
      expect((error as InvalidOptionError).value).toBe(
        option !== null && typeof option === 'object' && !Array.isArray(option)
          ? Object.values(option)[0]
          : option,
      )
      return (error as InvalidOptionError).option
    }
    throw new Error('expected an InvalidOptionError')
  }

  it.each([['yes'], [1], [null], [[]], ['draft-8']])('rejects headers %j', (option) => {
    expect(optionOf(option)).toBe('headers')
  })

  it.each([['draft-5'], ['draft-12'], ['DRAFT-8'], [8], [null], ['']])('rejects standard %j', (standard) => {
    expect(optionOf({ standard })).toBe('headers.standard')
  })

  it.each([['yes'], [1], [null]])('rejects legacy and retryAfter %j', (value) => {
    expect(optionOf({ legacy: value })).toBe('headers.legacy')
    expect(optionOf({ retryAfter: value })).toBe('headers.retryAfter')
  })

  it('rejects an unknown option, naming it', () => {
    expect(optionOf({ standardHeaders: 'draft-7' })).toBe('headers.standardHeaders')
  })

  it('names the choices in the message', () => {
    expect(() => resolveHeaderOptions({ standard: 'draft-5' as 'draft-6' })).toThrow(
      "Invalid option headers.standard: \"draft-5\"; expected true, false or one of 'draft-11', 'draft-10', 'draft-9', 'draft-8', 'draft-7', 'draft-6'.",
    )
  })
})

describe('with a real limiter', () => {
  it('writes what the limiter decides', async () => {
    const now = 500
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 2, windowMs: 1000 }), slidingLog({ limit: 5, windowMs: 60_000 })],
      store: new MemoryStore({ clock: () => now }),
    })
    const options = resolveHeaderOptions({ legacy: true })
    expect(rateLimitHeaders(await limiter.consume('k'), options)).toStrictEqual({
      'RateLimit-Policy': '"2-per-1s";q=2;w=1, "5-per-60s";q=5;w=60',
      RateLimit: '"2-per-1s";r=1;t=1, "5-per-60s";r=4;t=60',
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '1',
      'X-RateLimit-Reset': '1',
    })
  })

  it('writes a real denial', async () => {
    let now = 500
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 10_000, name: 'burst' })],
      store: new MemoryStore({ clock: () => now }),
    })
    await limiter.consume('k')
    now = 1_700
    expect(
      rateLimitHeaders(await limiter.consume('k'), resolveHeaderOptions({ legacy: true })),
    ).toStrictEqual({
      'RateLimit-Policy': '"burst";q=1;w=10',
      RateLimit: '"burst";r=0;t=9',
      'X-RateLimit-Limit': '1',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '9',
      'Retry-After': '9',
    })
  })

  it('returns a new map each time', () => {
    const options = resolveHeaderOptions(undefined)
    const first = rateLimitHeaders(one, options)
    first['X-Extra'] = 'yes'
    expect(rateLimitHeaders(one, options)).not.toHaveProperty('X-Extra')
  })
})

describe('stackedHeaders: several limits on one response, rendered from their decisions', () => {
  const as = (d: Decision, option?: HeaderOptions | boolean) => ({
    decision: d,
    headers: resolveHeaderOptions(option),
  })

  it("joins the structured lists, earlier items first; Retry-After is the later (denying) limit's", () => {
    expect(stackedHeaders([as(decision([perSecond], perSecond)), as(oneDenied)])).toEqual({
      'RateLimit-Policy': '"10-per-1s";q=10;w=1, "100-per-60s";q=100;w=60',
      RateLimit: '"10-per-1s";r=4;t=1, "100-per-60s";r=0;t=43',
      'Retry-After': '3',
    })
  })

  it("joins draft-6/7 policy lists, but a draft-7 RateLimit dictionary is one rule's: the later one", () => {
    const d7 = { standard: 'draft-7' } as const
    expect(stackedHeaders([as(decision([perSecond], perSecond), d7), as(one, d7)])).toEqual({
      'RateLimit-Policy': '10;w=1, 100;w=60',
      RateLimit: 'limit=100, remaining=99, reset=60',
    })
  })

  it("takes the later value across drafts and for one rule's figures; keeps fields only the earlier sent", () => {
    const earlier = as(decision([perSecond], perSecond), { standard: 'draft-6', legacy: true })
    expect(stackedHeaders([earlier, as(one, { legacy: true })])).toEqual({
      'RateLimit-Policy': '"100-per-60s";q=100;w=60',
      RateLimit: '"100-per-60s";r=99;t=60',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '4',
      'RateLimit-Reset': '1',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '99',
      'X-RateLimit-Reset': '60',
    })
    // A draft-7 dictionary after named items replaces them, and named items after it replace it.
    expect(stackedHeaders([as(one), as(one, { standard: 'draft-7' })]).RateLimit).toBe(
      'limit=100, remaining=99, reset=60',
    )
    expect(stackedHeaders([as(one, { standard: 'draft-7' }), as(one)]).RateLimit).toBe(
      '"100-per-60s";r=99;t=60',
    )
  })

  it('a limit with headers off adds nothing, and one limit renders as it would alone', () => {
    expect(stackedHeaders([as(one, false), as(oneDenied)])).toEqual(headers(oneDenied))
    expect(stackedHeaders([as(two)])).toEqual(headers(two))
  })
})

describe("OpenAI's fields (headers: 'openai', or openai: true beside the IETF fields)", () => {
  const requests: RuleDecision = {
    rule: 'requests',
    allowed: true,
    limit: 60,
    remaining: 59,
    resetMs: 1000,
    retryAfterMs: 0,
    waitMs: 0,
    windowSeconds: 60,
  }
  const tokens: RuleDecision = {
    rule: 'tokens',
    allowed: true,
    limit: 90_000,
    remaining: 88_800,
    resetMs: 360_000,
    retryAfterMs: 0,
    waitMs: 0,
    windowSeconds: 600,
  }
  const both = decision([requests, tokens], requests)

  it("'openai' writes the requests and tokens fields and no IETF field", () => {
    expect(headers(both, 'openai')).toStrictEqual({
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '59',
      'x-ratelimit-reset-requests': '1s',
      'x-ratelimit-limit-tokens': '90000',
      'x-ratelimit-remaining-tokens': '88800',
      'x-ratelimit-reset-tokens': '6m0s',
    })
  })

  it("a denial under 'openai' carries Retry-After; rules of other names get no field", () => {
    const denied = decision(
      [perSecond, { ...tokens, allowed: false, remaining: 0, resetMs: 3_723_000, retryAfterMs: 120 }],
      { ...tokens, allowed: false, remaining: 0, resetMs: 3_723_000, retryAfterMs: 120 },
    )
    expect(headers(denied, 'openai')).toStrictEqual({
      'x-ratelimit-limit-tokens': '90000',
      'x-ratelimit-remaining-tokens': '0',
      'x-ratelimit-reset-tokens': '1h2m3s',
      'Retry-After': '1',
    })
    expect(headers(two, 'openai')).toStrictEqual({})
  })

  it('openai: true sends them beside the standard fields, in the draft asked', () => {
    expect(headers(both, { standard: 'draft-8', openai: true })).toStrictEqual({
      'RateLimit-Policy': '"requests";q=60;w=60, "tokens";q=90000;w=600',
      RateLimit: '"requests";r=59;t=1, "tokens";r=88800;t=360',
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '59',
      'x-ratelimit-reset-requests': '1s',
      'x-ratelimit-limit-tokens': '90000',
      'x-ratelimit-remaining-tokens': '88800',
      'x-ratelimit-reset-tokens': '6m0s',
    })
    expect(headers(both, { openai: false })).not.toHaveProperty('x-ratelimit-limit-requests')
  })

  it.each([
    [0, '0s'],
    [-5, '0s'],
    [Number.NaN, '0s'],
    [0.2, '1ms'],
    [120, '120ms'],
    [999.5, '1s'],
    [1000, '1s'],
    [1500, '1.5s'],
    [1001, '1.001s'],
    [59_990, '59.99s'],
    [60_000, '1m0s'],
    [360_000, '6m0s'],
    [61_250, '1m1.25s'],
    [3_600_000, '1h0m0s'],
    [3_723_000, '1h2m3s'],
    [90_000_000, '25h0m0s'],
  ])('a reset of %j ms reads %j', (ms, text) => {
    expect(duration(ms)).toBe(text)
  })

  it('a decision no rule limits gets only Retry-After when denied', () => {
    expect(headers(storeDenied, 'openai')).toStrictEqual({ 'Retry-After': '1' })
  })

  it('rejects a bad openai flag and names the choices for a bad headers value', () => {
    expect(() => resolveHeaderOptions({ openai: 'yes' as unknown as boolean })).toThrow(
      'Invalid option headers.openai: "yes"; expected true or false.',
    )
    expect(() => resolveHeaderOptions('OpenAI' as never)).toThrow(
      `Invalid option headers: "OpenAI"; expected true, false, 'openai' or an object of header options.`,
    )
  })
})
