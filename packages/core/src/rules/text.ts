/**
 * @module Rules as text: the one grammar for rules written by people (the `sluice` command, the dashboard's
 * form, environment variables, config files, `rules: ['slidingWindow:100/1m']`). `parseRuleSpec` reads a
 * rule's text and builds it with its factory's checks; `formatRuleSpec` writes a rule as text that
 * `parseRuleSpec` reads back to a rule with the same JSON.
 *
 * ```
 * fixedWindow:1000/1h          1000 per aligned hour
 * slidingLog:100/1s            100 in any second, exactly
 * slidingWindow:600/1m         600 per minute in 10 buckets (the default)
 * slidingWindow:600/1m/6       ... in 6 buckets
 * tokenBucket:50+10/s          capacity 50, refilled 10 a second (+600/1m is the same refill)
 * leakyBucket:5/s              5 a second, no queue (a strict meter)
 * leakyBucket:5/s~2s           5 a second, a call may wait up to 2 s for its turn
 * concurrency:10               10 units leased at once, each lease lasting at most 60 s (the default)
 * concurrency:10~30s           ... each lease lasting at most 30 s
 * warmUp:100/s,30s             100 a second once warm, warming up over 30 s from 3 times slower (the default)
 * warmUp:100/s,30sx4~1s        ... from 4 times slower, a call waiting up to 1 s for its turn
 * quota:1000/day               1000 per calendar day in UTC
 * quota:10000/month@@Europe/Berlin   10000 per calendar month in Berlin (the zone after @@)
 * quota:500/week-sun@@America/New_York   500 per week starting on Sunday (-mon … -sun; Monday by default)
 * 100/1m                       a bare rate: slidingWindow:100/1m, the kind to start with (exact to a tenth of
 *                              the window in 10 counters); formatRuleSpec writes it with its kind
 * slidingLog:100/1s@burst      any of these with a name (needed to tell apart two rules of one kind and shape)
 * -1                           not limited (also `null`, and a limit or capacity of -1)
 * {"kind":"slidingLog","limit":100,"windowMs":1000}    JSON: the rule's spec, as JSON.stringify(rule) writes it
 * ```
 *
 * A duration is an optional number and a unit: `ms`, `s`, `m`, `h`, `d` (`s` alone is `1s`). `~` is always
 * the longest a call waits (or a lease lasts). A rate or a cold factor may be a decimal (`0.5`, `2.5e-3`);
 * limits, capacities and buckets are whole numbers. Text that does not parse throws `InvalidSpecError`
 * (`ERR_SLUICE_INVALID_SPEC`) naming the text and the form expected; numbers that parse are then checked by
 * the factories (`InvalidOptionError`, `ERR_SLUICE_INVALID_OPTION`, naming the option).
 */
import { InvalidSpecError } from '../errors.ts'
import type { RuleKind } from '../types.ts'
import { parseDuration, WINDOW } from './grammar.ts'
import { isFactoryRule } from './index.ts'
import { KINDS, kindOf, RULE_KINDS, type RuleSpec, ruleFromSpec } from './spec.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'

/** The kind a bare rate (`100/1m`, no kind) is read as: the one the docs recommend to start with. */
const BARE_RATE_KIND: RuleKind = 'slidingWindow'

const EXPECTED = `-1, JSON, KIND:NUMBERS[@NAME] with one of: ${KINDS.map((kind) => RULE_KINDS[kind].text.form).join('; ')}; or a bare rate LIMIT/WINDOW[@NAME], read as ${BARE_RATE_KIND}`

/** Text longer than this is refused before it is read: a rule is a line, never a payload. */
const MAX_TEXT = 4096

/**
 * The rule `text` describes: `slidingWindow:100/1m`, `tokenBucket:50+10/s@burst`, `-1`, or the rule's JSON
 * spec. The rule is built by its factory, with the factory's checks.
 *
 * @throws `InvalidSpecError` (`ERR_SLUICE_INVALID_SPEC`) for text that is not in the grammar, naming the
 *   text and the form expected; `InvalidOptionError` (`ERR_SLUICE_INVALID_OPTION`) for a figure the
 *   factory refuses (`slidingLog:0/1s`: `slidingLog.limit`).
 */
