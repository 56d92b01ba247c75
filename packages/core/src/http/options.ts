/**
 * @module The options every HTTP adapter shares, parsed: each one checked in the adapter's own words
 * (`rateLimit.cost`, `config.rateLimit.key`), nothing defaulted that a merge could still change, nothing
 * built, no prefix claimed. Building is `buildRequestLimit`'s (limit.ts). A Fastify route's options are
 * its own parsed options merged over the plugin's, so inheritance is a merge of plain objects.
 *
 * Over 300 lines: every option the adapters share is checked here and nowhere else, each beside the
 * lists of names the adapters validate a user's object against.
 */
import { type BlockOptions, blockOption } from '../block.ts'
import { InvalidOptionError } from '../errors.ts'
import {
  type Limiter,
  limiterOption,
  type RuleCosts,
  type RulesOption,
  rulesOption,
  type StoreErrorPolicy,
  storeErrorPolicyOption,
} from '../limiter/limiter.ts'
import {
  booleanOption,
  functionOption,
  integerOption,
  prefixOption,
  readOptions,
  storeOption,
} from '../options.ts'
import { isOverload, type Overload } from '../overload.ts'
import type { Decision, Store } from '../types.ts'
import { type HeaderOptions, type ResolvedHeaderOptions, resolveHeaderOptions } from './headers.ts'
import { subnetOption } from './keys/ip.ts'
import { type KeySpec, keySpecOption, type MissingKeyPolicy, missingKeyOption } from './keys/keys.ts'

/** A problem-details body (RFC 9457) or any JSON object a user prefers. */
export type ResponseBody = Record<string, unknown>

/**
 * The options both adapters share. `R` is the framework's request type; `S` what its hook answers with
 * (Express's `res`, Fastify's `reply`), as `countWhen` sees it.
 */
