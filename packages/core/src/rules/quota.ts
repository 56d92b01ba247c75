/**
 * @module quota: a count per calendar period (an hour, a day, a week, a month or a year) in an IANA time
 * zone. A fixed window whose edges are the zone's calendar edges: a day across a DST change lasts 23 or 25
 * hours, a month ends at its last day's midnight, a week starts on `weekStartsOn`.
 *
 * The period is found with `Intl` alone: the zone's wall clock at `now`, the period's first and next wall
 * times, and each back to an instant (`instantOf`). A wall time the zone skips (a DST gap) or shows twice (an
 * overlap) is taken at the first instant whose wall clock reads it or later, so periods follow each other
 * without gap or overlap. Each rule keeps its current period, shared by every rule of the same period, zone
 * and week start (`calendarOf`): a decision inside it costs two comparisons, and `Intl` runs only when `now`
 * leaves it. See docs/design/rules/quota.md.
 */
import { InvalidOptionError, InvalidSpecError } from '../errors.ts'
import { given, integerOption, labelOption, limitOption, ruleOptions } from '../options.ts'
import type { QuotaPer, QuotaRule, RuleDecision, UnlimitedRule } from '../types.ts'
import { type Algorithm, atLeastZero, limitDecision } from './algorithm.ts'
import { countingMaxCost, countingTooCostly, FIXUP_STEPS } from './bounds.ts'
import { defineRule } from './define.ts'
import { INTEGER } from './grammar.ts'
import type { RuleKindEntry } from './kind.ts'
import { UNLIMITED } from './unlimited.ts'

export interface QuotaOptions {
  /** Units admitted per period: an integer >= 1, or -1 for not limited. */
  limit: number
  /** The calendar period the count runs over: `'hour'`, `'day'`, `'week'`, `'month'` or `'year'`. */
  per: QuotaPer
  /** The IANA time zone whose calendar the periods follow, e.g. `'Europe/Berlin'`. Default `'UTC'`. */
  timeZone?: string
  /** The day a week starts on, 1 = Monday … 7 = Sunday; only `per: 'week'` takes another than 1. Default 1. */
  weekStartsOn?: number
  /** Shown in headers and decisions. Default: `"<limit>-per-<per>"`, e.g. `"1000-per-day"`. */
  name?: string
}

const PERS: readonly QuotaPer[] = ['hour', 'day', 'week', 'month', 'year']

/**
 * The `RateLimit-Policy` window of each period, in seconds: its nominal length (a day 86400, a month 30
 * days, a year 365 days), the same whatever the calendar makes of the current one. The reset and retry
 * figures are exact.
 */
const POLICY_SECONDS: Readonly<Record<QuotaPer, number>> = {
  hour: 3600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000,
}

/** A rule counting up to `limit` units per calendar period `per` in `timeZone`. */
export function quota(options: QuotaOptions): QuotaRule | UnlimitedRule {
  const o = ruleOptions('quota', options, quotaKind.options)
  const limit = limitOption('quota.limit', o.limit)
  if (typeof o.per !== 'string' || !PERS.includes(o.per)) {
    throw new InvalidOptionError('quota.per', o.per, `one of ${PERS.map((p) => `'${p}'`).join(', ')}`)
  }
  const per = o.per
  const timeZone = zoneOption(given(o.timeZone, 'UTC'))
  const weekStartsOn = integerOption('quota.weekStartsOn', given(o.weekStartsOn, 1), 1, 7)
  if (weekStartsOn !== 1 && per !== 'week') {
    throw new InvalidOptionError(
      'quota.weekStartsOn',
      weekStartsOn,
      `1 (the default) with per '${per}'; only a week has a start day`,
    )
  }
  const name = o.name === undefined ? undefined : labelOption('quota.name', o.name)
  if (limit === -1) return UNLIMITED
  return defineRule<QuotaRule>(
    { kind: 'quota', limit, per, timeZone, weekStartsOn },
    quotaKind.identity,
    name,
    `${limit}-per-${per}`,
    { policyWindowSeconds: POLICY_SECONDS[per], calendar: calendarOf(per, timeZone, weekStartsOn) },
  )
}

