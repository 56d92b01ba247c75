/**
 * @module The algorithm pictures show what the limiter decides, exactly, and the committed copies in
 * docs/visualize are what the visualiser draws today. Each trace runs here through its own limiter,
 * independent of the visualiser's runner, and every mark in the SVG is checked against it.
 */
import { readFileSync } from 'node:fs'
import { createLimiter, type Decision, formatRuleSpec, MemoryStore } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { renderCalendar } from '../visualize/calendar.ts'
import { pictures } from '../visualize/pictures.ts'
import { type Lane, lanes, lanesFor, quotaLanes, runLanes } from '../visualize/run.ts'
import { renderTrace } from '../visualize/svg.ts'
import {
  burstAcrossEdge,
  quotaMonthTrace,
  randomArrivals,
  randomArrivalsTrace,
  steadyAboveLimit,
  type Trace,
  traces,
  warmUpTrace,
} from '../visualize/traces.ts'

/** What the picture says about one call. */
interface DrawnMark {
  rule: string
  t: number
  allowed: boolean
  wait: number
  seen: number
  shape: string
}

const MARK =
  /<g class="call" data-rule="([A-Za-z]+)" data-t="(\d+)" data-allowed="(true|false)" data-wait="(\d+)" data-seen="(\d+)"><title>[^<]*<\/title><(circle|path) /g

function drawnMarks(svg: string): DrawnMark[] {
  return [...svg.matchAll(MARK)].map((m) => ({
    rule: m[1]!,
    t: Number(m[2]),
    allowed: m[3] === 'true',
    wait: Number(m[4]),
    seen: Number(m[5]),
    shape: m[6]!,
  }))
}

/** The decisions of `trace` under `lane`'s rule, from a limiter of the test's own. */
async function decisions(trace: Trace, lane: Lane): Promise<Decision[]> {
  let now = 0
  const limiter = createLimiter({
    rules: [lane.rule],
    store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
  })
  const out: Decision[] = []
  for (const t of trace.times) {
    now = t
    out.push(await limiter.consume('k'))
  }
  return out
}

/** Most admitted calls proceeding (arrival + wait) within any half-open 1000 ms. */
function mostInOneSecond(times: readonly number[], ds: readonly Decision[]): number {
  const passes = ds.flatMap((d, i) => (d.allowed ? [times[i]! + d.waitMs] : [])).sort((a, b) => a - b)
  let most = 0
  for (const from of passes) most = Math.max(most, passes.filter((p) => p >= from && p < from + 1000).length)
  return most
}

/** The text of one lane's group in the SVG. */
function laneText(svg: string, kind: string): string {
  const start = svg.indexOf(`<g class="lane" data-rule="${kind}">`)
  expect(start).toBeGreaterThan(-1)
  return svg.slice(start, svg.indexOf('\n</g>', start))
}

/** Calls admitted in the first second of the warm-up trace (see the picture). */
const FIRST_SECOND_LEAKY = 7
const FIRST_SECOND_WARM = 3