export interface HttpLimitOptions<R, S = unknown> {
  /**
   * The rules, each a rule or its text (`'slidingWindow:100/1m'`); or a function `(key, request) => rules |
   * null` for a table of limits per key (`null`, or a rule with `limit: -1`, means not limited). Required
   * unless `limiter` is given.
   */
  rules?: RulesOption<R>
  /** Where state lives. Default: a new `MemoryStore()` for this middleware. */
  store?: Store
  /** Namespace of this middleware's keys in its store. Default `"sluice"`. */
  prefix?: string
  /** When the store fails: `'allow'` (default), `'deny'`, `'throw'` (the error goes to the framework), or a limiter. */
  onStoreError?: StoreErrorPolicy<R>
  /**
   * Block a key the rules deny, for `ms`, then `factor` times longer for each block begun within
   * `forgetMs`, at most `maxMs` (as `createLimiter`'s `block`). Blocked requests are answered
   * `blockedStatusCode`. Default: no blocks.
   */
  block?: BlockOptions
  /** A limiter built with `createLimiter`, instead of `rules`/`store`/`prefix`/`onStoreError`/`block`. */
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
  /**
   * Units a request takes: an integer, or a function of the request (which may return a promise, as `key`
   * and `rules` functions may: a plan looked up in a cache or a database) answering an integer or the units
   * per rule by name (`{ requests: 1, tokens: 1200 }`: rules not named take 1). Default 1.
   */
  cost?: number | ((request: R) => number | RuleCosts | Promise<number | RuleCosts>)
  /**
   * Asked once when the response has ended, for an admitted request whose handler did not settle it
   * (`req.rateLimit.settle`): the request's true cost, an integer or per rule by name (rules not named
   * keep what they reserved), and the reservation becomes it (`limiter.settle`): units given back, or the
   * excess charged past the limit. `finished` is true when the response was sent in full, false when the
   * client left first (a stream cut off): it is asked then too. `undefined` keeps the reservation. It may
   * answer by promise. A throw, a rejection or a failed settle keeps the reservation and emits one
   * `SluiceWarning` per limit. Not asked when `countWhen` gave the request's units back. Default: none.
   */
  settle?: (
    request: R,
    response: S,
    finished: boolean,
  ) => number | RuleCosts | undefined | Promise<number | RuleCosts | undefined>
  /** Requests for which this returns true are not limited or counted. */
  skip?: (request: R) => boolean | Promise<boolean>
  /**
   * Rate-limit headers on every limited response: `true` (default: the current IETF draft and `Retry-After`),
   * `false` (none), `'openai'` (OpenAI's `x-ratelimit-*-requests` and `-tokens`, and `Retry-After`), or
   * `{ standard, legacy, retryAfter, openai }`.
   */
  headers?: HeaderOptions | boolean | 'openai'
  /** The 429 body: a string becomes the problem's `detail`; an object is sent as the whole body; a function builds either. */
  message?: string | ResponseBody | ((request: R, decision: Decision) => string | ResponseBody)
  /** HTTP status of a denied request. Default 429. */
  statusCode?: number
  /**
   * HTTP status of a blocked request and of the one whose denial began the block (a limiter with
   * `block`). Default 429; 403 for a ban.
   */
  blockedStatusCode?: number
  /**
   * Asked once when the response has been sent: `false` gives the request's units back (a refund), so
   * only the requests it answers `true` for stay counted. `(req, res) => res.statusCode >= 400` counts
   * failures only (express-rate-limit's `skipSuccessfulRequests`). A request whose client left before the
   * response was sent stays counted, unasked. It must answer synchronously: a promise, or a throw, counts
   * the request and emits one `SluiceWarning` per limit (the response is gone, there is no one to tell).
   * Only `false` refunds. Default: every admitted request counts.
   */
  countWhen?: (request: R, response: S) => boolean
  /**
   * Most requests of one client (by its address, as `'ip'` reads it) held at once in one key's queue
   * (a leakyBucket with `maxQueueMs`), in this process. Past it a request is answered at once with
   * `statusCode` and its slot is given back (when nobody queued behind it). An integer >= 1. Default 16.
   */
  queuePerClient?: number
  /**
   * Decide and count as usual, but never deny or hold: a request the rules deny (or would queue) goes
   * through, published on `sluice:http` with `action: 'shadow'`, and the limit sends no rate-limit headers
   * (it does not advertise a policy it does not enforce). For rolling a limit out safely. Default false.
   */
  shadow?: boolean
  /**
   * A guard built by `overload({ … })` from `@sluice/core`, asked at the start of each request, before the
   * per-client limits: a request it sheds is answered with the guard's `status` (default 503) and
   * `Retry-After`, and counts against no client. A request it would shed but marks `critical` is asked of
   * the per-client limits first, and takes the critical headroom only if they admit it (over its client's
   * limit, it is denied as usual). One guard may serve several limits; a request enters it once. Default: none.
   */
  overload?: Overload<R>
}

/** The options that build a limiter; `limiter` takes their place. */
export const LIMITER_OPTION_NAMES = ['rules', 'store', 'prefix', 'onStoreError', 'block'] as const

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
  'blockedStatusCode',
  'countWhen',
  'settle',
  'queuePerClient',
  'shadow',
  'overload',
] as const

/** The option names every adapter accepts; an adapter adds its own (such as `onLimited`). */
export const HTTP_OPTION_NAMES = [...LIMITER_OPTION_NAMES, 'limiter', ...REQUEST_OPTION_NAMES] as const

/** Checks one adapter-only option; `option` names it in errors. */
export type OptionCheck = (option: string, value: unknown) => unknown

/**
 * Options after parsing: every given value checked, `headers` resolved, everything else as the user wrote
 * it, and `undefined` for what was not given (so a merge can still fill it). `own` holds the adapter's
 * own options, checked by the adapter's checks.
 */
