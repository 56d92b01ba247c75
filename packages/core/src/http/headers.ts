/**
 * @module Decision -> response headers, as a plain map that adapters write as is.
 * The header form (which draft of draft-ietf-httpapi-ratelimit-headers, legacy `X-RateLimit-*`, OpenAI's
 * `x-ratelimit-*-requests` and `-tokens`, `Retry-After`) is chosen once, in `resolveHeaderOptions`; per
 * response only the chosen strings are built. Every figure is a whole number of units or of seconds, rounded
 * up (OpenAI's resets: a duration string of whole milliseconds, rounded up), so `Infinity` and `NaN` never
 * appear.
 */
import { InvalidOptionError } from '../errors.ts'
import { booleanOption, readOptions } from '../options.ts'
import type { Decision, RuleDecision } from '../types.ts'

/**
 * Which draft of the IETF RateLimit header fields to follow.
 * - `'draft-8'` to `'draft-11'` (one wire format; draft-11 is current):
 *   `RateLimit-Policy: "100-per-60s";q=100;w=60` and `RateLimit: "100-per-60s";r=99;t=60`, one item per rule.
 * - `'draft-7'`: `RateLimit-Policy: 100;w=60` and `RateLimit: limit=100, remaining=99, reset=60`.
 * - `'draft-6'`: `RateLimit-Policy: 100;w=60`, `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`.
 */
export type HeaderDraft = 'draft-11' | 'draft-10' | 'draft-9' | 'draft-8' | 'draft-7' | 'draft-6'

/** The draft sluice follows unless told otherwise: the current one. */
export const DEFAULT_HEADER_DRAFT: HeaderDraft = 'draft-11'

export const HEADER_DRAFTS: readonly HeaderDraft[] = Object.freeze([
  'draft-11',
  'draft-10',
  'draft-9',
  'draft-8',
  'draft-7',
  'draft-6',
])

export interface HeaderOptions {
  /**
   * The standard `RateLimit` headers in the form of this draft, `true` for the current draft,
   * or `false` for none. Default `'draft-11'`.
   */
  standard?: HeaderDraft | boolean
  /**
   * Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds until
   * the deciding rule is replenished, not a timestamp), for clients that only read those. Default false.
   */
  legacy?: boolean
  /** Send `Retry-After` (whole seconds, rounded up) on denied responses. Default true. */
  retryAfter?: boolean
  /**
   * Also send OpenAI's fields for the rules named `requests` and `tokens`: `x-ratelimit-limit-requests`,
   * `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` (a duration: `"1s"`, `"6m0s"`,
   * `"120ms"`), and the same for `-tokens`. Default false.
   */
  openai?: boolean
}

export interface ResolvedHeaderOptions {
  readonly standard: HeaderDraft | false
  readonly legacy: boolean
  readonly retryAfter: boolean
  readonly openai: boolean
  /** False when no response would get any header; an adapter may skip `rateLimitHeaders` then. */
  readonly enabled: boolean
  /** The builder chosen for these options; call it through `rateLimitHeaders`. */
  readonly build: (decision: Decision) => Record<string, string>
}

/**
 * Checks the `headers` option once. `true` or `undefined`: the defaults; `false`: no headers at all,
 * not even `Retry-After`; `'openai'`: OpenAI's fields and `Retry-After`, no IETF fields. Throws
 * `InvalidOptionError` (`headers`, `headers.standard`, ...) otherwise.
 */
export function resolveHeaderOptions(
  option: HeaderOptions | boolean | 'openai' | undefined,
  where = 'headers',
): ResolvedHeaderOptions {
  if (option === undefined || option === true) return DEFAULT_HEADERS
  if (option === false) return NO_HEADERS
  if (option === 'openai') return OPENAI_HEADERS
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new InvalidOptionError(where, option, "true, false, 'openai' or an object of header options")
  }
  const o = readOptions(where, option, ['standard', 'legacy', 'retryAfter', 'openai'])
  return resolved(
    standardOption(`${where}.standard`, o.standard),
    o.legacy === undefined ? false : booleanOption(`${where}.legacy`, o.legacy),
    o.retryAfter === undefined ? true : booleanOption(`${where}.retryAfter`, o.retryAfter),
    o.openai === undefined ? false : booleanOption(`${where}.openai`, o.openai),
  )
}

/**
 * The response headers for `decision`, as `options` asks. A decision no rule limits (`rules` empty:
 * an unlimited key, or a store failure answered by policy) gets no rate-limit headers, only
 * `Retry-After` when it is a denial. Returns a new object each call; callers may add to it.
 */
export function rateLimitHeaders(decision: Decision, options: ResolvedHeaderOptions): Record<string, string> {
  return options.build(decision)
}

type Writer = (decision: Decision, out: Record<string, string>) => void