export function parseRuleSpec(text: string): RuleInput {
  if (typeof text !== 'string') throw new InvalidSpecError(text, `a string: ${EXPECTED}`)
  if (text.length > MAX_TEXT) throw new InvalidSpecError(text, `at most ${MAX_TEXT} characters`)
  const trimmed = text.trim()
  if (trimmed === '-1' || trimmed === 'null') return UNLIMITED
  if (trimmed.startsWith('[')) {
    throw new InvalidSpecError(text, 'one rule: a JSON list holds several (parseRuleSpecs reads lists)')
  }
  if (trimmed.startsWith('{')) {
    let value: unknown
    try {
      value = JSON.parse(trimmed)
    } catch (error) {
      throw new InvalidSpecError(text, `valid JSON (${(error as Error).message})`)
    }
    return ruleFromSpec(value as RuleSpec)
  }
  // A kind starts with a letter; a bare rate with its limit's digits (a name may hold `:`, so the kind is
  // not found by the first colon here).
  const bare = trimmed.charCodeAt(0) >= 48 && trimmed.charCodeAt(0) <= 57
  const colon = bare ? -1 : trimmed.indexOf(':')
  if (!bare && colon < 0) throw new InvalidSpecError(text, EXPECTED)
  let body = trimmed.slice(colon + 1)
  let name: string | undefined
  let at = body.indexOf('@')
  // A zone (`quota:1000/day@@Europe/Berlin@api`) holds no `@`: the name follows the one after it.
  if (at >= 0 && body.charCodeAt(at + 1) === 64 && zonedKind(trimmed.slice(0, colon))) {
    at = body.indexOf('@', at + 2)
  }
  if (at >= 0) {
    name = body.slice(at + 1)
    body = body.slice(0, at)
  }
  const spec = bare ? bareRateOf(body, text) : specOf(trimmed.slice(0, colon), body, text)
  return ruleFromSpec((name === undefined ? spec : { ...spec, name }) as RuleSpec)
}

/** A bare rate's spec: `LIMIT/WINDOW` of the kind bare rates are read as, and nothing else. */
function bareRateOf(body: string, text: string): Record<string, unknown> {
  const m = WINDOW.exec(body)
  if (m === null || m[3] !== undefined) {
    throw new InvalidSpecError(
      text,
      `a bare rate LIMIT/WINDOW, e.g. 100/1m (read as ${BARE_RATE_KIND}:100/1m)`,
    )
  }
  return { kind: BARE_RATE_KIND, limit: Number(m[1]), windowMs: parseDuration(m[2]!) }
}

/**
 * Every rule of a list of texts, in order: each text one rule, or a JSON list of specs (as a `sluice limits
 * set` command line takes them). Errors as `parseRuleSpec`'s; `texts` not a list (one text alone) is an
 * `InvalidSpecError` too.
 */
export function parseRuleSpecs(texts: readonly string[]): RuleInput[] {
  if (!Array.isArray(texts)) {
    throw new InvalidSpecError(
      texts,
      "a list of rule texts, such as ['slidingLog:100/1s'] (parseRuleSpec reads one)",
    )
  }
  return texts.flatMap((text): RuleInput[] => {
    const trimmed = typeof text === 'string' ? text.trim() : text
    if (typeof trimmed !== 'string' || !trimmed.startsWith('[')) return [parseRuleSpec(text)]
    if (text.length > MAX_TEXT) throw new InvalidSpecError(text, `at most ${MAX_TEXT} characters`)
    let value: unknown
    try {
      value = JSON.parse(trimmed)
    } catch (error) {
      throw new InvalidSpecError(text, `valid JSON (${(error as Error).message})`)
    }
    return (value as unknown[]).map((spec) => ruleFromSpec(spec as RuleSpec))
  })
}

/**
 * `rule` as text in the grammar `parseRuleSpec` reads: `slidingWindow:600/1m`, `leakyBucket:5/s~2s@pay`,
 * `-1` for the unlimited marker. `parseRuleSpec(formatRuleSpec(rule))` is a rule whose `JSON.stringify`
 * equals `rule`'s (a name is printable ASCII with no space at either end, so the short form carries
 * every name a factory takes). A bare rate's rule is written with its kind (`slidingWindow:100/1m`).
 *
 * @throws `InvalidSpecError` (`ERR_SLUICE_INVALID_SPEC`) for anything a rule factory did not build.
 */
export function formatRuleSpec(rule: RuleInput): string {
  if (!isFactoryRule(rule)) {
    throw new InvalidSpecError(rule, 'a rule built by a rule factory (slidingLog, …) or by parseRuleSpec')
  }
  if (rule.kind === 'unlimited') return '-1'
  // The given name only: a default name is not part of the rule's spec.
  const name = Object.getOwnPropertyDescriptor(rule, 'name')?.enumerable ? rule.name : undefined
  return `${rule.kind}:${kindOf(rule).text.write(rule)}${name === undefined ? '' : `@${name}`}`
}

/** Whether `kind` names a kind whose text may hold `@@ZONE`. */
function zonedKind(kind: string): boolean {
  return Object.hasOwn(RULE_KINDS, kind) && RULE_KINDS[kind as RuleKind].text.zoned === true
}

/** The spec `<kind>:<body>` gives, read by the kind's entry (kind.ts); text of no kind or form throws. */
function specOf(kind: string, body: string, text: string): Record<string, unknown> {
  if (!Object.hasOwn(RULE_KINDS, kind)) {
    throw new InvalidSpecError(text, `a known kind (${KINDS.join(', ')}): ${EXPECTED}`)
  }
  const entry = RULE_KINDS[kind as RuleKind]
  const options = entry.text.read(body)
  if (options === undefined) throw new InvalidSpecError(text, entry.text.form)
  return { kind, ...options }
}
