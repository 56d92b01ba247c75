/**
 * @module What every HTTP adapter shares: the common options, resolved once, and the per-request
 * decision turned into an outcome the adapter only has to write out. Adapters supply a
 * `RequestView` for their framework's request and stay thin; nothing here knows a framework.
 */
import { STATUS_CODES } from 'node:http'
import { InvalidOptionError } from './errors.ts'
import { type HeaderOptions, rateLimitHeaders, resolveHeaderOptions, retryAfterSeconds } from './headers.ts'
import { compileKey, type KeySpec, type MissingKeyPolicy, type RequestView } from './keys.ts'
import {
  consumeNow,
  createLimiter,
  type Limiter,
  type RulesOption,
  type StoreErrorPolicy,
} from './limiter.ts'
import { definedOnly, functionOption, given, integerOption, isPromise, limiterOption } from './options.ts'
import type { Decision, Store } from './types.ts'

/** A problem-details body (RFC 9457) or any JSON object a user prefers. */
export type ResponseBody = Record<string, unknown>

/** The options both adapters share. `R` is the framework's request type. */
export interface HttpLimitOptions<R> {
  /**
   * The rules, or a function `(key, request) => rules | null` for a table of limits per key
   * (`null`, or a rule with `limit: -1`, means not limited). Required unless `limiter` is given.
   */
  rules?: RulesOption<R>
  /** Where state lives. Default: a new `MemoryStore()` for this middleware. */
  store?: Store
  /** Namespace of this middleware's keys in its store. Default `"sluice"`. */
  prefix?: string
  /** When the store fails: `'allow'` (default), `'deny'`, `'throw'` (the error goes to the framework), or a limiter. */
  onStoreError?: StoreErrorPolicy<R>
  /** A limiter built with `createLimiter`, instead of `rules`/`store`/`prefix`/`onStoreError`. */
  limiter?: Limiter<R>
  /**
   * What a request is counted against: `'ip'`, `'route'`, `{ header: [...] }`, a function of the request,
   * or a list of these joined. Default `'ip'`.
   */
  key?: KeySpec<R>
  /** When a key part is absent: `'reject'` answers 400 (default), `'skip'` lets the request through, `{ default }` uses that value. */
  onMissingKey?: MissingKeyPolicy
  /** Prefix length IPv6 addresses are grouped by in `'ip'` keys. Default 56. */
  ipv6Subnet?: number
  /** Units a request takes: an integer, or a function of the request. Default 1. */
  cost?: number | ((request: R) => number)
  /** Requests for which this returns true are not limited or counted. */
  skip?: (request: R) => boolean | Promise<boolean>
  /**
   * Rate-limit headers on every limited response: `true` (default: the current IETF draft and `Retry-After`),
   * `false` (none), or `{ standard, legacy, retryAfter }`.
   */
  headers?: HeaderOptions | boolean
  /** The 429 body: a string becomes the problem's `detail`; an object is sent as the whole body; a function builds either. */
  message?: string | ResponseBody | ((request: R, decision: Decision) => string | ResponseBody)
  /** HTTP status of a denied request. Default 429. */
  statusCode?: number
}

/** What an adapter does with one request. */
export type HttpOutcome =
  /** Not limited: skipped, a missing key with `'skip'`, or already counted by this same limit. */
  | { readonly action: 'pass' }
  /** A key part is missing and the policy is `'reject'`. */
  | {
      readonly action: 'reject'
      readonly status: 400
      readonly body: ResponseBody
      readonly contentType: typeof PROBLEM_JSON
    }
  /** Admitted: write `headers`, hold the request `decision.waitMs` when it is above 0, then go on. */
  | { readonly action: 'allow'; readonly decision: Decision; readonly headers: Record<string, string> }
  /** Denied: answer `status` with `headers` and `body`. */
  | {
      readonly action: 'deny'
      readonly decision: Decision
      readonly status: number
      readonly headers: Record<string, string>
      readonly body: ResponseBody
      /** `application/problem+json` for sluice's problem details, `application/json` for a body the user built. */
      readonly contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
    }

export const PROBLEM_JSON = 'application/problem+json'
export const JSON_TYPE = 'application/json'

export interface HttpLimit<R> {
  readonly limiter: Limiter<R>
  /**
   * Decides a request: the outcome itself when the store answered synchronously (a memory store), so the
   * adapter can go on in the same tick, else a promise of it. Never throws: it rejects when the store
   * fails under `onStoreError: 'throw'`, on a cost no rule can admit, and when a user function (key,
   * cost, skip, rules, message) throws; adapters pass that on to their framework's error path.
   */
  check(request: R): HttpOutcome | Promise<HttpOutcome>
}

