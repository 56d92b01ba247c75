/**
 * @module Runs a trace through one rule with the real sluice limiter: `createLimiter` on a
 * `MemoryStore` whose clock is set to each call's time. Every mark a picture shows is read off a
 * `Decision` this returns; nothing here knows how any algorithm counts.
 * Core is imported from its source, so the pictures are drawn by the code in this tree, unbuilt.
 */
import {
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  quota,
  type Rule,
  type RuleInput,
  type RuleKind,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '../packages/core/src/index.ts'
import type { Trace } from './traces.ts'

/** One row of a picture: an algorithm with numbers comparable to the other rows. */
export interface Lane {
  readonly kind: RuleKind
  /** The rule's numbers in words, e.g. `"5 per 1 s window"`. */
  readonly detail: string
  /** What `limit - remaining` means for this rule, in words. */
  readonly fill: string
  readonly rule: Rule
}

/** What one call's decision says, as the picture draws it. */
export interface Mark {
  /** When the call arrived, ms. */
  readonly t: number
  readonly allowed: boolean
  /** How long an admitted call must hold before proceeding (leaky bucket queue), ms. */
  readonly waitMs: number
  /** How full the rule is after the call: `limit - remaining` of its decision. */
  readonly seen: number
  readonly limit: number
  readonly remaining: number
  readonly retryAfterMs: number
}

/** A lane with the marks of every call of one trace. */
export interface LaneRun {
  readonly lane: Lane
  readonly marks: readonly Mark[]
}

function limiting(rule: RuleInput): Rule {
  if (rule.kind === 'unlimited') throw new Error('a visualiser lane needs a limiting rule')
  return rule
}

/** The five algorithms at five units a second, so their rows compare. */
export const lanes: readonly Lane[] = [
  {
    kind: 'fixedWindow',
    detail: '5 per 1 s window',
    fill: 'units in this window',
    rule: limiting(fixedWindow({ limit: 5, windowMs: 1000 })),
  },
  {
    kind: 'slidingWindow',
    detail: '5 per 1 s, 10 buckets',
    fill: 'units in live buckets',
    rule: limiting(slidingWindow({ limit: 5, windowMs: 1000, buckets: 10 })),
  },
  {
    kind: 'slidingLog',
    detail: '5 in any 1 s',
    fill: 'units in the last 1 s',
    rule: limiting(slidingLog({ limit: 5, windowMs: 1000 })),
  },
  {
    kind: 'tokenBucket',
    detail: '5 tokens, 5 per s refill',
    fill: 'tokens spent',
    rule: limiting(tokenBucket({ capacity: 5, refillPerSecond: 5 })),
  },
  {
    kind: 'leakyBucket',
    detail: '5 per s, queue 400 ms',
    fill: 'queue slots taken',
    rule: leakyBucket({ ratePerSecond: 5, maxQueueMs: 400 }),
  },
]

/**
 * The warm-up picture's rows: a leaky bucket and a warm-up meter at the same stable rate and queue, so the
 * cold start shows against a meter that is always warm. (A concurrency rule has no row: the traces are
 * instants, and what it limits is how long requests run.)
 */
export const warmUpLanes: readonly Lane[] = [
  lanes[4]!,
  {
    kind: 'warmUp',
    detail: '5 per s warm, 3× slower cold, 2 s warm-up, queue 400 ms',
    fill: 'queue slots taken (at the warm rate)',
    rule: warmUp({ ratePerSecond: 5, warmUpMs: 2000, coldFactor: 3, maxQueueMs: 400 }),
  },
]

/**
 * The month picture's rows: quotas whose periods are calendar periods, each in its own time zone, so their
 * edges fall at different instants: weeks from Monday in Berlin, weeks from Sunday in New York, and
 * Berlin's months.
 */
export const quotaLanes: readonly Lane[] = [
  {
    kind: 'quota',
    detail: '40 a week, from Monday, Europe/Berlin',
    fill: 'units counted this week',
    rule: limiting(quota({ limit: 40, per: 'week', timeZone: 'Europe/Berlin' })),
  },
  {
    kind: 'quota',
    detail: '40 a week, from Sunday, America/New_York',
    fill: 'units counted this week',
    rule: limiting(quota({ limit: 40, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7 })),
  },
  {
    kind: 'quota',
    detail: '150 a month, Europe/Berlin',
    fill: 'units counted this month',
    rule: limiting(quota({ limit: 150, per: 'month', timeZone: 'Europe/Berlin' })),
  },
]

/** The rows of `trace`'s picture. */
export function lanesFor(trace: Trace): readonly Lane[] {
  if (trace.id === 'quota-month') return quotaLanes
  return trace.id === 'warm-up' ? warmUpLanes : lanes
}

/** The figures a picture needs from one decision. */
export function markOf(t: number, d: Decision): Mark {
  return {
    t,
    allowed: d.allowed,
    waitMs: d.waitMs,
    seen: d.limit - d.remaining,
    limit: d.limit,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
  }
}

/** Every call of `trace`, in order, through a fresh limiter holding only `lane`'s rule. */
export async function runTrace(trace: Trace, lane: Lane): Promise<LaneRun> {
  let now = 0
  const limiter = createLimiter({
    rules: [lane.rule],
    store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
  })
  const marks: Mark[] = []
  for (const t of trace.times) {
    now = t
    marks.push(markOf(t, await limiter.consume('visualize')))
  }
  return { lane, marks }
}

/** `trace` through every lane of its picture. */
export function runLanes(trace: Trace): Promise<LaneRun[]> {
  return Promise.all(lanesFor(trace).map((lane) => runTrace(trace, lane)))
}
