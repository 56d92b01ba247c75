/**
 * @module Every picture the visualiser draws: each trace run through every lane, rendered (the month of
 * quotas by calendar.ts, on a calendar's scale).
 * The launcher (`main.mjs`) writes these to `docs/visualize/`; the test renders them again and
 * compares, so the committed pictures cannot drift from the limiter.
 */
import { renderCalendar } from './calendar.ts'
import { runLanes } from './run.ts'
import { renderTrace } from './svg.ts'
import { quotaMonthTrace, traces } from './traces.ts'

/** One SVG file: its name in `docs/visualize/` and its text. */
export interface Picture {
  readonly file: string
  readonly svg: string
}

export async function pictures(): Promise<Picture[]> {
  const out: Picture[] = []
  for (const trace of traces)
    out.push({ file: `${trace.id}.svg`, svg: renderTrace(trace, await runLanes(trace)) })
  const month = quotaMonthTrace
  out.push({ file: `${month.id}.svg`, svg: renderCalendar(month, await runLanes(month)) })
  return out
}