export interface ParsedHttpOptions<R, S = unknown> {
  /** Where these options were given, for errors raised when they are built: `rateLimit`, `sluice`. */
  readonly where: string
  readonly rules: RulesOption<R> | undefined
  readonly store: Store | undefined
  readonly prefix: string | undefined
  readonly onStoreError: StoreErrorPolicy<R> | undefined
  /** As the user wrote it (checked): `createLimiter` resolves it. */
  readonly block: BlockOptions | undefined
  readonly limiter: Limiter<R> | undefined
  readonly key: KeySpec<R> | undefined
  readonly onMissingKey: MissingKeyPolicy | undefined
  readonly ipv6Subnet: number | undefined
  readonly cost: HttpLimitOptions<R, S>['cost']
  readonly skip: ((request: R) => boolean | Promise<boolean>) | undefined
  readonly headers: ResolvedHeaderOptions | undefined
  readonly message: HttpLimitOptions<R>['message'] | undefined
  readonly statusCode: number | undefined
  readonly blockedStatusCode: number | undefined
  readonly countWhen: ((request: R, response: S) => boolean) | undefined
  readonly settle: HttpLimitOptions<R, S>['settle']
  readonly queuePerClient: number | undefined
  readonly shadow: boolean | undefined
  readonly overload: Overload<R> | undefined
  readonly own: Readonly<Record<string, unknown>>
}

/** Names users of other limiters write, and what sluice takes instead. */
const MIGRATION_HINTS: Readonly<Record<string, string>> = {
  windowMs:
    'rules, e.g. rules: [fixedWindow({ limit: 100, windowMs: 60_000 })] (docs/migrating.md#from-express-rate-limit)',
  limit:
    'rules, e.g. rules: [fixedWindow({ limit: 100, windowMs: 60_000 })] (docs/migrating.md#from-express-rate-limit)',
  max: 'rules, e.g. rules: [fixedWindow({ limit: 100, windowMs: 60_000 })] (docs/migrating.md#migrating)',
  timeWindow:
    'rules, e.g. rules: [fixedWindow({ limit: 100, windowMs: 60_000 })] (docs/migrating.md#from-fastifyrate-limit)',
  keyGenerator: "key: a function of the request, 'ip', 'route' or { header } (docs/keys-and-headers.md#keys)",
  handler: 'onLimited (docs/migrating.md#from-express-rate-limit)',
  standardHeaders: 'headers: { standard, legacy, retryAfter } (docs/keys-and-headers.md#headers)',
  legacyHeaders: 'headers: { legacy: true } (docs/keys-and-headers.md#headers)',
}

/**
 * Parses an adapter's options. `where` names them in errors (`rateLimit`, `sluice`, `config.rateLimit`);
 * `own` lists the adapter's own options with their checks. Throws `InvalidOptionError` for an unknown
 * name (whatever its value), a bad value, or `limiter` given beside the options it replaces.
 */
