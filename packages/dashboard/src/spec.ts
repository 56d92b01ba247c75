/**
 * @module An edit's body as the dashboard's API reads it: `null`, or rule specs and rule text. The text is
 * read by core's one rule grammar (`parseRuleSpec`, `@sluice/core`), which the `sluice` command reads too.
 */
import { InvalidOptionError, parseRuleSpecs, type RuleSpec } from '@sluice/core'
import { TABLE_BOUNDS } from '@sluice/core/store'

const EXPECTED =
  'text such as slidingLog:100/1s, tokenBucket:50+10/s or -1 (see parseRuleSpec in @sluice/core)'

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
