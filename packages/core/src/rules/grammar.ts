/**
 * @module The pieces every rule kind's text form is written with: numbers, durations and rates, read and
 * written the same way for every kind (see text.ts for the grammar, and each kind's entry for its form).
 */

export const INTEGER = '-?\\d+'
export const DECIMAL = '\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?'
export const DURATION = '(?:\\d+(?:\\.\\d+)?)?(?:ms|s|m|h|d)'

/** `LIMIT/WINDOW[/BUCKETS]`: the counting kinds' text, and a bare rate's. */
export const WINDOW = new RegExp(`^(${INTEGER})/(${DURATION})(?:/(\\d+))?$`)

/**
 * The text form of a kind counted in one window, `KIND:LIMIT/WINDOW` (fixedWindow, slidingLog): a body
 * with buckets is not of this form.
 */
export function limitPerWindowText(form: string): {
  readonly form: string
  read(body: string): { limit: number; windowMs: number } | undefined
  write(rule: { readonly limit: number; readonly windowMs: number }): string
} {
  return {
    form,
    read(body) {
      const m = WINDOW.exec(body)
      if (m === null || m[3] !== undefined) return undefined
      return { limit: Number(m[1]), windowMs: parseDuration(m[2]!) }
    },
    write: (rule) => `${rule.limit}/${formatDuration(rule.windowMs)}`,
  }
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
/** Units from the largest, for writing a duration as the largest unit it is a whole number of. */
const UNITS_DOWN = ['d', 'h', 'm', 's'] as const

/** Whole ms as the largest unit they are a whole number of: `1h`, `90s`, `1500ms`. */
export function formatDuration(ms: number): string {
  for (const unit of UNITS_DOWN) {
    if (ms % UNIT_MS[unit]! === 0) return `${ms / UNIT_MS[unit]!}${unit}`
  }
  return `${ms}ms`
}

/** A duration's ms: `250ms`, `1s`, `s`, `1.5m`. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)?(ms|s|m|h|d)$/.exec(text)!
  const unit = UNIT_MS[match[2]!]!
  if (match[1] === undefined) return unit
  const count = Number(match[1])
  // A whole count is exact as it is; 1.5s is 1500 ms once the float's error is rounded away (a factory
  // refuses what is still a fraction of a ms).
  return Number.isInteger(count) ? count * unit : Math.round(count * unit * 1e6) / 1e6
}

/** Units per second from "COUNT per DURATION": `10/s` is 10 exactly, `600/1m` is 10. */
export function perSecond(count: string, per: string): number {
  const ms = parseDuration(per)
  return ms === 1000 ? Number(count) : (Number(count) * 1000) / ms
}

/** A meter's longest wait as the `~WAIT` suffix, or nothing for none. */
export function queueText(maxQueueMs: number): string {
  return maxQueueMs === 0 ? '' : `~${formatDuration(maxQueueMs)}`
}
