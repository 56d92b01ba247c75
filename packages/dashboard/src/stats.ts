/**
 * @module What `GET api/stats` answers: every instance's latest snapshot combined into one series per
 * limiter (the instances' counts summed second by second) and one list of most denied keys per limiter.
 * Pure: the snapshots and the time come in, plain JSON goes out.
 *
 * History is what the publishers hold: a process running `liveStats({ seconds: 900 })` publishes its last
 * 15 minutes with every snapshot, so the dashboard keeps nothing itself, a restart of it loses nothing,
 * and any number of dashboards can read the same Redis.
 */
import type { LiveStatsSnapshot, SecondCounts, StatsMeta } from '@sluice/metrics'

/** One process as the dashboard shows it. */
export interface InstanceView {
  instance: string
  /** When its latest snapshot was taken (its own clock), in ms since the epoch. */
  lastSeen: number
  /** Seconds of history it keeps (its `liveStats({ seconds })`). */
  seconds: number
  /** What it publishes beside its counts, e.g. `{ tableVersion: 12 }`. */
  meta: StatsMeta
  /** The limiters it reported, sorted: the first 50 (`limiterCount` says how many in all). */
  limiters: string[]
  /** How many limiters it reported. */
  limiterCount: number
}

/** One limiter summed over every instance. */
export interface LimiterView {
  limiter: string
  /** One point per second, oldest first, every second of the span (empty ones included). */
  series: SecondCounts[]
  /** Most denied first, summed over instances; at most `topKeys`. */
  topDenied: { key: string; count: number }[]
  /** The instances that reported it, sorted. */
  instances: string[]
}

export interface StatsView {
  /** The dashboard's time, ms. */
  at: number
  /** The last second of every series (whole seconds since the epoch); 0 when no instance reported. */
  until: number
  /** Seconds of history available: the longest any instance keeps, at most the dashboard's `seconds`. */
  seconds: number
  instances: InstanceView[]
  /** Sorted by limiter name; the first that fit the answer's bound (`VIEW_BOUNDS`). */
  limiters: LimiterView[]
  /** Limiters left out past the answer's bound (the last by name); absent when none was. */
  omittedLimiters?: number
}

/**
 * What one `api/stats` answer holds at most, whatever the publishers wrote: points over every series (the
 * limiters shown are as many as fit at the span of history, so the same ones on every poll), most denied
 * keys over every limiter, and limiter names listed per instance.
 */
export const VIEW_BOUNDS = {
  points: 120_000,
  limiters: 1000,
  deniedKeys: 4000,
  instanceLimiters: 50,
} as const

/** A snapshot with the instance it came from; `readPublishedStats` returns these. */
export interface InstanceSnapshot extends LiveStatsSnapshot {
  instance: string
  meta: StatsMeta
}