/** The zone's canonical name as `Intl` resolves it (`utc` is `UTC`), or an error naming the option. */
function zoneOption(value: unknown): string {
  if (typeof value === 'string' && value.length > 0 && value.length <= 64) {
    try {
      // A formatter of its own: only resolved names are cached (formatterOf), however a name is spelled.
      return new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone
    } catch {
      // Not a zone Intl knows: refused below.
    }
  }
  throw new InvalidOptionError(
    'quota.timeZone',
    value,
    'an IANA time zone name Intl knows, such as Europe/Berlin or UTC',
  )
}

/** The period of one calendar: the one `now` last fell in, [start, end) in ms since the epoch. */
interface Calendar {
  start: number
  end: number
  readonly per: QuotaPer
  readonly format: Intl.DateTimeFormat
  readonly weekStartsOn: number
}

const CALENDARS = Symbol.for('sluice.quota.calendars')

/** A quota rule as this file sees it: with its calendar (a non-enumerable field, shared; see `calendarOf`). */
type CalendarRule = QuotaRule & { readonly calendar: Calendar }

/**
 * One calendar per period, zone and week start, shared by every rule of them, so that a rule built again
 * from its spec is the same rule field by field (`isFactoryRule`) and a limit table's thousand rules of one
 * plan share one cache. Bounded by the zones `Intl` knows × 5 periods × 7 week starts. Kept on `globalThis`
 * under a registered symbol, so that every copy of this module in a process (a CommonJS `require` beside an
 * ESM `import` of core) shares it: a rule one copy built is then the same rule field by field to the other.
 */
const calendars = sharedCalendars()

function sharedCalendars(): Map<string, Calendar> {
  const shared = globalThis as { [CALENDARS]?: Map<string, Calendar> }
  shared[CALENDARS] ??= new Map<string, Calendar>()
  return shared[CALENDARS]
}

function calendarOf(per: QuotaPer, zone: string, weekStartsOn: number): Calendar {
  const id = `${per} ${zone} ${weekStartsOn}`
  let calendar = calendars.get(id)
  if (calendar === undefined) {
    calendar = { start: 0, end: 0, per, format: formatterOf(zone), weekStartsOn }
    calendars.set(id, calendar)
  }
  return calendar
}

const formatters = new Map<string, Intl.DateTimeFormat>()

/** One formatter per zone name: the zone's wall clock to the second, 24-hour. Throws for an unknown zone. */
function formatterOf(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone)
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(zone, format)
  }
  return format
}

/**
 * The period of `rule` that holds `now`: [start, end) in ms since the epoch, computed with the zone's rules
 * (see the module comment). The stores call it with their own clock's `now`.
 *
 * @throws `InvalidSpecError` for a rule `quota` did not build (its JSON spec included: build it with
 *   `ruleFromSpec`), `InvalidOptionError` for a `now` that is not a finite number.
 */
export function quotaPeriod(rule: QuotaRule, now: number): { start: number; end: number } {
  if ((rule as Partial<CalendarRule> | null)?.calendar === undefined) {
    throw new InvalidSpecError(rule, 'a quota rule built by quota() or parseRuleSpec')
  }
  if (typeof now !== 'number' || !Number.isFinite(now)) {
    throw new InvalidOptionError('quotaPeriod.now', now, 'a finite number of ms since the epoch')
  }
  const c = periodAt(rule as CalendarRule, now)
  return { start: c.start, end: c.end }
}

/** The rule's calendar, moved to the period holding `now` when it is not there already. */
function periodAt(rule: CalendarRule, now: number): Calendar {
  const c = rule.calendar
  if (now < c.start || now >= c.end) move(c, now)
  return c
}

const HOUR = 3_600_000
const DAY = 86_400_000

/** Moves `c` to the period holding `now`. */
function move(c: Calendar, now: number): void {
  let wall = firstWall(c, wallOf(c.format, now))
  let next = nextWall(c.per, wall)
  let start = instantOf(c.format, wall)
  let end = instantOf(c.format, next)
  // A wall clock set back across the period's edge (a zone falling back from 00:30 to 23:30) reads the
  // period before for a while after the next one began at its first midnight: the instant belongs to the
  // next one. The clock never goes back by a period, so a step or two settles it.
  for (let step = 0; step < FIXUP_STEPS && now >= end; step++) {
    wall = next
    next = nextWall(c.per, wall)
    start = end
    end = instantOf(c.format, next)
  }
  c.start = start
  c.end = end
}

