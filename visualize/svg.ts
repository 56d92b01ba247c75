/**
 * @module Draws one trace's lanes as a hand-written SVG string: pure, no I/O, no dependencies.
 * Each call is one `<g class="call">` carrying its decision in `data-` attributes, so tests (and
 * anyone curious) can read exactly what the picture shows. Numbers are rounded to 0.1 px and nothing
 * depends on the date or the machine, so the same runs always give the same bytes.
 */
import type { LaneRun, Mark } from './run.ts'
import type { Trace } from './traces.ts'

/** Every lane's rule allows this many units a second; a denser second gets a highlighted band. */
export const UNITS_PER_SECOND = 5
/** The span the densest-stretch figure counts over, ms. */
export const SPAN_MS = 1000

const WIDTH = 1200
const PLOT_LEFT = 236
const PLOT_RIGHT = 1168
const LANES_TOP = 118
const LANE_HEIGHT = 122
/** Within a lane: the fill chart's top and height, and the row the call marks sit on. */
const CHART_TOP = 14
const CHART_HEIGHT = 54
const MARK_ROW = 86
/** Tracks for queued calls' waits, below the mark row. */
const WAIT_TRACK_TOP = 10
const WAIT_TRACK_GAP = 6
const FOOTER_HEIGHT = 74

/** Okabe–Ito colours: told apart with every common kind of colour blindness. */
export const COLOR = {
  admitted: '#009E73',
  queued: '#0072B2',
  denied: '#D55E00',
  fill: '#56B4E9',
  fillLine: '#2F86BE',
  dense: '#E69F00',
  ink: '#1F2933',
  muted: '#5B6770',
  faint: '#E4E8EC',
  edge: '#8E99A4',
  background: '#FCFCFD',
  chart: '#F1F4F7',
}

export const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

/** The densest stretch of `SPAN_MS`: most admitted calls proceeding within it, and where it starts. */
export interface Densest {
  readonly count: number
  readonly fromMs: number
}

/**
 * The most admitted calls that proceed (arrival plus wait) within any half-open `SPAN_MS`, counted
 * from the marks alone, and the first stretch that holds that many.
 */
export function densest(marks: readonly Mark[]): Densest {
  const passes = marks
    .filter((m) => m.allowed)
    .map((m) => m.t + m.waitMs)
    .sort((a, b) => a - b)
  let best: Densest = { count: 0, fromMs: 0 }
  let j = 0
  for (let i = 0; i < passes.length; i++) {
    if (j < i) j = i
    while (j + 1 < passes.length && passes[j + 1]! < passes[i]! + SPAN_MS) j++
    if (j - i + 1 > best.count) best = { count: j - i + 1, fromMs: passes[i]! }
  }
  return best
}

/** The picture of `runs` (one per lane) of `trace`. */
export function renderTrace(trace: Trace, runs: readonly LaneRun[]): string {
  const height = LANES_TOP + runs.length * LANE_HEIGHT + FOOTER_HEIGHT
  const x = (t: number) =>
    PLOT_LEFT + ((t - trace.fromMs) / (trace.toMs - trace.fromMs)) * (PLOT_RIGHT - PLOT_LEFT)
  const lanesBottom = LANES_TOP + runs.length * LANE_HEIGHT
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" font-family="${FONT}" role="img" aria-labelledby="title-${trace.id} desc-${trace.id}">`,
    `<title id="title-${trace.id}">sluice: ${esc(trace.title)}</title>`,
    `<desc id="desc-${trace.id}">${esc(trace.subtitle)}. One row per algorithm; every mark is a decision of the sluice limiter.</desc>`,
    `<defs><clipPath id="plot-${trace.id}"><rect x="${PLOT_LEFT - 8}" y="${LANES_TOP}" width="${PLOT_RIGHT - PLOT_LEFT + 16}" height="${lanesBottom - LANES_TOP}"/></clipPath></defs>`,
    `<rect width="${WIDTH}" height="${height}" fill="${COLOR.background}"/>`,
    `<text x="32" y="40" font-size="23" font-weight="700" fill="${COLOR.ink}">${esc(trace.title)}</text>`,
    `<text x="32" y="64" font-size="14.5" fill="${COLOR.muted}">${esc(trace.subtitle)}</text>`,
    legend(32, 96),
    grid(trace, x, LANES_TOP, lanesBottom),
  ]
  runs.forEach((run, i) => {
    out.push(lane(trace, run, x, LANES_TOP + i * LANE_HEIGHT))
  })
  out.push(axis(trace, x, lanesBottom))
  out.push(
    `<text x="32" y="${height - 18}" font-size="12.5" fill="${COLOR.muted}">Every mark is a real decision: createLimiter on a MemoryStore with a manual clock, one fresh limiter per row. Fill is the rule's limit − remaining after each call, held until the next call.</text>`,
    '</svg>',
    '',
  )
  return out.join('\n')
}

