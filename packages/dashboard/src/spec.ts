/**
 * @module An edit's body as the dashboard's API reads it: `null`, or rule specs and rule text. The text is
 * read by core's one rule grammar (`parseRuleSpec`, `@sluice/core`), which the `sluice` command reads too.
 */
import {
  InvalidOptionError,
  InvalidSpecError,
  parseRuleSpec,
  parseRuleSpecs,
  type RuleSpec,
} from '@sluice/core'
import { TABLE_BOUNDS } from '@sluice/core/store'

const EXPECTED =
  'text such as slidingLog:100/1s, tokenBucket:50+10/s or -1 (see parseRuleSpec in @sluice/core)'

/**
 * One spec as typed, as the specs it stands for.
 *
 * @deprecated Use `parseRuleSpec` (or `parseRuleSpecs`) from `@sluice/core`, which build the rules. Kept for
 *   one release.
 */
export function parseSpec(text: string): RuleSpec[] {
  return parseSpecs([text])
}

/**
 * Every spec of a list as typed, in order.
 *
 * @deprecated Use `parseRuleSpecs` from `@sluice/core`, which builds the rules. Kept for one release.
 */
export function parseSpecs(texts: readonly string[]): RuleSpec[] {
  warnOnce()
  return parseRuleSpecs(texts).map((rule) => JSON.parse(JSON.stringify(rule)) as RuleSpec)
}

/**
 * A duration in ms, as rules as text write one: `250ms`, `1s`, `s`, `1.5m`. Throws `InvalidSpecError` for
 * other text.
 *
 * @deprecated Write the duration inside a rule's text and read it with `parseRuleSpec` from `@sluice/core`.
 *   Kept for one release.
 */
export function parseDuration(text: string): number {
  warnOnce()
  // The grammar's duration as this function read it before (a fraction of a ms included): core reads a
  // duration only inside a rule's text, where a factory then checks it. This copy goes with the deprecation.
  const match = /^(\d+(?:\.\d+)?)?(ms|s|m|h|d)$/.exec(text)
  if (match === null) throw new InvalidSpecError(text, 'a duration such as 250ms, 1s, 5m, 1h or 1d')
  const count = match[1] === undefined ? 1 : Number(match[1])
  return Math.round(count * UNIT_MS[match[2]!]! * 1e6) / 1e6
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * What each kind's text looks like (`fixedWindow:LIMIT/WINDOW, e.g. fixedWindow:1000/1h`), as core's grammar
 * names it when text of that kind does not parse: taken from there, so the two cannot differ.
 *
 * @deprecated `InvalidSpecError.expected` says the form a text missed. Kept for one release.
 */
export const SPEC_FORMS: Readonly<Record<string, string>> = new Proxy(Object.freeze(formsOfGrammar()), {
  get(target, property, receiver) {
    warnOnce()
    return Reflect.get(target, property, receiver)
  },
})

/** Each rule kind's form, read from the error core's grammar throws for a text of that kind with no numbers. */
function formsOfGrammar(): Record<string, string> {
  const forms: Record<string, string> = {}
  const kinds = [
    'fixedWindow',
    'slidingLog',
    'slidingWindow',
    'tokenBucket',
    'leakyBucket',
    'concurrency',
    'warmUp',
  ]
  for (const kind of kinds) {
    try {
      parseRuleSpec(`${kind}:?`)
    } catch (error) {
      if (error instanceof InvalidSpecError) forms[kind] = error.expected
    }
  }
  return forms
}

let warned = false

/** Warns once per process that the dashboard's copy of the grammar's helpers is deprecated. */
function warnOnce(): void {
  if (warned) return
  warned = true
  process.emitWarning(
    "parseSpec, parseSpecs, parseDuration and SPEC_FORMS (from @sluice/dashboard or @sluice/cli) are deprecated: use parseRuleSpec or parseRuleSpecs from '@sluice/core'.",
    { type: 'DeprecationWarning', code: 'SLUICE_DEP_PARSE_SPEC' },
  )
}

/** Rules per entry, at most (as every limit table keeps): a table entry is a handful of rules, never a payload. */
export const MAX_RULES_PER_ENTRY: number = TABLE_BOUNDS.rulesPerEntry

/**
 * Reads a dashboard edit's body: `null`, or a list of up to 16 items, each a spec object (`{ "kind":
 * "slidingLog", "limit": 100, "windowMs": 1000 }`) or a string in core's rule grammar (`"slidingLog:100/1s"`,
 * `"-1"`, read by `parseRuleSpecs`). Only the objects' shape is checked here; the table checks every spec with the factories' own coded errors
 * before it writes anything. Throws `InvalidOptionError` naming the offending item for a wrong shape, and
 * the grammar's `InvalidSpecError` for a string that does not parse.
 */
export function readRuleSpecs(body: unknown): RuleSpec[] | null {
  if (body === null) return null
  if (!Array.isArray(body)) {
    throw new InvalidOptionError('rules', body, `null, or a list of rule specs or strings: ${EXPECTED}`)
  }
  if (body.length > MAX_RULES_PER_ENTRY) {
    throw new InvalidOptionError('rules', body, `at most ${MAX_RULES_PER_ENTRY} rules`)
  }
  return body.flatMap((item: unknown, i): RuleSpec[] => {
    if (typeof item === 'string') return parseRuleSpecs([item])
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new InvalidOptionError(`rules[${i}]`, item, `a rule spec object or a string: ${EXPECTED}`)
    }
    const spec = item as Record<string, unknown>
    if (typeof spec.kind !== 'string') {
      throw new InvalidOptionError(
        `rules[${i}].kind`,
        spec.kind,
        'the name of a rule factory, e.g. "slidingLog"',
      )
    }
    return [{ ...spec } as RuleSpec]
  })
}