/**
 * A wall time as ms: the zone's calendar date and clock reading written as if they were UTC (so calendar
 * arithmetic is plain `Date.UTC` arithmetic), ms included.
 */
function wallOf(format: Intl.DateTimeFormat, t: number): number {
  let year = 0
  let month = 1
  let day = 1
  let hour = 0
  let minute = 0
  let second = 0
  for (const part of format.formatToParts(t)) {
    const v = Number(part.value)
    if (part.type === 'year') year = v
    else if (part.type === 'month') month = v
    else if (part.type === 'day') day = v
    else if (part.type === 'hour') hour = v
    else if (part.type === 'minute') minute = v
    else if (part.type === 'second') second = v
  }
  return utc(year, month - 1, day, hour, minute, second) + (t - Math.floor(t / 1000) * 1000)
}

/** `Date.UTC` for every year (Date.UTC reads a year below 100 as 19xx). */
function utc(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  const date = new Date(0)
  date.setUTCFullYear(year, month, day)
  date.setUTCHours(hour, minute, second, 0)
  return date.getTime()
}

/** The wall time the period holding the wall time `wall` starts at. */
function firstWall(c: Calendar, wall: number): number {
  const date = new Date(wall)
  switch (c.per) {
    case 'hour':
      return Math.floor(wall / HOUR) * HOUR
    case 'day':
      return Math.floor(wall / DAY) * DAY
    case 'week': {
      const day = Math.floor(wall / DAY)
      // 1 January 1970 was a Thursday (4): the ISO weekday, 1 = Monday … 7 = Sunday.
      const weekday = ((((day + 3) % 7) + 7) % 7) + 1
      return (day - ((weekday - c.weekStartsOn + 7) % 7)) * DAY
    }
    case 'month':
      return utc(date.getUTCFullYear(), date.getUTCMonth(), 1)
    case 'year':
      return utc(date.getUTCFullYear(), 0, 1)
  }
}

/** The wall time the period after the one starting at the wall time `wall` starts at. */
function nextWall(per: QuotaPer, wall: number): number {
  const date = new Date(wall)
  switch (per) {
    case 'hour':
      return wall + HOUR
    case 'day':
      return utc(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + 1)
    case 'week':
      return utc(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + 7)
    case 'month':
      return utc(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
    case 'year':
      return utc(date.getUTCFullYear() + 1, 0, 1)
  }
}

/** The zone's offset from UTC at the instant `t`, in ms. */
function offsetAt(format: Intl.DateTimeFormat, t: number): number {
  return wallOf(format, t) - t
}

/**
 * The first instant whose wall clock reads `wall` or later: the instant itself where the zone shows `wall`
 * once; the earlier of the two where it shows it twice (an overlap: clocks set back); the instant the clocks
 * jumped past it where the zone skips it (a gap). Zones change offset at most once within a day of any
 * instant, so the offsets a day either side are the two that can apply.
 */
function instantOf(format: Intl.DateTimeFormat, wall: number): number {
  const before = offsetAt(format, wall - DAY)
  const after = offsetAt(format, wall + DAY)
  const early = wall - Math.max(before, after)
  const late = wall - Math.min(before, after)
  if (offsetAt(format, early) === Math.max(before, after)) return early
  if (offsetAt(format, late) === Math.min(before, after)) return late
  // A gap: the clocks jumped from before `wall` to after it, at an instant in (wall - after, wall - before].
  // Halving the span finds it in at most 28 steps (a gap of a day is 2^27 ms).
  let lo = wall - after
  let hi = wall - before
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (wallOf(format, mid) < wall) lo = mid
    else hi = mid
  }
  return hi
}

export interface QuotaState {
  /** Start of the period `count` belongs to. */
  start: number
  /** Its end: when the state reads as fresh. */
  end: number
  count: number
}