export interface CombineOptions {
  /** Longest span served, in seconds. */
  maxSeconds: number
  /** Most denied keys kept per limiter. */
  topKeys: number
  /** Only seconds after this one (whole seconds) are returned; the page asks for what it lacks. */
  since?: number
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Combines snapshots. The span ends at the newest second any instance reported and reaches back as far as
 * the longest history any instance keeps, at most `maxSeconds`; an instance that keeps less contributes
 * to the seconds it holds.
 */
export function combineSnapshots(
  snapshots: readonly InstanceSnapshot[],
  now: number,
  options: CombineOptions,
): StatsView {
  // Each publisher's clock is its own: one far off the dashboard's is re-based onto it, so a clock minutes
  // fast neither pushes the span past every other instance's seconds nor hides them.
  const nowSecond = Math.floor(now / 1000)
  snapshots = snapshots.filter(isSnapshot).map((s) => {
    const offset = Math.floor(s.at / 1000) - nowSecond
    if (Math.abs(offset) <= MAX_SKEW_SECONDS) return s
    const limiters: InstanceSnapshot['limiters'] = Object.create(null)
    for (const [name, stats] of Object.entries(s.limiters)) {
      if (!isObject(stats)) continue
      const series = Array.isArray(stats.series) ? stats.series.filter(isObject) : []
      limiters[name] = { ...stats, series: series.map((p) => ({ ...p, t: p.t - offset })) }
    }
    return { ...s, at: s.at - offset * 1000, limiters }
  })
  let until = 0
  let seconds = 0
  for (const s of snapshots) {
    until = Math.max(until, Math.floor(s.at / 1000))
    seconds = Math.max(seconds, s.seconds)
  }
  seconds = Math.min(seconds, options.maxSeconds)
  const first = until - seconds + 1
  const from = options.since === undefined ? first : Math.max(first, options.since + 1)
  const length = Math.max(0, until - from + 1)

  // The limiters shown: as many as fit the answer's bound at the whole span, first by name, so a poll
  // for a few seconds shows the same ones as a poll for all of them.
  const union = new Set<string>()
  for (const s of snapshots) for (const name of Object.keys(s.limiters)) union.add(name)
  const fit = Math.min(VIEW_BOUNDS.limiters, Math.floor(VIEW_BOUNDS.points / Math.max(1, seconds)))
  const shown = new Set([...union].sort(byName).slice(0, fit))
  const topKeys = Math.min(options.topKeys, Math.floor(VIEW_BOUNDS.deniedKeys / Math.max(1, shown.size)))

  const limiters = new Map<
    string,
    { series: SecondCounts[]; denied: Map<string, number>; instances: string[] }
  >()
  const instances: InstanceView[] = []
  for (const s of snapshots) {
    const names = Object.keys(s.limiters).sort(byName)
    instances.push({
      instance: s.instance,
      lastSeen: s.at,
      seconds: s.seconds,
      meta: s.meta !== null && typeof s.meta === 'object' && !Array.isArray(s.meta) ? s.meta : {},
      limiters: names.slice(0, VIEW_BOUNDS.instanceLimiters),
      limiterCount: names.length,
    })
    for (const name of names) {
      if (!shown.has(name)) continue
      const stats = s.limiters[name]
      // Published by another process, as JSON: anything but an object counts nothing.
      if (!isObject(stats)) continue
      let combined = limiters.get(name)
      if (combined === undefined) {
        const series = new Array<SecondCounts>(length)
        for (let i = 0; i < length; i++)
          series[i] = { t: from + i, allowed: 0, queued: 0, denied: 0, shadow: 0 }
        combined = { series, denied: new Map(), instances: [] }
        limiters.set(name, combined)
      }
      combined.instances.push(s.instance)
      for (const point of Array.isArray(stats.series) ? stats.series : []) {
        if (!isObject(point) || !Number.isSafeInteger(point.t)) continue
        const i = point.t - from
        if (!(i >= 0 && i < length)) continue
        const into = combined.series[i]!
        into.allowed += count(point.allowed)
        into.queued += count(point.queued)
        into.denied += count(point.denied)
        into.shadow += count(point.shadow)
      }
      for (const item of Array.isArray(stats.topDenied) ? stats.topDenied : []) {
        if (!isObject(item) || typeof item.key !== 'string') continue
        combined.denied.set(item.key, (combined.denied.get(item.key) ?? 0) + count(item.count))
      }
    }
  }

  const views: LimiterView[] = []
  for (const [limiter, c] of limiters) {
    const topDenied = [...c.denied].map(([key, n]) => ({ key, count: n }))
    topDenied.sort((a, b) => b.count - a.count || byName(a.key, b.key))
    topDenied.length = Math.min(topDenied.length, topKeys)
    views.push({ limiter, series: c.series, topDenied, instances: c.instances.sort(byName) })
  }
  views.sort((a, b) => byName(a.limiter, b.limiter))
  instances.sort((a, b) => byName(a.instance, b.instance))
  const view: StatsView = { at: now, until, seconds, instances, limiters: views }
  if (union.size > shown.size) view.omittedLimiters = union.size - shown.size
  return view
}

/** A snapshot whose figures can be trusted to compute with (they come from other processes, as JSON). */
function isSnapshot(s: InstanceSnapshot): boolean {
  return (
    typeof s.instance === 'string' &&
    typeof s.at === 'number' &&
    Number.isFinite(s.at) &&
    Number.isSafeInteger(s.seconds) &&
    s.seconds >= 1 &&
    s.seconds <= 86_400 &&
    s.limiters !== null &&
    typeof s.limiters === 'object'
  )
}

/** Seconds a publisher's clock may differ from the dashboard's before its snapshot is re-based onto it. */
const MAX_SKEW_SECONDS = 5

function isObject<T>(value: T): value is T & object {
  return value !== null && typeof value === 'object'
}

/** A count from another process's JSON: a finite number >= 0, else 0. */
function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0
}