/** draft-8 onward: structured-field lists, one item per rule, tied together by the rule's name. */
const writeStructured: Writer = (decision, out) => {
  const rules = decision.rules
  let policy = ''
  let limit = ''
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    const separator = i === 0 ? '' : ', '
    // Rule names are printable ASCII without `"` or `\` (checked where rules are built): a valid sf-string.
    policy += rules.length === 1 ? policyItem(rule) : `${separator}${policyText(rule)}`
    limit += `${separator}"${rule.rule}";r=${units(rule.remaining)};t=${seconds(rule.resetMs)}`
  }
  out['RateLimit-Policy'] = policy
  out['RateLimit'] = limit
}

/**
 * `"100-per-60s";q=100;w=60`: one rule's item of `RateLimit-Policy`. A concurrency rule's quota counts
 * requests in flight, not requests: its item says so, `qu="concurrent-requests"`.
 */
function policyText(rule: RuleDecision): string {
  const quota = `"${rule.rule}";q=${units(rule.limit)}`
  const unit = rule.unit === undefined ? '' : `;qu="${rule.unit}"`
  return `${quota}${unit}${windowParameter(rule)}`
}

/**
 * The item of a call's only rule. It is the same on every response while the rule is, so the last one
 * built is kept and given again: no string is built for it per response.
 */
function policyItem(rule: RuleDecision): string {
  const last = lastPolicy
  if (
    rule.rule === last.name &&
    rule.limit === last.limit &&
    rule.windowSeconds === last.windowSeconds &&
    rule.unit === last.unit
  ) {
    return last.item
  }
  const item = policyText(rule)
  lastPolicy = {
    name: rule.rule,
    limit: rule.limit,
    windowSeconds: rule.windowSeconds,
    unit: rule.unit,
    item,
  }
  return item
}

let lastPolicy: {
  name: string
  limit: number
  windowSeconds: number
  unit: string | undefined
  item: string
} = { name: '', limit: 0, windowSeconds: 0, unit: undefined, item: '' }

/**
 * The headers of a response that several sluice limits counted (a global limit, then a route's own),
 * rendered from their decisions in order. Lists of items (`RateLimit-Policy`, and `RateLimit` from
 * draft-8 on) are joined, earlier limits' items first, when both limits write them in the same draft form,
 * so the client sees every limit the request counted against; give stacked rules distinct names so their
 * items can be told apart. A field that describes one rule (draft-6 and draft-7 figures, `X-RateLimit-*`,
 * `Retry-After`), and a list in another form, take the later limit's value; a field only an earlier limit
 * sends stays. Returns a new object.
 */
export function stackedHeaders(
  limits: readonly { readonly decision: Decision; readonly headers: ResolvedHeaderOptions }[],
): Record<string, string> {
  const out: Record<string, string> = {}
  /** The list form of what `out` holds under a list field, when it holds a list. */
  const forms: Record<string, ListForm | undefined> = {}
  for (const { decision, headers } of limits) {
    const own = headers.build(decision)
    const form = listForm(headers.standard)
    for (const name in own) {
      const value = own[name]!
      const list = isList(name, form) ? form : undefined
      const before = out[name]
      const join = list !== undefined && before !== undefined && before !== '' && forms[name] === list
      out[name] = join ? `${before}, ${value}` : value
      forms[name] = list
    }
  }
  return out
}

/** Draft-8 on writes named items (`"name";q=…`), draft-6 and draft-7 bare quotas (`100;w=60`). */
type ListForm = 'named' | 'bare'

function listForm(standard: HeaderDraft | false): ListForm | undefined {
  if (standard === false) return undefined
  return standard === 'draft-6' || standard === 'draft-7' ? 'bare' : 'named'
}

/** `RateLimit-Policy` is a list in every draft; `RateLimit` only in the named form. */
function isList(name: string, form: ListForm | undefined): boolean {
  if (form === undefined) return false
  return name === 'RateLimit-Policy' || (name === 'RateLimit' && form === 'named')
}

/** draft-7: one `RateLimit` dictionary for the deciding rule, a policy list for all rules. */
const writeDraft7: Writer = (decision, out) => {
  out['RateLimit-Policy'] = policyList(decision.rules)
  out['RateLimit'] =
    `limit=${units(decision.limit)}, remaining=${units(decision.remaining)}, reset=${seconds(decision.resetMs)}`
}

/** draft-6: one field per figure of the deciding rule, a policy list for all rules. */
const writeDraft6: Writer = (decision, out) => {
  out['RateLimit-Policy'] = policyList(decision.rules)
  out['RateLimit-Limit'] = `${units(decision.limit)}`
  out['RateLimit-Remaining'] = `${units(decision.remaining)}`
  out['RateLimit-Reset'] = `${seconds(decision.resetMs)}`
}

const writeLegacy: Writer = (decision, out) => {
  out['X-RateLimit-Limit'] = `${units(decision.limit)}`
  out['X-RateLimit-Remaining'] = `${units(decision.remaining)}`
  out['X-RateLimit-Reset'] = `${seconds(decision.resetMs)}`
}

/**
 * OpenAI's fields, for the rules named `requests` and `tokens` (a decision without either gets none):
 * `x-ratelimit-limit-<name>`, `x-ratelimit-remaining-<name>`, `x-ratelimit-reset-<name>`.
 */