describe('visualize', () => {
  it('draws the five algorithms at comparable numbers', () => {
    expect(lanes.map((l) => l.rule.id)).toEqual([
      'fixedWindow:1000',
      'slidingWindow:1000:10',
      'slidingLog:1000',
      'tokenBucket',
      'leakyBucket',
    ])
  })

  for (const trace of traces) {
    it(`${trace.id}: every mark is the limiter's decision for that call`, async () => {
      const svg = renderTrace(trace, await runLanes(trace))
      const drawn = drawnMarks(svg)
      expect(svg.split('class="call"').length - 1).toBe(drawn.length)
      expect(drawn).toHaveLength(trace.times.length * lanesFor(trace).length)

      for (const lane of lanesFor(trace)) {
        const ds = await decisions(trace, lane)
        const expected: DrawnMark[] = ds.map((d, i) => ({
          rule: lane.kind,
          t: trace.times[i]!,
          allowed: d.allowed,
          wait: d.waitMs,
          seen: d.limit - d.remaining,
          shape: d.allowed ? 'circle' : 'path',
        }))
        expect(drawn.filter((m) => m.rule === lane.kind)).toEqual(expected)

        const text = laneText(svg, lane.kind)
        const admitted = ds.filter((d) => d.allowed).length
        expect(text).toContain(`admitted ${admitted} of ${trace.times.length}</text>`)
        expect(text).toContain(`most in any 1 s: ${mostInOneSecond(trace.times, ds)}</text>`)
      }
    })
  }

  it('the figures docs/visualize/README.md quotes', async () => {
    const run = async (trace: Trace, kind: string) => {
      const ds = await decisions(trace, lanes.find((l) => l.kind === kind)!)
      return {
        admitted: ds.filter((d) => d.allowed).length,
        waited: ds.filter((d) => d.waitMs > 0).length,
        most: mostInOneSecond(trace.times, ds),
        firstDenied: ds.findIndex((d) => !d.allowed),
      }
    }
    // Burst: fixed window lets twice its limit through within 1 s; the sliding rules never more than 5.
    expect((await run(burstAcrossEdge, 'fixedWindow')).most).toBe(10)
    expect((await run(burstAcrossEdge, 'slidingLog')).most).toBe(5)
    expect((await run(burstAcrossEdge, 'slidingWindow')).most).toBe(5)
    expect((await run(burstAcrossEdge, 'tokenBucket')).most).toBe(9)
    // Steady: the window rules admit half; the token bucket admits nine before its first denial.
    for (const kind of ['fixedWindow', 'slidingWindow', 'slidingLog']) {
      expect((await run(steadyAboveLimit, kind)).admitted).toBe(15)
    }
    expect((await run(steadyAboveLimit, 'tokenBucket')).firstDenied).toBe(9)
    // Random: 7 through the fixed window and 9 through the token bucket within a second.
    expect((await run(randomArrivalsTrace, 'fixedWindow')).most).toBe(7)
    expect((await run(randomArrivalsTrace, 'tokenBucket')).most).toBe(9)
    expect((await run(randomArrivalsTrace, 'slidingLog')).most).toBe(5)
    expect((await run(randomArrivalsTrace, 'slidingWindow')).most).toBe(5)
    expect(await run(randomArrivalsTrace, 'leakyBucket')).toMatchObject({ admitted: 19, waited: 16 })
  })

  it('the warm-up picture: a cold start admits fewer than a warm meter, and after the pause it is cold again', async () => {
    const [leaky, warm] = lanesFor(warmUpTrace)
    const admittedBetween = (ds: Decision[], from: number, to: number) =>
      ds.filter((d, i) => d.allowed && warmUpTrace.times[i]! >= from && warmUpTrace.times[i]! < to).length
    const l = await decisions(warmUpTrace, leaky!)
    const w = await decisions(warmUpTrace, warm!)
    // Cold, the meter passes about a third of the warm rate; warmed up (after 2 s), the full rate.
    expect(admittedBetween(l, 0, 1000)).toBe(FIRST_SECOND_LEAKY)
    expect(admittedBetween(w, 0, 1000)).toBe(FIRST_SECOND_WARM)
    expect(admittedBetween(w, 3000, 4000)).toBe(admittedBetween(l, 3000, 4000))
    // After 3 s idle it has cooled down: the first second of the second burst is a cold start again.
    expect(admittedBetween(w, 7000, 8000)).toBe(FIRST_SECOND_WARM)
  })

  it('the random trace is seeded: same times on every run, ascending whole ms in range', () => {
    const times = randomArrivals(2024, 8, 0, 4000)
    expect(randomArrivals(2024, 8, 0, 4000)).toEqual(times)
    expect(randomArrivals(2025, 8, 0, 4000)).not.toEqual(times)
    for (const trace of [...traces, quotaMonthTrace]) {
      trace.times.forEach((t, i) => {
        expect(Number.isInteger(t)).toBe(true)
        if (i > 0) expect(t).toBeGreaterThan(trace.times[i - 1]!)
      })
      expect(trace.times[0]!).toBeGreaterThanOrEqual(trace.fromMs)
      expect(trace.times.at(-1)!).toBeLessThanOrEqual(trace.toMs)
    }
  })

  it('the committed pictures in docs/visualize are up to date (run `pnpm visualize` to redraw)', async () => {
    for (const { file, svg } of await pictures()) {
      const committed = readFileSync(new URL(`../docs/visualize/${file}`, import.meta.url), 'utf8')
      expect(committed, `docs/visualize/${file} is stale: run pnpm visualize`).toBe(svg)
    }
  })

  describe('a month of quotas', () => {
    const CALL =
      /<g class="call" data-rule="([^"]+)" data-t="(\d+)" data-allowed="(true|false)" data-seen="(\d+)"><title>[^<]*<\/title><(circle|path) /g
    const EDGE = /<g class="edge" data-at="(\d+)">/g
    /** The lane of `rule` in the picture. */
    const laneOf = (svg: string, rule: string) => {
      const start = svg.indexOf(`<g class="lane" data-rule="${rule}">`)
      expect(start).toBeGreaterThan(-1)
      return svg.slice(start, svg.indexOf('\n</g>', start))
    }
    /** The wall clock of `zone` at `t`: weekday, day of the month, hour and minute. */
    const wall = (zone: string, t: number) => {
      const parts = new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        weekday: 'short',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        hourCycle: 'h23',
      }).formatToParts(t)
      const part = (type: string) => parts.find((p) => p.type === type)!.value
      return { weekday: part('weekday'), day: Number(part('day')), time: `${part('hour')}:${part('minute')}` }
    }

    it("every mark is the limiter's decision, and a quota admits no more than its limit in a period", async () => {
      const svg = renderCalendar(quotaMonthTrace, await runLanes(quotaMonthTrace))
      expect(svg.split('class="call"').length - 1).toBe(quotaMonthTrace.times.length * quotaLanes.length)
      const admitted: number[] = []
      for (const lane of quotaLanes) {
        const text = formatRuleSpec(lane.rule)
        const ds = await decisions(quotaMonthTrace, lane)
        const drawn = [...laneOf(svg, text).matchAll(CALL)].map((m) => ({
          rule: m[1],
          t: Number(m[2]),
          allowed: m[3] === 'true',
          seen: Number(m[4]),
          shape: m[5],
        }))
        expect(drawn).toEqual(
          ds.map((d, i) => ({
            rule: text,
            t: quotaMonthTrace.times[i]!,
            allowed: d.allowed,
            seen: d.limit - d.remaining,
            shape: d.allowed ? 'circle' : 'path',
          })),
        )
        const count = ds.filter((d) => d.allowed).length
        admitted.push(count)
        expect(laneOf(svg, text)).toContain(`admitted ${count} of ${quotaMonthTrace.times.length}</text>`)
        // The densest period holds the limit, never more.
        expect(laneOf(svg, text)).toContain(
          `most in one period: ${(lane.rule as { limit: number }).limit}</text>`,
        )
      }
      // The figures docs/visualize/README.md quotes: October's 150 run out on 21 October, and every call
      // after is denied until November starts in Berlin.
      expect(quotaMonthTrace.times).toHaveLength(322)
      expect(admitted).toEqual([240, 248, 251])
      const month = await decisions(quotaMonthTrace, quotaLanes[2]!)
      const firstDenied = month.findIndex((d) => !d.allowed)
      expect(new Date(quotaMonthTrace.times[firstDenied]!).toISOString().slice(0, 10)).toBe('2026-10-21')
      const november = Date.parse('2026-10-31T23:00:00Z')
      month.forEach((d, i) => {
        const t = quotaMonthTrace.times[i]!
        expect(d.allowed).toBe(i < firstDenied || t >= november)
      })
    })

    it("draws each quota's edges at its own zone's calendar edges", async () => {
      const svg = renderCalendar(quotaMonthTrace, await runLanes(quotaMonthTrace))
      const edgesOf = (rule: string) => [...laneOf(svg, rule).matchAll(EDGE)].map((m) => Number(m[1]))
      const berlinWeeks = edgesOf('quota:40/week@@Europe/Berlin')
      expect(berlinWeeks.map((t) => wall('Europe/Berlin', t))).toEqual(
        [5, 12, 19, 26, 2, 9].map((day) => ({ weekday: 'Mon', day, time: '00:00' })),
      )
      // Central European summer time ends on 25 October: the Monday before starts at 22:00 UTC, the one
      // after at 23:00 UTC, a week of 169 hours between.
      expect(berlinWeeks.map((t) => new Date(t).toISOString())).toEqual([
        '2026-10-04T22:00:00.000Z',
        '2026-10-11T22:00:00.000Z',
        '2026-10-18T22:00:00.000Z',
        '2026-10-25T23:00:00.000Z',
        '2026-11-01T23:00:00.000Z',
        '2026-11-08T23:00:00.000Z',
      ])
      expect(edgesOf('quota:40/week-sun@@America/New_York').map((t) => wall('America/New_York', t))).toEqual(
        [4, 11, 18, 25, 1, 8].map((day) => ({ weekday: 'Sun', day, time: '00:00' })),
      )
      expect(edgesOf('quota:150/month@@Europe/Berlin').map((t) => new Date(t).toISOString())).toEqual([
        '2026-09-30T22:00:00.000Z',
        '2026-10-31T23:00:00.000Z',
      ])
    })
  })
})