export const quotaAlgorithm: Algorithm<CalendarRule, QuotaState> = {
  mark: undefined,
  create(rule, now) {
    const c = periodAt(rule, now)
    return { start: c.start, end: c.end, count: 0 }
  },

  decide(state, rule, now, cost) {
    const c = periodAt(rule, now)
    const count = state.start === c.start ? state.count : 0
    const allowed = count + cost <= rule.limit
    const after = allowed ? count + cost : count
    // Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
    const resetMs = after === 0 ? 0 : c.end - now
    return quotaDecision(rule, allowed, atLeastZero(rule.limit - after), resetMs, count, c.end)
  },

  admit(state, rule, now, cost) {
    const c = periodAt(rule, now)
    if (state.start !== c.start) {
      state.start = c.start
      state.end = c.end
      state.count = 0
    }
    state.count += cost
  },

  expiresAt: (state) => state.end,

  refund(state, rule, now, cost) {
    // Only the current period's count: units of a period that is over no longer count anyway.
    if (state.start === periodAt(rule, now).start) state.count = Math.max(state.count - cost, 0)
  },

  refundCall(state, rule, now, cost, at) {
    // The call's units count only in the period it was counted in, and only while that period lasts.
    const c = periodAt(rule, now)
    if (at >= c.start && at < c.end) quotaAlgorithm.refund(state, rule, now, cost)
  },

  penalize(state, rule, now, cost) {
    const c = periodAt(rule, now)
    if (state.start !== c.start) {
      state.start = c.start
      state.end = c.end
      state.count = 0
    }
    state.count = Math.max(state.count, Math.min(state.count + cost, rule.limit + cost))
  },
}

/**
 * A quota rule's answer: the shape every counting kind answers in, and what a usage page shows, `used`
 * (the period's count before this call) and `resetsAt` (the period's end).
 */
function quotaDecision(
  rule: QuotaRule,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  used: number,
  resetsAt: number,
): RuleDecision {
  return {
    rule: rule.name,
    allowed,
    limit: rule.limit,
    remaining,
    resetMs: Math.trunc(resetMs),
    retryAfterMs: allowed ? 0 : Math.trunc(resetMs),
    waitMs: 0,
    windowSeconds: rule.policyWindowSeconds,
    used,
    resetsAt,
  }
}

const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const

/** `LIMIT/PER[-DAY][@@ZONE]`: a week's start day (`-sun`) only after `week`, the zone after `@@`. */
const QUOTA_TEXT = new RegExp(
  `^(${INTEGER})/(hour|day|week|month|year)(?:-(${DAYS.join('|')}))?(?:@@([^@]+))?$`,
)

/** quota as core knows it: see kind.ts. */
export const quotaKind: RuleKindEntry<'quota'> = {
  factory: quota,
  options: ['limit', 'per', 'timeZone', 'weekStartsOn', 'name'],
  identity: ['per', 'timeZone', 'weekStartsOn'],
  algorithm: quotaAlgorithm as RuleKindEntry<'quota'>['algorithm'],
  certainRetry: true,
  decision: limitDecision,
  text: {
    form: 'quota:LIMIT/PER[-DAY][@@ZONE], e.g. quota:1000/day, quota:10000/month@@Europe/Berlin, quota:500/week-sun',
    zoned: true,
    read(body) {
      const m = QUOTA_TEXT.exec(body)
      if (m === null || (m[3] !== undefined && m[2] !== 'week')) return undefined
      const options: Record<string, unknown> = { limit: Number(m[1]), per: m[2] }
      if (m[4] !== undefined) options.timeZone = m[4]
      if (m[3] !== undefined) options.weekStartsOn = DAYS.indexOf(m[3] as (typeof DAYS)[number]) + 1
      return options
    },
    write(rule) {
      const day = rule.weekStartsOn === 1 ? '' : `-${DAYS[rule.weekStartsOn - 1]}`
      // The zone is left out when it is UTC, unless the name starts with `@` (`@@` would then read as a zone).
      const zone = rule.timeZone === 'UTC' && !rule.name.startsWith('@') ? '' : `@@${rule.timeZone}`
      return `${rule.limit}/${rule.per}${day}${zone}`
    },
  },
  maxCost: countingMaxCost,
  tooCostly: countingTooCostly,
  refundMark: (_rule, _d, at) => String(at),
}
