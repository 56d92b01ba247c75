/**
 * quota: calendar periods in IANA time zones (edges of each period, DST days, month ends, leap day, week
 * starts, zones off the hour), the counting within a period, its text, its options and its identity. The
 * clock is set by hand to the instants named; every figure is exact.
 */
import {
  createLimiter,
  createLimitTable,
  type Decision,
  formatRuleSpec,
  InvalidOptionError,
  InvalidSpecError,
  MemoryStore,
  parseRuleSpec,
  type QuotaOptions,
  type QuotaRule,
  quota,
  quotaPeriod,
  ruleFromSpec,
} from '@sluice/core'
import { rateLimitHeaders, resolveHeaderOptions } from '@sluice/core/http'
import { describe, expect, it } from 'vitest'
import { isFactoryRule } from '../src/rules/index.ts'
import { UNLIMITED } from '../src/rules/unlimited.ts'
import { catchError } from './support.ts'

const at = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()
const rule = (options: Omit<QuotaOptions, 'limit'> & { limit?: number }) =>
  quota({ limit: 3, ...options }) as QuotaRule

/** The period holding `when`, as ISO instants. */
function period(r: QuotaRule, when: string): [string, string] {
  const p = quotaPeriod(r, at(when))
  return [iso(p.start), iso(p.end)]
}

/** The period's length in hours. */
function hours(r: QuotaRule, when: string): number {
  const p = quotaPeriod(r, at(when))
  return (p.end - p.start) / 3_600_000
}

