/**
 * @module Rule specs as an operator types them on a command line, parsed into the specs `ruleFromSpec`
 * takes. One grammar, one place:
 *
 * ```
 * fixedWindow:1000/1h        1000 per aligned hour
 * slidingLog:100/1s          100 in any second, exactly
 * slidingWindow:600/1m       600 per minute in 10 buckets (the default)
 * slidingWindow:600/1m/6     ... in 6 buckets
 * tokenBucket:50+10/s        capacity 50, refilled 10 a second (+600/1m is the same refill)
 * leakyBucket:5/s            5 a second, no queue (a strict meter)
 * leakyBucket:5/s~2s         5 a second, a call may wait up to 2 s for its turn
 * slidingLog:100/1s@burst    any of these with a name (needed to tell apart two rules of one kind and window)
 * -1                         not limited
 * {"kind":"slidingLog","limit":100,"windowMs":1000}    JSON: one spec, or a list of them
 * ```
 *
 * A duration is an optional number and a unit: `ms`, `s`, `m`, `h`, `d` (`s` alone is `1s`). Text that
 * does not parse throws `InvalidSpecError` (`ERR_SLUICE_INVALID_SPEC`) saying what was expected; the
 * numbers are then checked by the factories (`InvalidOptionError`, `ERR_SLUICE_INVALID_OPTION`).
 */
import { InvalidSpecError, type RuleSpec } from '@sluice/core'

const NUMBER = '-?\\d+(?:\\.\\d+)?'
const DURATION = '(?:\\d+(?:\\.\\d+)?)?(?:ms|s|m|h|d)'
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

const WINDOW = new RegExp(`^(${NUMBER})/(${DURATION})$`)
const BUCKETED = new RegExp(`^(${NUMBER})/(${DURATION})/(\\d+)$`)
const TOKENS = new RegExp(`^(${NUMBER})\\+(${NUMBER})/(${DURATION})$`)
const LEAKY = new RegExp(`^(${NUMBER})/(${DURATION})(?:~(${DURATION}))?$`)

/** What each kind's text looks like, for error messages. */
export const SPEC_FORMS: Readonly<Record<string, string>> = {
  fixedWindow: 'fixedWindow:LIMIT/WINDOW, e.g. fixedWindow:1000/1h',
  slidingLog: 'slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s',
  slidingWindow: 'slidingWindow:LIMIT/WINDOW[/BUCKETS], e.g. slidingWindow:600/1m/10',
  tokenBucket: 'tokenBucket:CAPACITY+REFILL/PER, e.g. tokenBucket:50+10/s',
  leakyBucket: 'leakyBucket:RATE/PER[~MAXQUEUE], e.g. leakyBucket:5/s~2s',
}

const EXPECTED = `-1, JSON, or KIND:NUMBERS[@NAME] with one of: ${Object.values(SPEC_FORMS).join('; ')}`

/** A duration in ms: `250ms`, `1s`, `s`, `1.5m`. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)?(ms|s|m|h|d)$/.exec(text)
  if (match === null) throw new InvalidSpecError(text, 'a duration such as 250ms, 1s, 5m, 1h or 1d')
  const count = match[1] === undefined ? 1 : Number(match[1])
  // 1.5s is 1500 ms exactly; a factory rejects a fraction of a ms where it needs whole ones.
  return Math.round(count * UNIT_MS[match[2]!]! * 1e6) / 1e6
}

/**
 * One command-line spec as the specs it stands for: one rule spec, or several for a JSON list. `-1` and
 * JSON `null` stand for "not limited" (`{ kind: 'unlimited' }`).
 */
export function parseSpec(text: string): RuleSpec[] {
  const trimmed = text.trim()
  if (trimmed === '-1' || trimmed === 'null') return [{ kind: 'unlimited' }]
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    let value: unknown
    try {
      value = JSON.parse(trimmed)
    } catch (error) {
      throw new InvalidSpecError(text, `valid JSON (${(error as Error).message})`)
    }
    return (Array.isArray(value) ? value : [value]) as RuleSpec[]
  }
  const colon = trimmed.indexOf(':')
  if (colon < 0) throw new InvalidSpecError(text, EXPECTED)
  const kind = trimmed.slice(0, colon)
  let body = trimmed.slice(colon + 1)
  let name: string | undefined
  const at = body.indexOf('@')
  if (at >= 0) {
    name = body.slice(at + 1)
    body = body.slice(0, at)
  }
  const spec = specOf(kind, body, text)
  return [name === undefined ? spec : ({ ...spec, name } as RuleSpec)]
}

function specOf(kind: string, body: string, text: string): RuleSpec {
  const form = SPEC_FORMS[kind]
  if (form === undefined || !Object.hasOwn(SPEC_FORMS, kind)) {
    throw new InvalidSpecError(text, `a known kind (${Object.keys(SPEC_FORMS).join(', ')}): ${EXPECTED}`)
  }
  const fail = () => new InvalidSpecError(text, form)
  switch (kind) {
    case 'fixedWindow':
    case 'slidingLog': {
      const m = WINDOW.exec(body)
      if (m === null) throw fail()
      return { kind, limit: Number(m[1]), windowMs: parseDuration(m[2]!) }
    }
    case 'slidingWindow': {
      const m = BUCKETED.exec(body) ?? WINDOW.exec(body)
      if (m === null) throw fail()
      const spec = { kind, limit: Number(m[1]), windowMs: parseDuration(m[2]!) } as const
      return m[3] === undefined ? spec : { ...spec, buckets: Number(m[3]) }
    }
    case 'tokenBucket': {
      const m = TOKENS.exec(body)
      if (m === null) throw fail()
      return {
        kind,
        capacity: Number(m[1]),
        refillPerSecond: (Number(m[2]) * 1000) / parseDuration(m[3]!),
      }
    }
    default: {
      const m = LEAKY.exec(body)
      if (m === null) throw fail()
      const spec = {
        kind: 'leakyBucket',
        ratePerSecond: (Number(m[1]) * 1000) / parseDuration(m[2]!),
      } as const
      return m[3] === undefined ? spec : { ...spec, maxQueueMs: parseDuration(m[3]) }
    }
  }
}

/** Every spec of a `set` command line, in order. */
export function parseSpecs(texts: readonly string[]): RuleSpec[] {
  return texts.flatMap(parseSpec)
}