export function parseHttpOptions<R, S = unknown>(
  where: string,
  options: unknown,
  own: Readonly<Record<string, OptionCheck>> = {},
): ParsedHttpOptions<R, S> {
  if (options !== null && typeof options === 'object' && !Array.isArray(options)) {
    for (const name of Object.keys(options)) {
      const hint = MIGRATION_HINTS[name]
      if (hint !== undefined && !Object.hasOwn(own, name)) {
        throw new InvalidOptionError(`${where}.${name}`, (options as Record<string, unknown>)[name], hint)
      }
    }
  }
  const o = readOptions<HttpLimitOptions<R, S> & Record<string, unknown>>(
    where,
    options as HttpLimitOptions<R, S> & Record<string, unknown>,
    [...HTTP_OPTION_NAMES, ...Object.keys(own)],
    true,
  )
  const name = (option: string) => `${where}.${option}`
  if (o.limiter !== undefined) {
    limiterOption(name('limiter'), o.limiter)
    for (const option of LIMITER_OPTION_NAMES) {
      if (o[option] !== undefined) {
        throw new InvalidOptionError(
          name(option),
          o[option],
          `no ${option} when a limiter is given (the limiter has its own)`,
        )
      }
    }
  }
  if (o.rules !== undefined) rulesOption(name('rules'), o.rules)
  if (o.store !== undefined) storeOption(name('store'), o.store)
  if (o.prefix !== undefined) prefixOption(name('prefix'), o.prefix)
  if (o.onStoreError !== undefined) storeErrorPolicyOption(name('onStoreError'), o.onStoreError)
  if (o.key !== undefined) keySpecOption(name('key'), o.key)
  if (o.onMissingKey !== undefined) missingKeyOption(name('onMissingKey'), o.onMissingKey)
  if (o.ipv6Subnet !== undefined) subnetOption(name('ipv6Subnet'), o.ipv6Subnet)
  if (o.cost !== undefined && typeof o.cost !== 'function') integerOption(name('cost'), o.cost, 1)
  if (o.skip !== undefined) functionOption(name('skip'), o.skip)
  if (o.message !== undefined) messageOption(name('message'), o.message)
  if (o.statusCode !== undefined) statusOption(name('statusCode'), o.statusCode)
  if (o.block !== undefined) blockOption(name('block'), o.block)
  if (o.blockedStatusCode !== undefined) statusOption(name('blockedStatusCode'), o.blockedStatusCode)
  if (o.countWhen !== undefined) functionOption(name('countWhen'), o.countWhen)
  if (o.settle !== undefined) functionOption(name('settle'), o.settle)
  if (o.queuePerClient !== undefined) integerOption(name('queuePerClient'), o.queuePerClient, 1)
  if (o.shadow !== undefined) booleanOption(name('shadow'), o.shadow)
  if (o.overload !== undefined && !isOverload(o.overload)) {
    throw new InvalidOptionError(name('overload'), o.overload, 'a guard built by overload({ … })')
  }
  const ownValues: Record<string, unknown> = {}
  for (const option of Object.keys(own)) {
    if (o[option] !== undefined) ownValues[option] = own[option]!(name(option), o[option])
  }
  return {
    where,
    rules: o.rules,
    store: o.store,
    prefix: o.prefix,
    onStoreError: o.onStoreError,
    block: o.block,
    limiter: o.limiter,
    key: o.key,
    onMissingKey: o.onMissingKey,
    ipv6Subnet: o.ipv6Subnet,
    cost: o.cost,
    skip: o.skip,
    headers: o.headers === undefined ? undefined : resolveHeaderOptions(o.headers, name('headers')),
    message: o.message,
    statusCode: o.statusCode,
    blockedStatusCode: o.blockedStatusCode,
    countWhen: o.countWhen,
    settle: o.settle,
    queuePerClient: o.queuePerClient,
    shadow: o.shadow,
    overload: o.overload,
    own: ownValues,
  }
}

/**
 * `over` merged over `base`: each option `over` gives replaces `base`'s. Giving `limiter` drops `base`'s
 * limiter-building options, and giving any of those drops `base`'s `limiter`, so the result never holds
 * both. The result keeps `over`'s `where`, so an error at build names the options the user wrote last.
 */
export function mergeHttpOptions<R, S = unknown>(
  base: ParsedHttpOptions<R, S>,
  over: ParsedHttpOptions<R, S>,
): ParsedHttpOptions<R, S> {
  const merged: Record<string, unknown> = { ...base, where: over.where, own: { ...base.own, ...over.own } }
  for (const option of Object.keys(over) as (keyof ParsedHttpOptions<R, S>)[]) {
    if (option !== 'where' && option !== 'own' && over[option] !== undefined) merged[option] = over[option]
  }
  if (over.limiter !== undefined) for (const option of LIMITER_OPTION_NAMES) merged[option] = undefined
  else if (LIMITER_OPTION_NAMES.some((option) => over[option] !== undefined)) merged.limiter = undefined
  return merged as unknown as ParsedHttpOptions<R, S>
}

function messageOption(option: string, value: unknown): void {
  if (typeof value === 'string' || typeof value === 'function') return
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && isPlainObject(value)) return
  throw new InvalidOptionError(option, value, 'a string, a plain object (the JSON body), or a function')
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function statusOption(option: string, value: unknown): void {
  const status = integerOption(option, value, 400)
  if (status > 599) throw new InvalidOptionError(option, value, 'an HTTP error status from 400 to 599')
}
