/**
 * @module Draws a trace of calls against calendar quotas, weeks long, as a hand-written SVG string: one row
 * per quota, with its own period edges (from core's `quotaPeriod`, in the rule's time zone), its count
 * through each period and one mark per call. Like svg.ts, each call is a `<g class="call">` carrying its
 * decision in `data-` attributes, and each edge a `<g class="edge">` carrying its instant, so tests read
 * exactly what the picture shows. Pure: the same runs always give the same bytes.
 */
import { formatRuleSpec, type QuotaRule, quotaPeriod } from '../packages/core/src/index.ts'
import type { LaneRun, Mark } from './run.ts'
import { COLOR, esc, FONT, n } from './svg.ts'
import type { Trace } from './traces.ts'

const WIDTH = 1200
const PLOT_LEFT = 346
const PLOT_RIGHT = 1160
const LANES_TOP = 118
const LANE_HEIGHT = 132
/** Within a lane: the edges' labels, the count chart's top and height, and the row the call marks sit on. */
const EDGE_LABEL = 14
/** Room an edge's label takes to its right (`Mon, Oct 12, 00:00` at 11 px). */
const EDGE_LABEL_WIDTH = 110
const CHART_TOP = 22
const CHART_HEIGHT = 54
const MARK_ROW = 100
const FOOTER_HEIGHT = 74
const DAY = 86_400_000

/** The axis's dates: `Oct 5`, in UTC. */
const AXIS_DATE = new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', month: 'short', day: 'numeric' })

/** A period edge's label: the rule's wall clock there, `Mon, Oct 5, 00:00`. */
function edgeFormat(timeZone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    weekday: 'short',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  })
}

/** The quota a lane runs. */
function quotaOf(run: LaneRun): QuotaRule {
  const rule = run.lane.rule
  if (rule.kind !== 'quota') throw new Error(`a calendar lane runs a quota, not ${rule.kind}`)
  return rule
}

/** Where `rule`'s periods start within [from, to]: the calendar edges a row draws. */
export function periodEdges(rule: QuotaRule, from: number, to: number): number[] {
  const edges: number[] = []
  let period = quotaPeriod(rule, from)
  if (period.start >= from) edges.push(period.start)
  while (period.end <= to) {
    edges.push(period.end)
    period = quotaPeriod(rule, period.end)
  }
  return edges
}

/** The most calls admitted within one period of `rule`, counted from the marks alone. */
export function mostInOnePeriod(rule: QuotaRule, marks: readonly Mark[]): number {
  const counts = new Map<number, number>()
  for (const m of marks) {
    if (!m.allowed) continue
    const start = quotaPeriod(rule, m.t).start
    counts.set(start, (counts.get(start) ?? 0) + 1)
  }
  return Math.max(0, ...counts.values())
}

/** The picture of `runs` (one per quota) of `trace`. */
export function renderCalendar(trace: Trace, runs: readonly LaneRun[]): string {
  const height = LANES_TOP + runs.length * LANE_HEIGHT + FOOTER_HEIGHT
  const x = (t: number) =>
    PLOT_LEFT + ((t - trace.fromMs) / (trace.toMs - trace.fromMs)) * (PLOT_RIGHT - PLOT_LEFT)
  const lanesBottom = LANES_TOP + runs.length * LANE_HEIGHT
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" font-family="${FONT}" role="img" aria-labelledby="title-${trace.id} desc-${trace.id}">`,
    `<title id="title-${trace.id}">sluice: ${esc(trace.title)}</title>`,
    `<desc id="desc-${trace.id}">${esc(trace.subtitle)}. One row per quota; every mark is a decision of the sluice limiter, every dashed line an edge of the quota's calendar.</desc>`,
    `<rect width="${WIDTH}" height="${height}" fill="${COLOR.background}"/>`,
    `<text x="32" y="40" font-size="23" font-weight="700" fill="${COLOR.ink}">${esc(trace.title)}</text>`,
    `<text x="32" y="64" font-size="14.5" fill="${COLOR.muted}">${esc(trace.subtitle)}</text>`,
    legend(32, 96),
    days(trace, x, LANES_TOP, lanesBottom),
  ]
  runs.forEach((run, i) => {
    out.push(lane(trace, run, x, LANES_TOP + i * LANE_HEIGHT))
  })
  out.push(axis(trace, x, lanesBottom))
  out.push(
    `<text x="32" y="${height - 18}" font-size="12.5" fill="${COLOR.muted}">Every mark is a real decision: createLimiter on a MemoryStore with a manual clock, one fresh limiter per row. Edges are quotaPeriod's, in each rule's zone; the axis is UTC.</text>`,
    '</svg>',
    '',
  )
  return out.join('\n')
}