describe('quota periods', () => {
  it('starts each period at its first ms and ends it before the next one (UTC, every per)', () => {
    const cases: [QuotaOptions['per'], string, string][] = [
      ['hour', '2026-11-28T13:00:00.000Z', '2026-11-28T14:00:00.000Z'],
      ['day', '2026-11-28T00:00:00.000Z', '2026-11-29T00:00:00.000Z'],
      ['week', '2026-11-23T00:00:00.000Z', '2026-11-30T00:00:00.000Z'],
      ['month', '2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z'],
      ['year', '2026-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z'],
    ]
    for (const [per, start, end] of cases) {
      const r = rule({ per })
      expect(period(r, start), `${per} at its start`).toEqual([start, end])
      expect(period(r, iso(at(end) - 1)), `${per} 1 ms before its end`).toEqual([start, end])
      expect(period(r, end)[0], `${per} at its end`).toBe(end)
      expect(period(r, iso(at(start) - 1))[1], `${per} 1 ms before its start`).toBe(start)
    }
  })

  it('gives a DST day 23 or 25 hours in America/New_York and Europe/Berlin', () => {
    const ny = rule({ per: 'day', timeZone: 'America/New_York' })
    expect(period(ny, '2026-03-08T12:00:00Z')).toEqual([
      '2026-03-08T05:00:00.000Z',
      '2026-03-09T04:00:00.000Z',
    ])
    expect(hours(ny, '2026-03-08T12:00:00Z')).toBe(23)
    expect(period(ny, '2026-11-01T12:00:00Z')).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-02T05:00:00.000Z',
    ])
    expect(hours(ny, '2026-11-01T12:00:00Z')).toBe(25)
    // The day before and after: 24 hours, back to back.
    expect(period(ny, '2026-03-07T12:00:00Z')).toEqual([
      '2026-03-07T05:00:00.000Z',
      '2026-03-08T05:00:00.000Z',
    ])
    expect(period(ny, '2026-11-02T12:00:00Z')).toEqual([
      '2026-11-02T05:00:00.000Z',
      '2026-11-03T05:00:00.000Z',
    ])

    const berlin = rule({ per: 'day', timeZone: 'Europe/Berlin' })
    expect(period(berlin, '2026-03-29T12:00:00Z')).toEqual([
      '2026-03-28T23:00:00.000Z',
      '2026-03-29T22:00:00.000Z',
    ])
    expect(hours(berlin, '2026-03-29T12:00:00Z')).toBe(23)
    expect(period(berlin, '2026-10-25T12:00:00Z')).toEqual([
      '2026-10-24T22:00:00.000Z',
      '2026-10-25T23:00:00.000Z',
    ])
    expect(hours(berlin, '2026-10-25T12:00:00Z')).toBe(25)
  })

  it('makes the hour clocks skip no period and the hour they repeat one period of two hours', () => {
    const ny = rule({ per: 'hour', timeZone: 'America/New_York' })
    // 2026-03-08 02:00 EST is 03:00 EDT (07:00Z): local 01:00 runs to the jump, 03:00 follows.
    expect(period(ny, '2026-03-08T06:30:00Z')).toEqual([
      '2026-03-08T06:00:00.000Z',
      '2026-03-08T07:00:00.000Z',
    ])
    expect(period(ny, '2026-03-08T07:00:00Z')).toEqual([
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T08:00:00.000Z',
    ])
    const berlin = rule({ per: 'hour', timeZone: 'Europe/Berlin' })
    // 2026-10-25 03:00 CEST is 02:00 CET (01:00Z): local 02:00–03:00 is shown twice, one period of 2 hours.
    expect(period(berlin, '2026-10-25T00:30:00Z')).toEqual([
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T02:00:00.000Z',
    ])
    expect(period(berlin, '2026-10-25T01:30:00Z')).toEqual([
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T02:00:00.000Z',
    ])
  })

  it('starts a day whose midnight is skipped at the jump, and one whose midnight is shown twice at the first (clocks set back across it included)', () => {
    // America/Santiago 2026-09-06: 00:00 -04 is 01:00 -03 (04:00Z). The day starts at the jump: 23 hours.
    const santiago = rule({ per: 'day', timeZone: 'America/Santiago' })
    expect(period(santiago, '2026-09-06T12:00:00Z')).toEqual([
      '2026-09-06T04:00:00.000Z',
      '2026-09-07T03:00:00.000Z',
    ])
    // 2026-04-05 00:00 -03 is 23:00 -04 of the 4th: the 4th lasts 25 hours, its last hour shown twice.
    expect(period(santiago, '2026-04-05T03:30:00Z')).toEqual([
      '2026-04-04T03:00:00.000Z',
      '2026-04-05T04:00:00.000Z',
    ])
    // America/Havana 2026-11-01: 01:00 -04 is 00:00 -05: midnight is shown at 04:00Z and at 05:00Z; the day
    // starts at the first, and the second belongs to it.
    const havana = rule({ per: 'day', timeZone: 'America/Havana' })
    expect(period(havana, '2026-11-01T05:30:00Z')).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-02T05:00:00.000Z',
    ])
    expect(period(havana, '2026-10-31T12:00:00Z')).toEqual([
      '2026-10-31T04:00:00.000Z',
      '2026-11-01T04:00:00.000Z',
    ])
    // America/Goose_Bay 2010-11-07 fell back at 00:01 to 23:01 of the 6th (03:01Z): its day began at 03:00Z,
    // and the minutes after the change that read the 6th again belong to the 7th, which lasts 25 hours.
    const gooseBay = rule({ per: 'day', timeZone: 'America/Goose_Bay' })
    expect(period(gooseBay, '2010-11-07T02:59:59.999Z')).toEqual([
      '2010-11-06T03:00:00.000Z',
      '2010-11-07T03:00:00.000Z',
    ])
    expect(period(gooseBay, '2010-11-07T03:30:00Z')).toEqual([
      '2010-11-07T03:00:00.000Z',
      '2010-11-08T04:00:00.000Z',
    ])
    expect(period(gooseBay, '2010-11-07T04:00:00Z')).toEqual([
      '2010-11-07T03:00:00.000Z',
      '2010-11-08T04:00:00.000Z',
    ])
  })

  it('ends months at their last day: Jan 31, Feb 28, Apr 30, Dec 31 into the next year, and 2028-02-29', () => {
    const month = rule({ per: 'month' })
    expect(period(month, '2026-01-31T23:59:59.999Z')).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-02-01T00:00:00.000Z',
    ])
    expect(period(month, '2026-02-01T00:00:00.000Z')).toEqual([
      '2026-02-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
    ])
    expect(period(month, '2026-02-28T23:59:59.999Z')[1]).toBe('2026-03-01T00:00:00.000Z')
    expect(period(month, '2026-04-30T23:59:59.999Z')).toEqual([
      '2026-04-01T00:00:00.000Z',
      '2026-05-01T00:00:00.000Z',
    ])
    expect(period(month, '2026-12-31T23:59:59.999Z')).toEqual([
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ])
    expect(period(month, '2027-01-01T00:00:00.000Z')).toEqual([
      '2027-01-01T00:00:00.000Z',
      '2027-02-01T00:00:00.000Z',
    ])
    expect(period(month, '2028-02-29T12:00:00Z')).toEqual([
      '2028-02-01T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ])
    const day = rule({ per: 'day' })
    expect(period(day, '2028-02-29T12:00:00Z')).toEqual([
      '2028-02-29T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ])
    // A Berlin month across its DST change: March 2026 is 31 days less an hour.
    const berlin = rule({ per: 'month', timeZone: 'Europe/Berlin' })
    expect(period(berlin, '2026-03-15T00:00:00Z')).toEqual([
      '2026-02-28T23:00:00.000Z',
      '2026-03-31T22:00:00.000Z',
    ])
    expect(hours(berlin, '2026-03-15T00:00:00Z')).toBe(31 * 24 - 1)
  })

  it('starts weeks on weekStartsOn: Monday by default, Sunday with 7, any day 1 to 7', () => {
    // 2026-11-28 is a Saturday.
    expect(period(rule({ per: 'week' }), '2026-11-28T12:00:00Z')).toEqual([
      '2026-11-23T00:00:00.000Z',
      '2026-11-30T00:00:00.000Z',
    ])
    expect(period(rule({ per: 'week', weekStartsOn: 7 }), '2026-11-28T12:00:00Z')).toEqual([
      '2026-11-22T00:00:00.000Z',
      '2026-11-29T00:00:00.000Z',
    ])
    expect(period(rule({ per: 'week', weekStartsOn: 6 }), '2026-11-28T00:00:00Z')).toEqual([
      '2026-11-28T00:00:00.000Z',
      '2026-12-05T00:00:00.000Z',
    ])
    expect(period(rule({ per: 'week', weekStartsOn: 6 }), '2026-11-27T23:59:59.999Z')[0]).toBe(
      '2026-11-21T00:00:00.000Z',
    )
    // A New York week holding the fall-back day lasts 7 days and an hour; one across a month and a year.
    const ny = rule({ per: 'week', weekStartsOn: 7, timeZone: 'America/New_York' })
    expect(period(ny, '2026-11-03T00:00:00Z')).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-08T05:00:00.000Z',
    ])
    expect(period(rule({ per: 'week' }), '2027-01-01T00:00:00Z')).toEqual([
      '2026-12-28T00:00:00.000Z',
      '2027-01-04T00:00:00.000Z',
    ])
  })

  it('turns years at the zone’s midnight', () => {
    const utc = rule({ per: 'year' })
    expect(period(utc, '2026-12-31T23:59:59.999Z')[1]).toBe('2027-01-01T00:00:00.000Z')
    expect(period(utc, '2028-12-31T12:00:00Z')).toEqual([
      '2028-01-01T00:00:00.000Z',
      '2029-01-01T00:00:00.000Z',
    ])
    const berlin = rule({ per: 'year', timeZone: 'Europe/Berlin' })
    expect(period(berlin, '2026-12-31T23:30:00Z')).toEqual([
      '2026-12-31T23:00:00.000Z',
      '2027-12-31T23:00:00.000Z',
    ])
  })

  it('follows zones off the hour: Asia/Kolkata +5:30, Australia/Lord_Howe’s half-hour DST, Pacific/Chatham +12:45/+13:45', () => {
    const kolkata = rule({ per: 'day', timeZone: 'Asia/Kolkata' })
    expect(period(kolkata, '2026-11-28T12:00:00Z')).toEqual([
      '2026-11-27T18:30:00.000Z',
      '2026-11-28T18:30:00.000Z',
    ])
    expect(period(rule({ per: 'hour', timeZone: 'Asia/Kolkata' }), '2026-11-28T12:00:00Z')).toEqual([
      '2026-11-28T11:30:00.000Z',
      '2026-11-28T12:30:00.000Z',
    ])
    const lordHowe = rule({ per: 'hour', timeZone: 'Australia/Lord_Howe' })
    // 2026-04-05 02:00 +11 is 01:30 +10:30 (15:00Z): local 01:00–02:00 lasts an hour and a half.
    expect(period(lordHowe, '2026-04-04T15:10:00Z')).toEqual([
      '2026-04-04T14:00:00.000Z',
      '2026-04-04T15:30:00.000Z',
    ])
    // 2026-10-04 02:00 +10:30 is 02:30 +11 (15:30Z): local 02:00–03:00 lasts half an hour.
    expect(period(lordHowe, '2026-10-03T15:40:00Z')).toEqual([
      '2026-10-03T15:30:00.000Z',
      '2026-10-03T16:00:00.000Z',
    ])
    expect(hours(rule({ per: 'day', timeZone: 'Australia/Lord_Howe' }), '2026-10-04T00:00:00Z')).toBe(23.5)
    const chatham = rule({ per: 'day', timeZone: 'Pacific/Chatham' })
    expect(period(chatham, '2026-11-28T12:00:00Z')).toEqual([
      '2026-11-28T10:15:00.000Z',
      '2026-11-29T10:15:00.000Z',
    ])
    expect(period(rule({ per: 'year', timeZone: 'Pacific/Chatham' }), '2026-11-28T12:00:00Z')).toEqual([
      '2025-12-31T10:15:00.000Z',
      '2026-12-31T10:15:00.000Z',
    ])
  })

  it('answers the same period whatever order the instants come in (the cache moves back as well)', () => {
    const r = rule({ per: 'day', timeZone: 'Europe/Berlin' })
    const times = [
      '2026-10-25T12:00:00Z',
      '2026-03-29T12:00:00Z',
      '2026-10-25T22:59:59.999Z',
      '1970-01-01T00:00:00Z',
    ]
    const first = times.map((t) => period(r, t))
    expect(times.map((t) => period(r, t))).toEqual(first)
    expect(first[3]).toEqual(['1969-12-31T23:00:00.000Z', '1970-01-01T23:00:00.000Z'])
    // A second rule of the same calendar shares it; another zone does not disturb it.
    const other = rule({ per: 'day', timeZone: 'America/New_York', name: 'other' })
    expect(period(other, '2026-10-25T12:00:00Z')).toEqual([
      '2026-10-25T04:00:00.000Z',
      '2026-10-26T04:00:00.000Z',
    ])
    expect(period(rule({ per: 'day', timeZone: 'Europe/Berlin', limit: 9 }), '2026-10-25T12:00:00Z')).toEqual(
      first[0],
    )
  })

  it('refuses a rule quota did not build, or a time that is not a finite number, with coded errors', () => {
    const spec = JSON.parse(JSON.stringify(rule({ per: 'day' }))) as QuotaRule
    expect((catchError(() => quotaPeriod(spec, 0)) as InvalidSpecError).code).toBe('ERR_SLUICE_INVALID_SPEC')
    expect((catchError(() => quotaPeriod(null as never, 0)) as InvalidSpecError).code).toBe(
      'ERR_SLUICE_INVALID_SPEC',
    )
    for (const now of [Number.NaN, Number.POSITIVE_INFINITY, '0']) {
      const error = catchError(() => quotaPeriod(rule({ per: 'day' }), now as number)) as InvalidOptionError
      expect(error.option).toBe('quotaPeriod.now')
    }
  })
})