/** Faint lines every 500 ms and a dashed one at every fixed-window edge, behind every lane. */
function grid(trace: Trace, x: (t: number) => number, top: number, bottom: number): string {
  const lines: string[] = ['<g class="grid">']
  for (let t = Math.ceil(trace.fromMs / 500) * 500; t <= trace.toMs; t += 500) {
    const edge = t % SPAN_MS === 0
    lines.push(
      `<line x1="${n(x(t))}" y1="${top}" x2="${n(x(t))}" y2="${bottom}" stroke="${edge ? COLOR.edge : COLOR.faint}" stroke-width="${edge ? 1.2 : 1}"${edge ? ' stroke-dasharray="5 4"' : ''}/>`,
    )
  }
  lines.push('</g>')
  return lines.join('\n')
}

/** The time axis under the last lane: minor ticks every 100 ms, labels every 500 ms. */
function axis(trace: Trace, x: (t: number) => number, y: number): string {
  const parts: string[] = [
    '<g class="axis">',
    `<line x1="${PLOT_LEFT}" y1="${y}" x2="${PLOT_RIGHT}" y2="${y}" stroke="${COLOR.ink}" stroke-width="1"/>`,
  ]
  for (let t = Math.ceil(trace.fromMs / 100) * 100; t <= trace.toMs; t += 100) {
    const major = t % 500 === 0
    parts.push(
      `<line x1="${n(x(t))}" y1="${y}" x2="${n(x(t))}" y2="${y + (major ? 7 : 4)}" stroke="${COLOR.ink}" stroke-width="1"/>`,
    )
    if (major) {
      parts.push(
        `<text x="${n(x(t))}" y="${y + 23}" font-size="13" fill="${COLOR.ink}" text-anchor="middle">${seconds(t)}</text>`,
      )
    }
  }
  parts.push(`<text x="32" y="${y + 23}" font-size="13" fill="${COLOR.muted}">time</text>`, '</g>')
  return parts.join('\n')
}