/** The options that build a limiter; `limiter` takes their place. */
export const LIMITER_OPTION_NAMES = ['rules', 'store', 'prefix', 'onStoreError'] as const

/** The options that say how a request is counted and answered. */
export const REQUEST_OPTION_NAMES = [
  'key',
  'onMissingKey',
  'ipv6Subnet',
  'cost',
  'skip',
  'headers',
  'message',
  'statusCode',
] as const

/** The option names adapters accept in common; an adapter adds its own (such as `onLimited`). */
export const HTTP_OPTION_NAMES = [...LIMITER_OPTION_NAMES, 'limiter', ...REQUEST_OPTION_NAMES] as const

const PASS: HttpOutcome = Object.freeze({ action: 'pass' })

/**
 * Resolves an adapter's options once, at start-up. `where` names the adapter in error messages
 * (e.g. `"rateLimit"`), so a bad option reads `rateLimit.cost`.
 */
export function resolveHttpLimit<R>(
  where: string,
  options: HttpLimitOptions<R>,
  view: RequestView<R>,
): HttpLimit<R> {
  const o = definedOnly(options)
  if (o.limiter !== undefined) {
    for (const name of LIMITER_OPTION_NAMES) {
      if (o[name] !== undefined) {
        throw new InvalidOptionError(
          `${where}.${name}`,
          o[name],
          `no ${name} when a limiter is given (the limiter has its own)`,
        )
      }
    }
  }
  // Options are checked in the adapter's words (`rateLimit.onMissingKey`), and all of them before the
  // limiter is built: building it claims its prefix on the store, so a failed start must not.
  const keyOf = asAdapterOption(where, () =>
    compileKey(given(o.key, 'ip'), view, {
      ...(o.ipv6Subnet === undefined ? {} : { ipv6Subnet: o.ipv6Subnet }),
      ...(o.onMissingKey === undefined ? {} : { onMissing: o.onMissingKey }),
    }),
  )
  const costOf = costResolver(where, o.cost)
  const skip =
    o.skip === undefined
      ? undefined
      : functionOption<(request: R) => boolean | Promise<boolean>>(`${where}.skip`, o.skip)
  const headerOptions = asAdapterOption(where, () => resolveHeaderOptions(o.headers))
  const status = o.statusCode === undefined ? 429 : statusOption(`${where}.statusCode`, o.statusCode)
  const bodyOf = bodyResolver(where, o.message, status)
  const limiter =
    o.limiter === undefined
      ? asAdapterOption(where, () => limiterFrom(where, o))
      : limiterOption<R>(`${where}.limiter`, o.limiter)
  const firstCount = countOnceFor(view, limiter)
  function count(request: R): HttpOutcome | Promise<HttpOutcome> {
    if (!firstCount(request)) return PASS
    const key = keyOf(request)
    if (!key.ok) {
      if (key.policy === 'skip') return PASS
      return { action: 'reject', status: 400, body: missingKeyBody(key.missing), contentType: PROBLEM_JSON }
    }
    const decision = consumeNow(limiter, key.key, costOf(request), request)
    if (decision instanceof Promise) return decision.then((d) => outcomeOf(request, d))
    return outcomeOf(request, decision)
  }

  function outcomeOf(request: R, decision: Decision): HttpOutcome {
    const headers = rateLimitHeaders(decision, headerOptions)
    if (decision.allowed) return { action: 'allow', decision, headers }
    const { body, contentType } = bodyOf(request, decision)
    return { action: 'deny', decision, status, headers, body, contentType }
  }

  function check(request: R): HttpOutcome | Promise<HttpOutcome> {
    try {
      if (skip === undefined) return count(request)
      const skipped = skip(request)
      if (!isPromise(skipped)) return skipped ? PASS : count(request)
      // A native promise, whatever thenable `skip` answered with.
      return Promise.resolve(skipped).then((s) => (s ? PASS : count(request)))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  return { limiter, check }
}

/**
 * Whether `limiter` counts a request for the first time, so one request passing it twice (app and router,
 * or two limits given the same limiter) counts once: the view's own slot when it has one, else a WeakSet
 * per limiter. Not a property added to the request here: Express swaps each request's prototype, and V8
 * then builds a new hidden class for every property added to one (about 2 us and a class's worth of
 * garbage per request, against a fraction of that for a WeakSet entry).
 */
function countOnceFor<R>(view: RequestView<R>, limiter: object): (request: R) => boolean {
  const own = view.countOnce
  if (own !== undefined) return (request) => own(request, limiter)
  const counted = countedBy(limiter)
  return (request) => {
    if (typeof request !== 'object' || request === null) return true
    if (counted.has(request)) return false
    counted.add(request)
    return true
  }
}

/**
 * The limiters that counted one request, as a view keeps them in a slot of its own: none (`null` or
 * `undefined`), one limiter, or a list of several. For adapters; see `withCounted`.
 */
export type CountedBy = object | null | undefined

/**
 * For a view's `countOnce` that keeps a request's marks in one slot: what the slot holds once `limiter`
 * has counted the request, or `false` when that limiter already had (the slot is then left as it is).
 * One limiter is held as itself and several as a list, which grows in place, so the usual request,
 * counted by one limiter, costs no allocation.
 */
export function withCounted(counted: CountedBy, limiter: object): CountedBy | false {
  if (counted === null || counted === undefined) return limiter
  if (counted === limiter) return false
  if (!Array.isArray(counted)) return [counted, limiter]
  if (counted.includes(limiter)) return false
  counted.push(limiter)
  return counted
}

/** The requests each limiter has counted, shared by every limit built on it (views without `countOnce`). */
const countedByLimiter = new WeakMap<object, WeakSet<object>>()

function countedBy(limiter: object): WeakSet<object> {
  let counted = countedByLimiter.get(limiter)
  if (counted === undefined) {
    counted = new WeakSet()
    countedByLimiter.set(limiter, counted)
  }
  return counted
}

/** The body of a 429 when the user gave no `message`: problem details naming the rule and the wait. */
export function limitedBody(decision: Decision, status = 429, detail?: string): ResponseBody {
  return {
    type: 'about:blank',
    // With type about:blank, the title is the status's own reason phrase (RFC 9457).
    title: STATUS_CODES[status] ?? 'Too Many Requests',
    status,
    detail: detail ?? limitedDetail(decision),
    retryAfter: retryAfterSeconds(decision),
  }
}

/** One sentence on a denial: the rule and the wait. */
export function limitedDetail(decision: Decision): string {
  return `Rate limit ${decision.rule} exceeded; retry in ${retryAfterSeconds(decision)} s.`
}

function missingKeyBody(missing: string): ResponseBody {
  return {
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: `This request needs ${missing} to be rate limited.`,
  }
}

/** Names an option error after the adapter's option (`key` → `rateLimit.key`, `onMissing` → `rateLimit.onMissingKey`). */
function asAdapterOption<T>(where: string, build: () => T): T {
  try {
    return build()
  } catch (error) {
    if (!(error instanceof InvalidOptionError) || error.option.startsWith(`${where}.`)) throw error
    const name = error.option.replace(/^createLimiter\./, '').replace(/^onMissing$/, 'onMissingKey')
    throw new InvalidOptionError(`${where}.${name}`, error.value, error.expected)
  }
}

function limiterFrom<R>(where: string, o: Partial<HttpLimitOptions<R>>): Limiter<R> {
  if (o.rules === undefined) throw new InvalidOptionError(`${where}.rules`, undefined, 'rules, or a limiter')
  return createLimiter<R>({
    rules: o.rules,
    ...(o.store === undefined ? {} : { store: o.store }),
    ...(o.prefix === undefined ? {} : { prefix: o.prefix }),
    ...(o.onStoreError === undefined ? {} : { onStoreError: o.onStoreError }),
  })
}

function costResolver<R>(where: string, cost: unknown): (request: R) => number | undefined {
  if (cost === undefined) return () => undefined
  if (typeof cost === 'function') return cost as (request: R) => number
  const fixed = integerOption(`${where}.cost`, cost, 1)
  return () => fixed
}

interface DeniedBody {
  body: ResponseBody
  contentType: typeof PROBLEM_JSON | typeof JSON_TYPE
}

/** Builds the denied body: sluice's problem details (around the user's text, if any), or the user's own object. */
function bodyResolver<R>(
  where: string,
  message: unknown,
  status: number,
): (request: R, decision: Decision) => DeniedBody {
  const problem = (decision: Decision, detail?: string): DeniedBody => ({
    body: limitedBody(decision, status, detail),
    contentType: PROBLEM_JSON,
  })
  const own = (body: ResponseBody): DeniedBody => ({ body, contentType: JSON_TYPE })
  if (message === undefined) return (_request, decision) => problem(decision)
  if (typeof message === 'string') return (_request, decision) => problem(decision, message)
  if (typeof message === 'function') {
    const build = message as (request: R, decision: Decision) => string | ResponseBody
    return (request, decision) => {
      const built = build(request, decision)
      return typeof built === 'string' ? problem(decision, built) : own(built)
    }
  }
  if (message !== null && typeof message === 'object') return () => own(message as ResponseBody)
  throw new InvalidOptionError(`${where}.message`, message, 'a string, an object, or a function')
}

function statusOption(option: string, value: unknown): number {
  const status = integerOption(option, value, 400)
  if (status > 599) throw new InvalidOptionError(option, value, 'an HTTP error status from 400 to 599')
  return status
}