describe('quota counting', () => {
  /** A limiter over `rules` on a MemoryStore whose clock is set by hand (ISO instants). */
  function rig(rules: QuotaRule[], store?: MemoryStore) {
    const clock = { now: 0 }
    const s = store ?? new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
    const limiter = createLimiter({ rules, store: s })
    const call =
      (act: 'consume' | 'peek') =>
      (when: string, cost = 1): Promise<Decision> => {
        clock.now = at(when)
        return limiter[act]('k', { cost })
      }
    return { clock, limiter, store: s, consume: call('consume'), peek: call('peek') }
  }
  const figures = (d: Decision) => {
    const r = d.rules[0]!
    return [
      r.allowed,
      r.remaining,
      r.resetMs,
      r.retryAfterMs,
      r.used,
      r.resetsAt === undefined ? undefined : iso(r.resetsAt),
    ]
  }

  it('admits up to the limit within the period, denies until its end, and counts afresh in the next', async () => {
    // New York's 23-hour day: ends 2026-03-09T04:00Z.
    const { consume, peek } = await rig([rule({ per: 'day', timeZone: 'America/New_York' })])
    const end = '2026-03-09T04:00:00.000Z'
    expect(figures(await consume('2026-03-08T05:00:00Z'))).toEqual([true, 2, 23 * 3_600_000, 0, 0, end])
    expect(figures(await consume('2026-03-09T03:00:00Z', 2))).toEqual([true, 0, 3_600_000, 0, 1, end])
    expect(figures(await consume('2026-03-09T03:59:59.999Z'))).toEqual([false, 0, 1, 1, 3, end])
    expect(figures(await peek('2026-03-09T03:59:59.999Z'))).toEqual([false, 0, 1, 1, 3, end])
    expect(figures(await consume('2026-03-09T04:00:00Z'))).toEqual([
      true,
      2,
      24 * 3_600_000,
      0,
      0,
      '2026-03-10T04:00:00.000Z',
    ])
  })

  it('reports a fresh key’s period end on a peek, with nothing used and nothing to reset', async () => {
    const { peek } = await rig([rule({ per: 'month', limit: 1000 })])
    const d = await peek('2026-02-28T12:00:00Z')
    expect(figures(d)).toEqual([true, 999, 12 * 3_600_000, 0, 0, '2026-03-01T00:00:00.000Z'])
    expect(JSON.parse(JSON.stringify(d.rules[0]))).toEqual(d.rules[0])
  })

  it('refunds within the period only, and a call’s refund only while its period lasts', async () => {
    const { consume, peek, limiter, clock } = await rig([rule({ per: 'day', timeZone: 'Europe/Berlin' })])
    // Berlin's 25-hour day, 2026-10-25, ends at 23:00Z.
    const first = await consume('2026-10-25T22:00:00Z')
    await consume('2026-10-25T22:30:00Z', 2)
    clock.now = at('2026-10-25T22:59:59.999Z')
    await limiter.refund('k', { decision: first })
    expect(figures(await peek('2026-10-25T22:59:59.999Z'))[4]).toBe(2)
    // A new day: the last day's call gives nothing back, a refund without a call takes none below empty.
    const next = await consume('2026-10-25T23:00:00Z', 3)
    clock.now = at('2026-10-25T23:00:00Z')
    await limiter.refund('k', { decision: first })
    expect(figures(await peek('2026-10-25T23:00:00Z'))).toEqual([
      false,
      0,
      24 * 3_600_000,
      24 * 3_600_000,
      3,
      '2026-10-26T23:00:00.000Z',
    ])
    await limiter.refund('k', { decision: next, cost: 2 })
    expect(figures(await peek('2026-10-25T23:00:01Z'))[4]).toBe(1)
    await limiter.refund('k', { cost: 5 })
    expect(figures(await peek('2026-10-25T23:00:02Z'))[4]).toBe(0)
  })

  it('penalizes past the limit by at most the cost, and the next period forgets it', async () => {
    const { consume, limiter, clock } = await rig([rule({ per: 'hour', limit: 2 })])
    await consume('2026-11-28T13:10:00Z')
    clock.now = at('2026-11-28T13:20:00Z')
    const after = await limiter.penalize('k', { cost: 5 })
    expect(figures(after)).toEqual([false, 0, 40 * 60_000, 40 * 60_000, 6, '2026-11-28T14:00:00.000Z'])
    expect(figures(await consume('2026-11-28T14:00:00Z'))).toEqual([
      true,
      1,
      3_600_000,
      0,
      0,
      '2026-11-28T15:00:00.000Z',
    ])
  })

  it('keeps the count when the limit is edited (same identity) and starts apart for another zone or period', async () => {
    const clock = { now: at('2026-11-28T12:00:00Z') }
    const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
    let rules = [quota({ limit: 3, per: 'day' })]
    const limiter = createLimiter({ rules: () => rules, store })
    const used = async () => (await limiter.peek('k')).rules[0]!.used
    await limiter.consume('k', { cost: 3 })
    rules = [quota({ limit: 5, per: 'day' })]
    expect(await used()).toBe(3)
    rules = [quota({ limit: 2, per: 'day' })]
    const d = await limiter.peek('k')
    expect([d.allowed, d.remaining, d.rules[0]!.used]).toEqual([false, 0, 3])
    rules = [quota({ limit: 3, per: 'day', timeZone: 'Europe/Berlin' })]
    expect(await used()).toBe(0)
    rules = [quota({ limit: 3, per: 'month' })]
    expect(await used()).toBe(0)
  })

  it('sends the period’s nominal window in RateLimit-Policy and the exact wait to its end', async () => {
    const { consume } = await rig([rule({ per: 'day', limit: 1, timeZone: 'America/New_York' })])
    await consume('2026-03-09T03:00:00Z')
    const d = await consume('2026-03-09T03:59:30Z')
    expect(rateLimitHeaders(d, resolveHeaderOptions({ legacy: true }))).toStrictEqual({
      'RateLimit-Policy': '"1-per-day";q=1;w=86400',
      RateLimit: '"1-per-day";r=0;t=30',
      'Retry-After': '30',
      'X-RateLimit-Limit': '1',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '30',
    })
  })

  it('refuses a cost above the limit before the store is asked', async () => {
    const { consume } = await rig([rule({ per: 'day', limit: 2 })])
    const error = await consume('2026-11-28T12:00:00Z', 3).catch((e: unknown) => e)
    expect((error as { code: string }).code).toBe('ERR_SLUICE_INVALID_COST')
  })
})