const writeOpenAi: Writer = (decision, out) => {
  for (const rule of decision.rules) {
    const name = rule.rule
    if (name !== 'requests' && name !== 'tokens') continue
    out[`x-ratelimit-limit-${name}`] = `${units(rule.limit)}`
    out[`x-ratelimit-remaining-${name}`] = `${units(rule.remaining)}`
    out[`x-ratelimit-reset-${name}`] = duration(rule.resetMs)
  }
}

/**
 * Milliseconds as OpenAI writes a reset (Go's duration form), in whole milliseconds rounded up: `"120ms"`
 * under a second, else hours, minutes and seconds from the largest present down, the seconds with their
 * fraction when there is one: `"1s"`, `"1.5s"`, `"6m0s"`, `"1h2m3s"`. `"0s"` for nothing.
 */
export function duration(ms: number): string {
  if (!(ms > 0)) return '0s'
  const whole = ms >= MAX_INTEGER ? MAX_INTEGER : Math.ceil(ms)
  if (whole < 1000) return `${whole}ms`
  const hours = Math.floor(whole / 3_600_000)
  const minutes = Math.floor((whole % 3_600_000) / 60_000)
  const millis = whole % 60_000
  const fraction = millis % 1000
  const seconds = `${Math.floor(millis / 1000)}${fraction === 0 ? '' : `.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`}s`
  if (hours > 0) return `${hours}h${minutes}m${seconds}`
  if (minutes > 0) return `${minutes}m${seconds}`
  return seconds
}

const STANDARD_WRITERS: Readonly<Record<HeaderDraft, Writer>> = {
  'draft-11': writeStructured,
  'draft-10': writeStructured,
  'draft-9': writeStructured,
  'draft-8': writeStructured,
  'draft-7': writeDraft7,
  'draft-6': writeDraft6,
}

function resolved(
  standard: HeaderDraft | false,
  legacy: boolean,
  retryAfter: boolean,
  openai = false,
): ResolvedHeaderOptions {
  const writeStandard = standard === false ? undefined : STANDARD_WRITERS[standard]
  const limits = writeStandard !== undefined || legacy || openai
  const build = (decision: Decision): Record<string, string> => {
    const out: Record<string, string> = {}
    if (limits && decision.rules.length > 0) {
      writeStandard?.(decision, out)
      if (legacy) writeLegacy(decision, out)
      if (openai) writeOpenAi(decision, out)
    }
    // A denial always says at least 1 s: `0` would invite a retry that is refused again.
    if (retryAfter && !decision.allowed) out['Retry-After'] = `${retryAfterSeconds(decision)}`
    return out
  }
  return Object.freeze({ standard, legacy, retryAfter, openai, enabled: limits || retryAfter, build })
}

/** The headers sent unless told otherwise: the current draft's fields and `Retry-After`. */
export const DEFAULT_HEADERS = resolved(DEFAULT_HEADER_DRAFT, false, true)
/** No header at all: `headers: false`, and a shadowed limit (which must not advertise what it does not enforce). */
export const NO_HEADERS = resolved(false, false, false)
/** `headers: 'openai'`: OpenAI's fields and `Retry-After`, for clients written against OpenAI's API. */
export const OPENAI_HEADERS = resolved(false, false, true, true)

function standardOption(option: string, value: unknown): HeaderDraft | false {
  if (value === undefined || value === true) return DEFAULT_HEADER_DRAFT
  if (value === false) return false
  if (typeof value === 'string' && (HEADER_DRAFTS as readonly string[]).includes(value)) {
    return value as HeaderDraft
  }
  throw new InvalidOptionError(
    option,
    value,
    `true, false or one of ${HEADER_DRAFTS.map((d) => `'${d}'`).join(', ')}`,
  )
}

/** `10;w=1, 100;w=60`: the draft-6 and draft-7 policy list. */
function policyList(rules: readonly RuleDecision[]): string {
  let list = ''
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    list += `${i === 0 ? '' : ', '}${units(rule.limit)}${windowParameter(rule)}`
  }
  return list
}

/** `;w=60`; left out if a rule ever reports no window, since the drafts require `w` > 0. */
function windowParameter(rule: RuleDecision): string {
  const w = rule.windowSeconds
  return w >= 1 && w <= MAX_INTEGER ? `;w=${Math.ceil(w)}` : ''
}

/** The largest integer a structured field may carry (15 digits). */
const MAX_INTEGER = 999_999_999_999_999

/** A count as a non-negative integer within structured-field range. */
function units(n: number): number {
  if (!(n > 0)) return 0
  return n >= MAX_INTEGER ? MAX_INTEGER : Math.floor(n)
}

/** Milliseconds as whole seconds, rounded up. */
function seconds(ms: number): number {
  if (!(ms > 0)) return 0
  return ms >= MAX_INTEGER ? MAX_INTEGER : Math.ceil(ms / 1000)
}

/**
 * The wait a denied client is told, in whole seconds: rounded up, and at least 1 so a denial never
 * invites an immediate retry. `Retry-After` and the problem body both say this.
 */
export function retryAfterSeconds(decision: Decision): number {
  return Math.max(1, seconds(decision.retryAfterMs))
}