/** One algorithm's row: its name and totals, the fill chart, the densest stretch, and one mark per call. */
function lane(trace: Trace, run: LaneRun, x: (t: number) => number, top: number): string {
  const { lane, marks } = run
  const admitted = marks.filter((m) => m.allowed).length
  const dense = densest(marks)
  const tooDense = dense.count > UNITS_PER_SECOND
  const limit = marks[0]?.limit ?? 1
  const chartTop = top + CHART_TOP
  const chartBottom = chartTop + CHART_HEIGHT
  const y = (seen: number) => chartBottom - (Math.min(seen, limit) / limit) * CHART_HEIGHT
  const row = top + MARK_ROW
  const parts: string[] = [`<g class="lane" data-rule="${lane.kind}">`]

  if (top > LANES_TOP) {
    parts.push(`<line x1="32" y1="${top}" x2="${PLOT_RIGHT}" y2="${top}" stroke="${COLOR.faint}"/>`)
  }
  parts.push(
    `<text x="32" y="${top + 30}" font-size="16" font-weight="700" fill="${COLOR.ink}">${lane.kind}</text>`,
    `<text x="32" y="${top + 48}" font-size="13" fill="${COLOR.muted}">${esc(lane.detail)}</text>`,
    `<text x="32" y="${top + 65}" font-size="12" fill="${COLOR.fillLine}">fill: ${esc(lane.fill)}</text>`,
    `<text x="32" y="${top + 88}" font-size="13" fill="${COLOR.ink}">admitted ${admitted} of ${marks.length}</text>`,
    `<text x="32" y="${top + 106}" font-size="13" fill="${tooDense ? COLOR.denied : COLOR.ink}"${tooDense ? ' font-weight="700"' : ''}>most in any 1 s: ${dense.count}</text>`,
  )

  if (tooDense) {
    const from = Math.max(x(dense.fromMs), PLOT_LEFT)
    const to = Math.min(x(dense.fromMs + SPAN_MS), PLOT_RIGHT)
    parts.push(
      `<rect class="densest" x="${n(from)}" y="${top + 4}" width="${n(to - from)}" height="${LANE_HEIGHT - 8}" rx="4" fill="${COLOR.dense}" fill-opacity="0.13" stroke="${COLOR.dense}" stroke-opacity="0.7" stroke-dasharray="3 3"/>`,
      `<text x="${n(to - 6)}" y="${top + LANE_HEIGHT - 10}" font-size="12" font-weight="700" fill="#8A5A00" text-anchor="end">${dense.count} admitted within 1 s</text>`,
    )
  }

  // The fill chart: limit − remaining after each call, held until the next call.
  parts.push(
    `<rect x="${PLOT_LEFT}" y="${chartTop}" width="${PLOT_RIGHT - PLOT_LEFT}" height="${CHART_HEIGHT}" fill="${COLOR.chart}" fill-opacity="0.6"/>`,
    `<line x1="${PLOT_LEFT}" y1="${chartTop}" x2="${PLOT_RIGHT}" y2="${chartTop}" stroke="${COLOR.muted}" stroke-width="1" stroke-dasharray="2 3"/>`,
    `<text x="${PLOT_LEFT - 8}" y="${chartTop + 4}" font-size="11.5" fill="${COLOR.muted}" text-anchor="end">${limit}</text>`,
    `<text x="${PLOT_LEFT - 8}" y="${chartBottom + 4}" font-size="11.5" fill="${COLOR.muted}" text-anchor="end">0</text>`,
  )
  const step = stepPoints(trace, marks, x, y, chartBottom)
  parts.push(
    `<polygon class="fill" points="${step} ${n(PLOT_RIGHT)},${n(chartBottom)} ${n(PLOT_LEFT)},${n(chartBottom)}" fill="${COLOR.fill}" fill-opacity="0.3"/>`,
    `<polyline points="${step}" fill="none" stroke="${COLOR.fillLine}" stroke-width="1.6" stroke-linejoin="round"/>`,
  )

  // Marks: waits first, so arrival symbols sit on top of them.
  parts.push(waits(marks, x, row, `plot-${trace.id}`))
  for (const m of marks) parts.push(callMark(lane.kind, m, x, row))
  parts.push('</g>')
  return parts.join('\n')
}

/** Polyline points of the fill as a step: 0 until the first call, then each call's value until the next. */
function stepPoints(
  trace: Trace,
  marks: readonly Mark[],
  x: (t: number) => number,
  y: (seen: number) => number,
  bottom: number,
): string {
  const points: string[] = [`${n(PLOT_LEFT)},${n(bottom)}`]
  let level = bottom
  for (const m of marks) {
    if (m.t < trace.fromMs || m.t > trace.toMs) continue
    const px = n(x(m.t))
    points.push(`${px},${n(level)}`)
    level = y(m.seen)
    points.push(`${px},${n(level)}`)
  }
  points.push(`${n(PLOT_RIGHT)},${n(level)}`)
  return points.join(' ')
}

/**
 * Queued calls' waits, like a Gantt chart: from each arrival a line drops to a free track under the
 * marks and runs to the moment the call may proceed, where a tick ends it. Tracks are handed out
 * first come, first served, so waits that overlap in time never share one. Clipped to the plot.
 */
function waits(marks: readonly Mark[], x: (t: number) => number, row: number, clipId: string): string {
  const trackEnds: number[] = []
  const parts: string[] = [`<g class="waits" clip-path="url(#${clipId})">`]
  for (const m of marks) {
    if (!m.allowed || m.waitMs === 0) continue
    const pass = m.t + m.waitMs
    // A track is free once its last wait has ended a few pixels before this one starts.
    let track = trackEnds.findIndex((end) => x(end) + 5 <= x(m.t))
    if (track === -1) track = trackEnds.length
    trackEnds[track] = pass
    const y = row + WAIT_TRACK_TOP + track * WAIT_TRACK_GAP
    parts.push(
      `<path d="M${n(x(m.t))},${n(row)} V${n(y)} H${n(x(pass))}" fill="none" stroke="${COLOR.queued}" stroke-width="1.6" stroke-opacity="0.85"/>`,
      `<line x1="${n(x(pass))}" y1="${n(y - 4)}" x2="${n(x(pass))}" y2="${n(y + 4)}" stroke="${COLOR.queued}" stroke-width="2.2"/>`,
    )
  }
  parts.push('</g>')
  return parts.join('\n')
}