describe('quota as a rule', () => {
  it('has its spec as its fields, its identity per zone and week start, and a default name', () => {
    const r = quota({ limit: 10_000, per: 'month', timeZone: 'Europe/Berlin' }) as QuotaRule
    expect(JSON.parse(JSON.stringify(r))).toEqual({
      kind: 'quota',
      limit: 10_000,
      per: 'month',
      timeZone: 'Europe/Berlin',
      weekStartsOn: 1,
    })
    expect(r.id).toBe('quota:month:Europe/Berlin:1')
    expect(r.name).toBe('10000-per-month')
    expect(r.policyWindowSeconds).toBe(2_592_000)
    expect((quota({ limit: 5, per: 'week', weekStartsOn: 7, name: 'api' }) as QuotaRule).id).toBe(
      'quota:week:UTC:7@api',
    )
    // Built again from its JSON, it is the same rule field by field (the period cache is shared).
    const back = ruleFromSpec(JSON.parse(JSON.stringify(r)))
    expect(isFactoryRule(back)).toBe(true)
    expect(isFactoryRule(r)).toBe(true)
    expect(Object.isFrozen(r)).toBe(true)
  })

  it('keeps the zone as Intl resolves it (its case fixed, a link as ICU names it)', () => {
    const kolkata = quota({ limit: 1, per: 'day', timeZone: 'Asia/Kolkata' }) as QuotaRule
    const calcutta = quota({ limit: 1, per: 'day', timeZone: 'Asia/Calcutta' }) as QuotaRule
    expect(kolkata.timeZone).toBe(
      new Intl.DateTimeFormat('en', { timeZone: 'Asia/Kolkata' }).resolvedOptions().timeZone,
    )
    expect(kolkata.id).toBe(calcutta.id)
    expect(formatRuleSpec(parseRuleSpec('quota:1/day@@Asia/Kolkata'))).toBe(
      `quota:1/day@@${kolkata.timeZone}`,
    )
    expect((quota({ limit: 1, per: 'day', timeZone: 'utc' }) as QuotaRule).timeZone).toBe('UTC')
    expect((quota({ limit: 1, per: 'day', timeZone: 'europe/berlin' }) as QuotaRule).timeZone).toBe(
      'Europe/Berlin',
    )
  })

  it('is not limited with limit -1, after checking its other options', () => {
    expect(quota({ limit: -1, per: 'day' })).toBe(UNLIMITED)
    expect(catchError(() => quota({ limit: -1, per: 'day', timeZone: 'Mars/Olympus' }))).toBeInstanceOf(
      InvalidOptionError,
    )
  })

  it.each<[string, unknown, string]>([
    ['an unknown zone', { limit: 1, per: 'day', timeZone: 'Mars/Olympus' }, 'quota.timeZone'],
    ['an empty zone', { limit: 1, per: 'day', timeZone: '' }, 'quota.timeZone'],
    ['a zone that is no string', { limit: 1, per: 'day', timeZone: 5 }, 'quota.timeZone'],
    ['a per it does not know', { limit: 1, per: 'minute' }, 'quota.per'],
    ['no per', { limit: 1 }, 'quota.per'],
    ['weekStartsOn 0', { limit: 1, per: 'week', weekStartsOn: 0 }, 'quota.weekStartsOn'],
    ['weekStartsOn 8', { limit: 1, per: 'week', weekStartsOn: 8 }, 'quota.weekStartsOn'],
    ['weekStartsOn 1.5', { limit: 1, per: 'week', weekStartsOn: 1.5 }, 'quota.weekStartsOn'],
    ['a week start for a month', { limit: 1, per: 'month', weekStartsOn: 7 }, 'quota.weekStartsOn'],
    ['limit 0', { limit: 0, per: 'day' }, 'quota.limit'],
    ['limit 1.5', { limit: 1.5, per: 'day' }, 'quota.limit'],
    ['limit 2^53', { limit: 2 ** 53, per: 'day' }, 'quota.limit'],
    ['an option it does not take', { limit: 1, per: 'day', windowMs: 1000 }, 'quota.windowMs'],
    ['a name with a quote', { limit: 1, per: 'day', name: 'a"b' }, 'quota.name'],
  ])('refuses %s with ERR_SLUICE_INVALID_OPTION naming it', (_what, options, option) => {
    const error = catchError(() => quota(options as QuotaOptions)) as InvalidOptionError
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error.code).toBe('ERR_SLUICE_INVALID_OPTION')
    expect(error.option).toBe(option)
  })
})