/** Faint lines at every UTC midnight, behind every lane. */
function days(trace: Trace, x: (t: number) => number, top: number, bottom: number): string {
  const lines: string[] = ['<g class="grid">']
  for (let t = Math.ceil(trace.fromMs / DAY) * DAY; t <= trace.toMs; t += DAY) {
    lines.push(
      `<line x1="${n(x(t))}" y1="${top}" x2="${n(x(t))}" y2="${bottom}" stroke="${COLOR.faint}" stroke-width="1"/>`,
    )
  }
  lines.push('</g>')
  return lines.join('\n')
}

/** The date axis under the last lane: a tick every day, a date every Monday (UTC). */
function axis(trace: Trace, x: (t: number) => number, y: number): string {
  const parts: string[] = [
    '<g class="axis">',
    `<line x1="${PLOT_LEFT}" y1="${y}" x2="${PLOT_RIGHT}" y2="${y}" stroke="${COLOR.ink}" stroke-width="1"/>`,
  ]
  for (let t = Math.ceil(trace.fromMs / DAY) * DAY; t <= trace.toMs; t += DAY) {
    // 1970-01-01 was a Thursday: day 4 of the week counted from Monday = 0.
    const monday = (Math.floor(t / DAY) + 3) % 7 === 0
    parts.push(
      `<line x1="${n(x(t))}" y1="${y}" x2="${n(x(t))}" y2="${y + (monday ? 7 : 4)}" stroke="${COLOR.ink}" stroke-width="1"/>`,
    )
    if (monday) {
      parts.push(
        `<text x="${n(x(t))}" y="${y + 23}" font-size="13" fill="${COLOR.ink}" text-anchor="middle">${AXIS_DATE.format(t)}</text>`,
      )
    }
  }
  parts.push(`<text x="32" y="${y + 23}" font-size="13" fill="${COLOR.muted}">date (UTC)</text>`, '</g>')
  return parts.join('\n')
}

/** One quota's row: its text and totals, its edges, the count chart, and one mark per call. */
function lane(trace: Trace, run: LaneRun, x: (t: number) => number, top: number): string {
  const { lane, marks } = run
  const rule = quotaOf(run)
  const text = formatRuleSpec(rule)
  const admitted = marks.filter((m) => m.allowed).length
  const most = mostInOnePeriod(rule, marks)
  const limit = rule.limit
  const chartTop = top + CHART_TOP
  const chartBottom = chartTop + CHART_HEIGHT
  const y = (seen: number) => chartBottom - (Math.min(seen, limit) / limit) * CHART_HEIGHT
  const row = top + MARK_ROW
  const parts: string[] = [`<g class="lane" data-rule="${esc(text)}">`]

  if (top > LANES_TOP) {
    parts.push(`<line x1="32" y1="${top}" x2="${PLOT_RIGHT}" y2="${top}" stroke="${COLOR.faint}"/>`)
  }
  parts.push(
    `<text x="32" y="${top + 30}" font-size="13" font-weight="700" fill="${COLOR.ink}">${esc(text)}</text>`,
    `<text x="32" y="${top + 48}" font-size="13" fill="${COLOR.muted}">${esc(lane.detail)}</text>`,
    `<text x="32" y="${top + 65}" font-size="12" fill="${COLOR.fillLine}">fill: ${esc(lane.fill)}</text>`,
    `<text x="32" y="${top + 88}" font-size="13" fill="${COLOR.ink}">admitted ${admitted} of ${marks.length}</text>`,
    `<text x="32" y="${top + 106}" font-size="13" fill="${COLOR.ink}">most in one period: ${most}</text>`,
  )

  parts.push(
    `<rect x="${PLOT_LEFT}" y="${chartTop}" width="${PLOT_RIGHT - PLOT_LEFT}" height="${CHART_HEIGHT}" fill="${COLOR.chart}" fill-opacity="0.6"/>`,
    `<line x1="${PLOT_LEFT}" y1="${chartTop}" x2="${PLOT_RIGHT}" y2="${chartTop}" stroke="${COLOR.muted}" stroke-width="1" stroke-dasharray="2 3"/>`,
    // The scale on the right: the rule's text fills the left column.
    `<text x="${PLOT_RIGHT + 6}" y="${chartTop + 4}" font-size="11.5" fill="${COLOR.muted}">${limit}</text>`,
    `<text x="${PLOT_RIGHT + 6}" y="${chartBottom + 4}" font-size="11.5" fill="${COLOR.muted}">0</text>`,
  )

  // The count: 0 from each edge on, then each call's figure until the next call or edge.
  const edges = periodEdges(rule, trace.fromMs, trace.toMs)
  const points: string[] = [`${n(PLOT_LEFT)},${n(chartBottom)}`]
  let level = chartBottom
  let e = 0
  const step = (px: string, to: number) => {
    points.push(`${px},${n(level)}`)
    level = to
    points.push(`${px},${n(level)}`)
  }
  for (const m of marks) {
    while (e < edges.length && edges[e]! <= m.t) step(n(x(edges[e++]!)), chartBottom)
    step(n(x(m.t)), y(m.seen))
  }
  while (e < edges.length) step(n(x(edges[e++]!)), chartBottom)
  points.push(`${n(PLOT_RIGHT)},${n(level)}`)
  parts.push(
    `<polygon class="fill" points="${points.join(' ')} ${n(PLOT_RIGHT)},${n(chartBottom)} ${n(PLOT_LEFT)},${n(chartBottom)}" fill="${COLOR.fill}" fill-opacity="0.3"/>`,
    `<polyline points="${points.join(' ')}" fill="none" stroke="${COLOR.fillLine}" stroke-width="1.4" stroke-linejoin="round"/>`,
  )

  const format = edgeFormat(rule.timeZone)
  for (const edge of edges) {
    const ex = n(x(edge))
    // An edge too near the plot's right end for its label is drawn without one.
    const label =
      x(edge) + EDGE_LABEL_WIDTH <= PLOT_RIGHT
        ? `<text x="${n(x(edge) + 4)}" y="${top + EDGE_LABEL}" font-size="11" fill="${COLOR.muted}">${esc(format.format(edge))}</text>`
        : ''
    parts.push(
      `<g class="edge" data-at="${edge}"><line x1="${ex}" y1="${top + 4}" x2="${ex}" y2="${top + LANE_HEIGHT - 6}" stroke="${COLOR.edge}" stroke-width="1.2" stroke-dasharray="5 4"/>${label}</g>`,
    )
  }

  for (const m of marks) parts.push(callMark(text, m, x, row))
  parts.push('</g>')
  return parts.join('\n')
}

