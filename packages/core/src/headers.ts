/**
 * @module Decision -> response headers, as a plain map that adapters write as is.
 * The header form (which draft of draft-ietf-httpapi-ratelimit-headers, legacy `X-RateLimit-*`,
 * `Retry-After`) is chosen once, in `resolveHeaderOptions`; per response only the chosen strings are built.
 * Every figure is a whole number of units or of seconds, rounded up, so `Infinity` and `NaN` never appear.
 */
import { InvalidOptionError } from './errors.ts'
import { booleanOption, definedOnly, knownKeys } from './options.ts'
import type { Decision, RuleDecision } from './types.ts'

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
}

export interface ResolvedHeaderOptions {
  readonly standard: HeaderDraft | false
  readonly legacy: boolean
  readonly retryAfter: boolean
  /** False when no response would get any header; an adapter may skip `rateLimitHeaders` then. */
  readonly enabled: boolean
  /** The builder chosen for these options; call it through `rateLimitHeaders`. */
  readonly build: (decision: Decision) => Record<string, string>
}

/**
 * Checks the `headers` option once. `true` or `undefined`: the defaults; `false`: no headers at all,
 * not even `Retry-After`. Throws `InvalidOptionError` (`headers`, `headers.standard`, ...) otherwise.
 */
export function resolveHeaderOptions(option: HeaderOptions | boolean | undefined): ResolvedHeaderOptions {
  if (option === undefined || option === true) return DEFAULTS
  if (option === false) return NONE
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new InvalidOptionError('headers', option, 'true, false or an object of header options')
  }
  knownKeys('headers', option, ['standard', 'legacy', 'retryAfter'])
  const o = definedOnly(option)
  return resolved(
    standardOption(o.standard),
    o.legacy === undefined ? false : booleanOption('headers.legacy', o.legacy),
    o.retryAfter === undefined ? true : booleanOption('headers.retryAfter', o.retryAfter),
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

/** `"100-per-60s";q=100;w=60`: one rule's item of `RateLimit-Policy`. */
function policyText(rule: RuleDecision): string {
  return `"${rule.rule}";q=${units(rule.limit)}${windowParameter(rule)}`
}

/**
 * The item of a call's only rule. It is the same on every response while the rule is, so the last one
 * built is kept and given again: no string is built for it per response.
 */
function policyItem(rule: RuleDecision): string {
  const last = lastPolicy
  if (rule.rule === last.name && rule.limit === last.limit && rule.windowSeconds === last.windowSeconds) {
    return last.item
  }
  const item = policyText(rule)
  lastPolicy = { name: rule.rule, limit: rule.limit, windowSeconds: rule.windowSeconds, item }
  return item
}

let lastPolicy = { name: '', limit: 0, windowSeconds: 0, item: '' }

/**
 * The headers for a response whose request another sluice limit counted first (a global limit, then a
 * route's own): `earlier` is what that limit wrote, `later` what this one would. Lists of items
 * (`RateLimit-Policy`, and `RateLimit` from draft-8 on) are joined, earlier items first, so the client
 * sees every limit the request counted against; give stacked rules distinct names so their items can be
 * told apart. A field that describes one rule (draft-6 and draft-7 figures, `X-RateLimit-*`), and a list
 * in another draft's form, take the later limit's value; a field only the earlier limit sends stays.
 * Returns a new object.
 */
export function combineHeaders(
  earlier: Readonly<Record<string, string>>,
  later: Readonly<Record<string, string>>,
): Record<string, string> {
  const out: Record<string, string> = { ...earlier }
  for (const name in later) {
    const before = earlier[name]
    const value = later[name]!
    out[name] = before !== undefined && joinable(name, before, value) ? `${before}, ${value}` : value
  }
  return out
}

/**
 * Whether two values of `name` are lists in the same form: named items (draft-8 on) on both sides, or,
 * for `RateLimit-Policy`, bare quotas (draft-6, draft-7) on both. A draft-7 `RateLimit` is one rule's.
 */
function joinable(name: string, before: string, value: string): boolean {
  const named = before.startsWith('"')
  if (before === '' || named !== value.startsWith('"')) return false
  return name === 'RateLimit-Policy' || (name === 'RateLimit' && named)
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
): ResolvedHeaderOptions {
  const writeStandard = standard === false ? undefined : STANDARD_WRITERS[standard]
  const limits = writeStandard !== undefined || legacy
  const build = (decision: Decision): Record<string, string> => {
    const out: Record<string, string> = {}
    if (limits && decision.rules.length > 0) {
      writeStandard?.(decision, out)
      if (legacy) writeLegacy(decision, out)
    }
    // A denial always says at least 1 s: `0` would invite a retry that is refused again.
    if (retryAfter && !decision.allowed) out['Retry-After'] = `${retryAfterSeconds(decision)}`
    return out
  }
  return Object.freeze({ standard, legacy, retryAfter, enabled: limits || retryAfter, build })
}

const DEFAULTS = resolved(DEFAULT_HEADER_DRAFT, false, true)
const NONE = resolved(false, false, false)

function standardOption(value: unknown): HeaderDraft | false {
  if (value === undefined || value === true) return DEFAULT_HEADER_DRAFT
  if (value === false) return false
  if (typeof value === 'string' && (HEADER_DRAFTS as readonly string[]).includes(value)) {
    return value as HeaderDraft
  }
  throw new InvalidOptionError(
    'headers.standard',
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
