/**
 * @module Key builders: how an HTTP request becomes the string a limiter counts against, without
 * knowing the framework. An adapter supplies a RequestView; the user picks the parts ('ip', 'route',
 * headers, functions) and what happens when one is absent. `compileKey` settles everything the spec
 * decides, so the per-request function only reads, escapes and joins.
 *
 * Over 300 lines: checking a spec and reading a request share each part's rules (its text, its escaping,
 * its missing-key policy), which are written once, here.
 */
import { describe, ErrorCode, InvalidOptionError, SluiceError } from '../../errors.ts'
import { isPromise, readOptions } from '../../options.ts'
import type { RequestView } from '../adapter.ts'
import { addressKey, DEFAULT_IPV6_SUBNET, subnetOption } from './ip.ts'

/**
 * One part of a key:
 * - `'ip'`: the client address; IPv6 grouped by subnet (see `ipv6Subnet`), IPv4-mapped IPv6 read as IPv4.
 * - `'route'`: method and route template, as the adapter's view reports it; a `HEAD` request counts as
 *   its route's `GET` (the framework answers it with the GET handler).
 * - `{ header }`: a request header, or several (each one a part of its own, in the order given).
 * - a function of the request: its string is the part; `undefined`, `null` or `''` mean absent. It may
 *   return a promise (an API key's owner looked up in a cache); the request then waits for it.
 */
export type KeyPart<R> =
  | 'ip'
  | 'route'
  | { header: string | readonly string[] }
  | ((req: R) => string | undefined | null | Promise<string | undefined | null>)

/** A part, or a list of parts joined into one key. */
export type KeySpec<R> = KeyPart<R> | readonly KeyPart<R>[]

/** What to do when a key part is absent: answer 400, skip limiting, or use a default value. */
export type MissingKeyPolicy = 'reject' | 'skip' | { default: string }

export interface KeyOptions {
  /**
   * IPv6 clients are counted per network of this prefix length, since one client often holds a
   * whole /64 or more and could otherwise rotate addresses past any limit. An integer from 1 to 128.
   * Default 56.
   */
  ipv6Subnet?: number
  /**
   * When a part is absent (no such header, an empty value, no address): `'reject'` (the adapter
   * answers 400), `'skip'` (the request is not limited), or `{ default: 'value' }` to count the
   * request under that value for the part. Default `'reject'`.
   */
  onMissingKey?: MissingKeyPolicy
}

/** A built key, or why none could be built and what the policy says to do about it. */
export type KeyResult =
  | { readonly ok: true; readonly key: string }
  | {
      readonly ok: false
      /** The absent part in words, e.g. `'header x-channel'` or `'key function #1'`, for a log line. */
      readonly missing: string
      /**
       * What a client is told (the 400's detail): the header to send, or, for any other part (an address,
       * a function), that the request cannot be identified. Never sluice's own numbering.
       */
      readonly detail: string
      readonly policy: 'reject' | 'skip'
    }

/**
 * Compiles a key spec against an adapter's view. Throws `InvalidOptionError` for a spec that could never
 * work, naming the option under `where` when given (`rateLimit.key`, `rateLimit.onMissingKey`, ...).
 *
 * Parts are joined with `:`. In a key of several parts, `\` and `:` inside a value are escaped
 * (`\\`, `\:`), so no two different lists of values share a key. A header sent several times
 * becomes its values joined by `\,`, which no single value can produce. A key of one `'ip'`,
 * `'route'` or function part is that part's value as is.
 */
