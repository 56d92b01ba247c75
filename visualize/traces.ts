/**
 * @module The traffic the visualiser draws: five traces of call times, each with the stretch of time
 * its picture shows (four of instants within seconds, and a month and a half of calls against quotas). Plain data, no limiter here; the random trace comes from a seeded generator so
 * its picture is the same on every run and every machine.
 */

/** A sequence of calls (one unit each) and the stretch of time its picture shows. */
export interface Trace {
  /** File name without extension, e.g. `"burst-across-edge"`. */
  readonly id: string
  readonly title: string
  /** One sentence under the title: what the traffic is. */
  readonly subtitle: string
  /** Call times in ms, ascending integers. */
  readonly times: readonly number[]
  /** The x axis runs from `fromMs` to `toMs`. */
  readonly fromMs: number
  readonly toMs: number
}

/**
 * A seeded generator of floats in [0, 1): mulberry32, 32 bits of state, stepped with integer maths
 * only, so every JavaScript engine draws the same numbers from the same seed.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** Integer times `from`, `from + step`, ... up to `to` inclusive. */
function every(step: number, from: number, to: number): number[] {
  const times: number[] = []
  for (let t = from; t <= to; t += step) times.push(t)
  return times
}

/**
 * Arrivals of a Poisson process at `perSecond` on average, from `from` until before `to`: exponential
 * gaps rounded to whole ms (at least 1 ms, so times stay strictly ascending).
 */
export function randomArrivals(seed: number, perSecond: number, from: number, to: number): number[] {
  const random = seededRandom(seed)
  const meanGapMs = 1000 / perSecond
  const times: number[] = []
  let t = from
  for (;;) {
    t += Math.max(1, Math.round(-Math.log(1 - random()) * meanGapMs))
    if (t >= to) return times
    times.push(t)
  }
}

/** Twenty calls 20 ms apart straddling the edge at 1 s, then one call every 100 ms to watch each rule recover. */
export const burstAcrossEdge: Trace = {
  id: 'burst-across-edge',
  title: 'A burst across a window edge',
  subtitle:
    '20 calls 20 ms apart from 0.8 s to 1.18 s (10 on each side of the edge at 1 s), then one every 100 ms',
  times: [...every(20, 800, 1180), ...every(100, 1300, 2400)],
  fromMs: 600,
  toMs: 2500,
}

/** Ten calls a second, evenly spaced: twice what every rule allows. */
export const steadyAboveLimit: Trace = {
  id: 'steady-above-limit',
  title: 'A steady stream at twice the limit',
  subtitle: 'One call every 100 ms (10 per second) for 3 s, against rules that allow 5 per second',
  times: every(100, 50, 2950),
  fromMs: 0,
  toMs: 3000,
}

/** Random arrivals at 8 a second on average: quiet spells and clumps, as real traffic has. */
export const randomArrivalsTrace: Trace = {
  id: 'random-arrivals',
  title: 'Random arrivals',
  subtitle: 'Poisson arrivals at 8 per second on average for 4 s (seeded, so the picture is repeatable)',
  times: randomArrivals(2024, 8, 0, 4000),
  fromMs: 0,
  toMs: 4000,
}

/**
 * Steady demand above the rate, a pause, then demand again: a warm-up meter starts cold, speeds up to its
 * stable rate, and after the pause is cold again (drawn against a leaky bucket at the same rate).
 */
export const warmUpTrace: Trace = {
  id: 'warm-up',
  title: 'A cold start, warming up, and cooling down',
  subtitle: 'One call every 100 ms for 4 s, nothing for 3 s, then one every 100 ms again for 3 s',
  times: [...every(100, 0, 3900), ...every(100, 7000, 9900)],
  fromMs: 0,
  toMs: 10_000,
}

/** Every trace, in the order the docs show them. */
export const traces: readonly Trace[] = [burstAcrossEdge, steadyAboveLimit, randomArrivalsTrace, warmUpTrace]

/** The month picture's stretch: Monday 28 September to Monday 9 November 2026, UTC. */
const MONTH_FROM = Date.UTC(2026, 8, 28)
const MONTH_TO = Date.UTC(2026, 10, 9)

/**
 * Six weeks of calls, 7 a day on average at random, against calendar quotas: the end of October (and of
 * central European summer time, on 25 October) and the start of November. Times are ms since the epoch,
 * as the quotas' calendars need.
 */
export const quotaMonthTrace: Trace = {
  id: 'quota-month',
  title: 'A month of quotas, with their calendar edges',
  subtitle:
    'Poisson arrivals at 7 a day on average from 28 September to 9 November 2026 (seeded), against weekly and monthly quotas',
  times: randomArrivals(48, 7 / 86_400, MONTH_FROM, MONTH_TO),
  fromMs: MONTH_FROM,
  toMs: MONTH_TO,
}