/** One call: a filled dot when admitted (blue when it must wait), a red × when denied. */
function callMark(rule: string, m: Mark, x: (t: number) => number, row: number): string {
  const cx = n(x(m.t))
  const cy = n(row)
  const data = `data-rule="${rule}" data-t="${m.t}" data-allowed="${m.allowed}" data-wait="${m.waitMs}" data-seen="${m.seen}"`
  let shape: string
  let what: string
  if (!m.allowed) {
    const r = 4.2
    shape = `<path d="M${n(x(m.t) - r)},${n(row - r)} L${n(x(m.t) + r)},${n(row + r)} M${n(x(m.t) - r)},${n(row + r)} L${n(x(m.t) + r)},${n(row - r)}" stroke="${COLOR.denied}" stroke-width="2.2" stroke-linecap="round"/>`
    what = `denied, retry after ${m.retryAfterMs} ms`
  } else if (m.waitMs > 0) {
    shape = `<circle cx="${cx}" cy="${cy}" r="4.6" fill="${COLOR.queued}" stroke="${COLOR.background}" stroke-width="1"/>`
    what = `admitted, waits ${m.waitMs} ms and proceeds at ${m.t + m.waitMs} ms`
  } else {
    shape = `<circle cx="${cx}" cy="${cy}" r="4.6" fill="${COLOR.admitted}" stroke="${COLOR.background}" stroke-width="1"/>`
    what = 'admitted'
  }
  return `<g class="call" ${data}><title>${rule} at ${m.t} ms: ${what}; remaining ${m.remaining} of ${m.limit}</title>${shape}</g>`
}

/** The key to every symbol, in one row. */
function legend(left: number, y: number): string {
  const items: string[] = []
  let at = left
  const item = (symbol: string, label: string, width: number, textAt = 20) => {
    items.push(
      `<g transform="translate(${at} ${y})">${symbol}<text x="${textAt}" y="4.5" font-size="13" fill="${COLOR.ink}">${esc(label)}</text></g>`,
    )
    at += width
  }
  item(`<circle cx="6" cy="0" r="4.6" fill="${COLOR.admitted}"/>`, 'admitted', 112)
  item(
    `<path d="M5,0 V7 H26" fill="none" stroke="${COLOR.queued}" stroke-width="1.6"/><line x1="26" y1="3" x2="26" y2="11" stroke="${COLOR.queued}" stroke-width="2.2"/><circle cx="5" cy="0" r="4.6" fill="${COLOR.queued}"/>`,
    'admitted, held until the tick',
    258,
    34,
  )
  item(
    `<path d="M2,-4.2 L10.4,4.2 M2,4.2 L10.4,-4.2" stroke="${COLOR.denied}" stroke-width="2.2" stroke-linecap="round"/>`,
    'denied',
    96,
  )
  item(
    `<rect x="0" y="-7" width="14" height="14" fill="${COLOR.fill}" fill-opacity="0.35" stroke="${COLOR.fillLine}" stroke-width="1.4"/>`,
    'fill after each call (limit − remaining)',
    292,
  )
  item(
    `<line x1="7" y1="-8" x2="7" y2="8" stroke="${COLOR.edge}" stroke-width="1.2" stroke-dasharray="4 3"/>`,
    'window edge',
    128,
  )
  item(
    `<rect x="0" y="-7" width="14" height="14" rx="2" fill="${COLOR.dense}" fill-opacity="0.13" stroke="${COLOR.dense}" stroke-dasharray="3 3"/>`,
    `more than ${UNITS_PER_SECOND} in 1 s`,
    0,
  )
  return `<g class="legend">${items.join('')}</g>`
}

/** `1500` → `"1.5 s"`. */
function seconds(ms: number): string {
  return `${ms / 1000} s`
}

/** A coordinate rounded to 0.1 px, printed without a trailing `.0`. */
export function n(v: number): string {
  return String(Math.round(v * 10) / 10)
}

export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}