export function compileKey<R>(
  spec: KeySpec<R>,
  view: RequestView<R>,
  options?: KeyOptions,
  where?: string,
): (req: R) => KeyResult | Promise<KeyResult> {
  const name = (option: string) => (where === undefined ? option : `${where}.${option}`)
  const o = readOptions(where ?? 'compileKey', options, ['ipv6Subnet', 'onMissingKey'])
  const subnet =
    o.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : subnetOption(name('ipv6Subnet'), o.ipv6Subnet)
  const onMissing = missingKeyOption(name('onMissingKey'), o.onMissingKey)
  const list = keySpecOption(name('key'), spec)
  checkView(view)
  const readers: Reader<R>[] = []
  for (let i = 0; i < list.length; i++) compilePart(list[i]!, i, view, subnet, readers)
  // Escaping is only needed where values meet: several parts, or one header with several values.
  const joined = readers.length > 1
  const parts = readers.map((r) => withPolicy(r, joined, onMissing))

  if (parts.length === 1) {
    const { read, fallback, failure } = parts[0]!
    const result = (value: string | undefined): KeyResult => {
      const text = value ?? fallback
      return text === undefined ? failure! : { ok: true, key: text }
    }
    return (req) => {
      const value = read(req)
      return typeof value === 'object' ? value.then(result) : result(value)
    }
  }
  const count = parts.length
  /** Joins parts from `i` on to `key`; only a part a function answered by promise leaves the tick. */
  const joinFrom = (req: R, i: number, key: string): KeyResult | Promise<KeyResult> => {
    for (; i < count; i++) {
      const part = parts[i]!
      const read = part.read(req)
      if (typeof read === 'object') {
        const at = i
        return read.then((value) => {
          const text = value ?? part.fallback
          if (text === undefined) return part.failure!
          return joinFrom(req, at + 1, at === 0 ? text : `${key}:${text}`)
        })
      }
      const value = read ?? part.fallback
      if (value === undefined) return part.failure!
      key = i === 0 ? value : `${key}:${value}`
    }
    return { ok: true, key }
  }
  return (req) => joinFrom(req, 0, '')
}

/** A key part checked once: a header part's names are lower-cased and split one per part. */
type CheckedPart<R> =
  | 'ip'
  | 'route'
  | { readonly header: string }
  | ((req: R) => string | undefined | null | Promise<string | undefined | null>)

/**
 * Checks a key spec (`option` names it in errors) and returns its parts, one per header name. For the HTTP
 * kit, which checks every option before it builds anything.
 */
export function keySpecOption<R>(option: string, spec: unknown): readonly CheckedPart<R>[] {
  const list = Array.isArray(spec) ? (spec as readonly unknown[]) : [spec]
  if (list.length === 0) throw new InvalidOptionError(option, spec, `${EXPECTED_PART}, or a non-empty list`)
  const parts: CheckedPart<R>[] = []
  for (const part of list) {
    if (part === 'ip' || part === 'route' || typeof part === 'function') {
      parts.push(part as CheckedPart<R>)
    } else if (part !== null && typeof part === 'object' && !Array.isArray(part)) {
      const keys = Object.keys(part)
      if (keys.length !== 1 || keys[0] !== 'header') {
        throw new InvalidOptionError(
          option,
          part,
          `${EXPECTED_PART}; a header part has only a "header" field`,
        )
      }
      const names = (part as { header: unknown }).header
      const given: readonly unknown[] =
        typeof names === 'string' ? [names] : Array.isArray(names) ? names : []
      if (given.length === 0) {
        throw new InvalidOptionError(option, names, 'a header name or a non-empty list of them')
      }
      for (const name of given) parts.push({ header: headerName(option, name) })
    } else {
      throw new InvalidOptionError(option, part, `${EXPECTED_PART}, or a non-empty list of these`)
    }
  }
  return parts
}

/** Reads one part of a key: its text (escaped as asked) or undefined when absent. */
interface Reader<R> {
  readonly what: string
  /** The header this part reads, for a client-facing detail; undefined for other parts. */
  readonly header?: string
  /** Header values are escaped even alone, since a header sent twice must not read as one value. */
  readonly alwaysEscaped: boolean
  readonly read: (req: R, joined: boolean) => string | undefined | Promise<string | undefined>
}

/** A reader with its missing-part policy applied, and its escaping settled. */
interface Part<R> {
  readonly read: (req: R) => string | undefined | Promise<string | undefined>
  /** The default for an absent part, already escaped as the part's values are. */
  readonly fallback: string | undefined
  /** The answer when the part is absent and there is no default; shared, frozen. */
  readonly failure: KeyResult | undefined
}

const EXPECTED_PART = "'ip', 'route', { header: name or names }, a function"

function compilePart<R>(
  part: CheckedPart<R>,
  index: number,
  view: RequestView<R>,
  subnet: number,
  out: Reader<R>[],
): void {
  if (part === 'ip') {
    out.push({
      what: 'ip',
      alwaysEscaped: false,
      read(req, joined) {
        const ip = view.ip(req)
        const key = typeof ip === 'string' ? addressKey(ip, subnet) : undefined
        return key !== undefined && joined ? escapeValue(key) : key
      },
    })
  } else if (part === 'route') {
    out.push({
      what: 'route',
      alwaysEscaped: false,
      read: (req, joined) => textOf(routeKey(view.route(req)), joined),
    })
  } else if (typeof part === 'function') {
    const fn = part
    const what = fn.name ? `key function ${fn.name}` : `key function #${index + 1}`
    out.push({
      what,
      alwaysEscaped: false,
      read(req, joined) {
        const value = fn(req)
        if (value === undefined || value === null) return undefined
        if (typeof value === 'string') return textOf(value, joined)
        // A native promise, whatever thenable the function answered with; its value is checked alike.
        if (isPromise(value)) return Promise.resolve(value).then((v) => checkedText(v, what, joined))
        return checkedText(value, what, joined)
      },
    })
  } else {
    out.push(headerReader(view, part.header))
  }
}

