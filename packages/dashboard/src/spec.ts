/**
 * @module What a table edit may carry: a list of rule specs (`{ kind, ...the factory's options }`), each
 * possibly written in the short form people type (`slidingLog:100/1s`), or `null` for "not limited".
 * Only the shape is checked here; the table checks every spec with the rule factories' own coded errors
 * before it writes anything.
 */
import { InvalidOptionError } from '@sluice/core'

/** A rule as data: `{ kind: 'slidingLog', limit: 100, windowMs: 1000 }`. */
export interface RuleSpec {
  kind: string
  [option: string]: unknown
}

/** Rules per entry, at most: a table entry is a handful of rules, never a payload. */
export const MAX_RULES_PER_ENTRY = 16

const SHORT_FORMS =
  'a rule spec object ({ "kind": "slidingLog", "limit": 100, "windowMs": 1000 }) or a short form: ' +
  'slidingLog:100/1s, slidingWindow:1000/1m, fixedWindow:1000/1h, tokenBucket:50+10/s, leakyBucket:2/s~2s'

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION = /^(\d+(?:\.\d+)?)?(ms|s|m|h|d)$/
const WINDOWED = new Set(['fixedWindow', 'slidingLog', 'slidingWindow'])

/** `1s`, `500ms`, `m` (one minute) in ms, or undefined. */
function duration(text: string): number | undefined {
  const match = DURATION.exec(text)
  if (match === null) return undefined
  const ms = Number(match[1] ?? '1') * UNITS[match[2]!]!
  return Number.isFinite(ms) ? ms : undefined
}

/** A number as written in a short form (`100`, `2.5`), or undefined. */
function amount(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+(?:\.\d+)?$/.test(text)) return undefined
  return Number(text)
}

/**
 * The spec a short form stands for, or undefined when `text` is not one:
 * `KIND:LIMIT/WINDOW` for fixedWindow, slidingLog and slidingWindow; `tokenBucket:CAPACITY+REFILL/PERIOD`;
 * `leakyBucket:RATE/PERIOD` with an optional `~MAXQUEUE`. Periods and windows are durations (`1s`,
 * `500ms`, `10m`, `h`); a refill or rate per period is converted to per second.
 */
export function parseShortSpec(text: string): RuleSpec | undefined {
  const colon = text.indexOf(':')
  if (colon < 0) return undefined
  const kind = text.slice(0, colon)
  const rest = text.slice(colon + 1)
  if (WINDOWED.has(kind)) {
    const [limit, window, extra] = rest.split('/')
    const windowMs = window === undefined ? undefined : duration(window)
    if (extra !== undefined || amount(limit) === undefined || windowMs === undefined) return undefined
    return { kind, limit: amount(limit), windowMs }
  }
  if (kind === 'tokenBucket') {
    const match = /^(\d+)\+([\d.]+)\/(\w+)$/.exec(rest)
    const periodMs = match === null ? undefined : duration(match[3]!)
    const refill = amount(match?.[2])
    if (match === null || periodMs === undefined || refill === undefined) return undefined
    return { kind, capacity: Number(match[1]), refillPerSecond: (refill * 1000) / periodMs }
  }
  if (kind === 'leakyBucket') {
    const match = /^([\d.]+)\/(\w+)(?:~(\w+))?$/.exec(rest)
    const periodMs = match === null ? undefined : duration(match[2]!)
    const rate = amount(match?.[1])
    const queueMs = match?.[3] === undefined ? 0 : duration(match[3])
    if (match === null || periodMs === undefined || rate === undefined || queueMs === undefined) {
      return undefined
    }
    return { kind, ratePerSecond: (rate * 1000) / periodMs, maxQueueMs: queueMs }
  }
  return undefined
}

/**
 * Reads an edit's body: `null`, or a list of up to 16 specs, each an object with a string `kind` or a
 * short form. Throws `InvalidOptionError` (`ERR_SLUICE_INVALID_OPTION`) naming the offending item.
 */
export function readRuleSpecs(body: unknown): RuleSpec[] | null {
  if (body === null) return null
  if (!Array.isArray(body)) {
    throw new InvalidOptionError('rules', body, `null, or a list of rule specs: ${SHORT_FORMS}`)
  }
  if (body.length > MAX_RULES_PER_ENTRY) {
    throw new InvalidOptionError('rules', body, `at most ${MAX_RULES_PER_ENTRY} rules`)
  }
  return body.map((item: unknown, i) => {
    if (typeof item === 'string') {
      const spec = parseShortSpec(item.trim())
      if (spec === undefined) throw new InvalidOptionError(`rules[${i}]`, item, SHORT_FORMS)
      return spec
    }
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new InvalidOptionError(`rules[${i}]`, item, SHORT_FORMS)
    }
    const spec = item as Record<string, unknown>
    if (typeof spec.kind !== 'string') {
      throw new InvalidOptionError(
        `rules[${i}].kind`,
        spec.kind,
        'the name of a rule factory, e.g. "slidingLog"',
      )
    }
    return { ...spec } as RuleSpec
  })
}