describe('quota as text', () => {
  it.each([
    ['quota:1000/day', { limit: 1000, per: 'day' }],
    ['quota:10000/month@@Europe/Berlin', { limit: 10_000, per: 'month', timeZone: 'Europe/Berlin' }],
    ['quota:500/week@@America/New_York', { limit: 500, per: 'week', timeZone: 'America/New_York' }],
    [
      'quota:500/week-sun@@America/New_York@api',
      { limit: 500, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7, name: 'api' },
    ],
    ['quota:5/week-wed', { limit: 5, per: 'week', weekStartsOn: 3 }],
    ['quota:1/hour@@Asia/Tokyo@a:b', { limit: 1, per: 'hour', timeZone: 'Asia/Tokyo', name: 'a:b' }],
    ['quota:7/year@x', { limit: 7, per: 'year', name: 'x' }],
  ] as [string, QuotaOptions][])('reads %s and writes it back', (text, options) => {
    const r = parseRuleSpec(text)
    expect(r).toEqual(quota(options))
    expect(formatRuleSpec(r)).toBe(text)
  })

  it('round-trips every form, a name starting with @ included', () => {
    const rules = [
      quota({ limit: 3, per: 'day', name: '@x' }),
      quota({ limit: 3, per: 'week', weekStartsOn: 7, timeZone: 'Pacific/Chatham', name: '@@y' }),
      quota({ limit: 2 ** 50, per: 'year', timeZone: 'Australia/Lord_Howe' }),
    ]
    expect(rules.map(formatRuleSpec)).toEqual([
      'quota:3/day@@UTC@@x',
      'quota:3/week-sun@@Pacific/Chatham@@@y',
      'quota:1125899906842624/year@@Australia/Lord_Howe',
    ])
    for (const r of rules) expect(JSON.stringify(parseRuleSpec(formatRuleSpec(r)))).toBe(JSON.stringify(r))
    expect(parseRuleSpec('quota:-1/day')).toBe(UNLIMITED)
  })

  it.each([
    'quota:10/minute',
    'quota:10/day-sun',
    'quota:10',
    'quota:x/day',
    'quota:10/week-sunday',
    'quota:10/day@@',
  ])('refuses %s with ERR_SLUICE_INVALID_SPEC naming the form', (text) => {
    const error = catchError(() => parseRuleSpec(text)) as InvalidSpecError
    expect(error).toBeInstanceOf(InvalidSpecError)
    expect(error.message).toContain(`"${text}"`)
    expect(error.message).toContain('quota:LIMIT/PER[-DAY][@@ZONE]')
  })

  it('hands figures to the factory: an unknown zone or a limit of 0 is the option’s error', () => {
    expect((catchError(() => parseRuleSpec('quota:10/day@@Mars/Olympus')) as InvalidOptionError).option).toBe(
      'quota.timeZone',
    )
    expect((catchError(() => parseRuleSpec('quota:0/day')) as InvalidOptionError).option).toBe('quota.limit')
  })

  it('serves as a limit table’s plans: free quota:1000/day, pro quota:100000/month', async () => {
    const table = createLimitTable({ free: ['quota:1000/day'], pro: ['quota:100000/month@@Europe/Berlin'] })
    expect(table.get('free')).toEqual([quota({ limit: 1000, per: 'day' })])
    expect(table.get('pro')).toEqual([quota({ limit: 100_000, per: 'month', timeZone: 'Europe/Berlin' })])
    const error = await table.set('team', ['quota:10/fortnight']).catch((e: unknown) => e)
    expect((error as InvalidSpecError).code).toBe('ERR_SLUICE_INVALID_SPEC')
    expect(table.get('team')).toBe(null)
  })
})