function headerReader<R>(view: RequestView<R>, name: string): Reader<R> {
  return {
    what: `header ${name}`,
    header: name,
    alwaysEscaped: true,
    read(req) {
      const value = view.header(req, name)
      if (typeof value === 'string') return value === '' ? undefined : escapeValue(value)
      if (!Array.isArray(value) || value.length === 0) return undefined
      if (value.length === 1) return value[0] ? escapeValue(String(value[0])) : undefined
      // `\,` never comes out of escapeValue, so several values never read as one.
      let text = escapeValue(String(value[0]))
      for (let i = 1; i < value.length; i++) text += `\\,${escapeValue(String(value[i]))}`
      return text
    },
  }
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/

/** A header name as HTTP allows it (a token), lower-cased once here rather than per request. */
function headerName(option: string, name: unknown): string {
  const lower = typeof name === 'string' ? name.toLowerCase() : undefined
  if (lower === undefined || !TOKEN.test(lower)) {
    throw new InvalidOptionError(option, name, "a header name (letters, digits and !#$%&'*+-.^_`|~)")
  }
  return lower
}

function withPolicy<R>(reader: Reader<R>, joined: boolean, policy: MissingKeyPolicy): Part<R> {
  const read = (req: R) => reader.read(req, joined)
  if (typeof policy === 'object') {
    // The default stands in for a value, so it is escaped exactly as the part's values are.
    const fallback = joined || reader.alwaysEscaped ? escapeValue(policy.default) : policy.default
    return { read, fallback, failure: undefined }
  }
  const detail =
    reader.header === undefined
      ? 'This request cannot be identified for rate limiting.'
      : `This request needs the ${reader.header} header.`
  return {
    read,
    fallback: undefined,
    failure: Object.freeze({ ok: false, missing: reader.what, detail, policy }),
  }
}

/** A key function's answer as a part's text: a string, or absent; anything else is an `INVALID_KEY` error. */
function checkedText(value: unknown, what: string, joined: boolean): string | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'string') {
    throw new SluiceError(
      ErrorCode.INVALID_KEY,
      `The ${what} returned ${describe(value)}; expected a string, undefined or null.`,
    )
  }
  return textOf(value, joined)
}

/**
 * A route's part of a key: a `HEAD` request counts as the `GET` of its route (`HEAD /users/:id` is
 * `GET /users/:id`). Frameworks answer a HEAD with the GET route's handler, so a budget per route must
 * count both, or HEAD would double it.
 */
function routeKey(route: string): string {
  return typeof route === 'string' && route.startsWith('HEAD ') ? `GET ${route.slice(5)}` : route
}

function textOf(value: unknown, joined: boolean): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined
  return joined ? escapeValue(value) : value
}

const SPECIAL = /[\\:]/
const SPECIALS = /[\\:]/g

/** `\` → `\\`, `:` → `\:`. Plain values, the usual case, pass through untouched. */
function escapeValue(value: string): string {
  return SPECIAL.test(value) ? value.replace(SPECIALS, '\\$&') : value
}

/** Checks an `onMissingKey` option (`option` names it in errors). Default `'reject'`. */
export function missingKeyOption(option: string, value: unknown): MissingKeyPolicy {
  if (value === undefined) return 'reject'
  if (value === 'reject' || value === 'skip') return value
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value)
    const fallback = (value as { default?: unknown }).default
    if (keys.length === 1 && typeof fallback === 'string' && fallback !== '') {
      return Object.freeze({ default: fallback })
    }
  }
  throw new InvalidOptionError(option, value, "'reject', 'skip' or { default: a non-empty string }")
}

function checkView(view: unknown): void {
  const v = view as Partial<RequestView<unknown>> | null
  if (
    v === null ||
    typeof v !== 'object' ||
    typeof v.ip !== 'function' ||
    typeof v.route !== 'function' ||
    typeof v.header !== 'function'
  ) {
    throw new InvalidOptionError('view', view, 'a request view with ip, route and header functions')
  }
}