/** One call: a small filled dot when admitted, a small × when denied (weeks of calls share the row). */
function callMark(rule: string, m: Mark, x: (t: number) => number, row: number): string {
  const data = `data-rule="${esc(rule)}" data-t="${m.t}" data-allowed="${m.allowed}" data-seen="${m.seen}"`
  let shape: string
  let what: string
  if (!m.allowed) {
    const r = 3
    shape = `<path d="M${n(x(m.t) - r)},${n(row - r)} L${n(x(m.t) + r)},${n(row + r)} M${n(x(m.t) - r)},${n(row + r)} L${n(x(m.t) + r)},${n(row - r)}" stroke="${COLOR.denied}" stroke-width="1.8" stroke-linecap="round"/>`
    what = `denied, retry after ${Math.round(m.retryAfterMs / 60_000)} min`
  } else {
    shape = `<circle cx="${n(x(m.t))}" cy="${n(row)}" r="3" fill="${COLOR.admitted}" stroke="${COLOR.background}" stroke-width="0.8"/>`
    what = 'admitted'
  }
  const when = new Date(m.t).toISOString().slice(0, 16).replace('T', ' ')
  return `<g class="call" ${data}><title>${esc(rule)} at ${when} UTC: ${what}; remaining ${m.remaining} of ${m.limit}</title>${shape}</g>`
}

/** The key to every symbol, in one row. */
function legend(left: number, y: number): string {
  const items: string[] = []
  let at = left
  const item = (symbol: string, label: string, width: number) => {
    items.push(
      `<g transform="translate(${at} ${y})">${symbol}<text x="20" y="4.5" font-size="13" fill="${COLOR.ink}">${esc(label)}</text></g>`,
    )
    at += width
  }
  item(`<circle cx="6" cy="0" r="4" fill="${COLOR.admitted}"/>`, 'admitted', 112)
  item(
    `<path d="M2,-4 L10,4 M2,4 L10,-4" stroke="${COLOR.denied}" stroke-width="2" stroke-linecap="round"/>`,
    'denied',
    96,
  )
  item(
    `<rect x="0" y="-7" width="14" height="14" fill="${COLOR.fill}" fill-opacity="0.35" stroke="${COLOR.fillLine}" stroke-width="1.4"/>`,
    'units counted in the period (limit − remaining)',
    352,
  )
  item(
    `<line x1="7" y1="-8" x2="7" y2="8" stroke="${COLOR.edge}" stroke-width="1.2" stroke-dasharray="4 3"/>`,
    "a period's edge, in the rule's zone",
    0,
  )
  return `<g class="legend">${items.join('')}</g>`
}
