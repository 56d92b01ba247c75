/**
 * @module Key builders: how an HTTP request becomes the string a limiter counts against, without
 * knowing the framework. An adapter supplies a RequestView; the user picks the parts ('ip', 'route',
 * headers, functions) and what happens when one is absent. `compileKey` settles everything the spec
 * decides, so the per-request function only reads, escapes and joins.
 */
import { isIPv4, isIPv6 } from 'node:net'
import { describe, ErrorCode, InvalidOptionError, SluiceError } from './errors.ts'
import { definedOnly, knownKeys } from './options.ts'

/** How an adapter reads its framework's request; each adapter supplies one. */
export interface RequestView<R> {
  /** The client's address as the framework sees it (after its proxy trust settings). */
  ip(req: R): string | undefined
  /** Method + route template, e.g. "POST /pay/:id" (never the raw URL with ids); the adapter picks it. */
  route(req: R): string
  /** Header value by lower-case name. */
  header(req: R, name: string): string | string[] | undefined
  /**
   * Records that `limiter` counts `req`: true the first time, false when that limiter already counted it.
   * For an adapter whose requests have a cheap slot of their own (a decorated field). Without it, core
   * keeps a WeakSet of requests per limiter, whose entries cost the garbage collector more. Views that
   * see the same request objects and share a limiter must keep their marks in the same place.
   */
  countOnce?(req: R, limiter: object): boolean
}

/**
 * One part of a key:
 * - `'ip'`: the client address; IPv6 grouped by subnet (see `ipv6Subnet`), IPv4-mapped IPv6 read as IPv4.
 * - `'route'`: method and route template, as the adapter's view reports it.
 * - `{ header }`: a request header, or several (each one a part of its own, in the order given).
 * - a function of the request: its string is the part; `undefined`, `null` or `''` mean absent.
 */
export type KeyPart<R> =
  | 'ip'
  | 'route'
  | { header: string | readonly string[] }
  | ((req: R) => string | undefined | null)

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
  onMissing?: MissingKeyPolicy
}

/** A built key, or why none could be built and what the policy says to do about it. */
export type KeyResult =
  | { readonly ok: true; readonly key: string }
  | {
      readonly ok: false
      /** The absent part in words, e.g. `'header x-channel'`, for the 400 body or a log line. */
      readonly missing: string
      readonly policy: 'reject' | 'skip'
    }

/** Default prefix length for grouping IPv6 clients. */
export const DEFAULT_IPV6_SUBNET = 56

/**
 * Compiles a key spec against an adapter's view. Throws `InvalidOptionError` (option `key`,
 * `ipv6Subnet`, `onMissing` or `view`) for a spec that could never work.
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
): (req: R) => KeyResult {
  const o = definedOnly(options)
  knownKeys('compileKey', o, ['ipv6Subnet', 'onMissing'])
  const subnet = o.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : subnetOption(o.ipv6Subnet)
  const onMissing = missingPolicy(o.onMissing)
  checkView(view)

  const list = Array.isArray(spec) ? (spec as readonly KeyPart<R>[]) : [spec as KeyPart<R>]
  if (list.length === 0) throw new InvalidOptionError('key', spec, `${EXPECTED_PART}, or a non-empty list`)
  const readers: Reader<R>[] = []
  for (let i = 0; i < list.length; i++) compilePart(list[i]!, i, view, subnet, readers)
  // Escaping is only needed where values meet: several parts, or one header with several values.
  const joined = readers.length > 1
  const parts = readers.map((r) => withPolicy(r, joined, onMissing))

  if (parts.length === 1) {
    const { read, fallback, failure } = parts[0]!
    return (req) => {
      const value = read(req) ?? fallback
      return value === undefined ? failure! : { ok: true, key: value }
    }
  }
  const count = parts.length
  return (req) => {
    let key = ''
    for (let i = 0; i < count; i++) {
      const part = parts[i]!
      const value = part.read(req) ?? part.fallback
      if (value === undefined) return part.failure!
      key = i === 0 ? value : `${key}:${value}`
    }
    return { ok: true, key }
  }
}

/**
 * Normalised, subnet-grouped form of an IP for use in a key; undefined when `ip` is not an IP address.
 * IPv4 stays as it is (`203.0.113.7`); IPv6 becomes its network, e.g. `2001:db8:ab:cd00::/56`;
 * IPv4-mapped IPv6 (`::ffff:203.0.113.7`, `::ffff:cb00:7107`) is read as the IPv4 address;
 * a zone id (`fe80::1%eth0`) names the server's interface, not the client, and is dropped.
 */
export function ipKey(ip: string, ipv6Subnet: number = DEFAULT_IPV6_SUBNET): string | undefined {
  return addressKey(ip, subnetOption(ipv6Subnet))
}

/** Reads one part of a key: its text (escaped as asked) or undefined when absent. */
interface Reader<R> {
  readonly what: string
  /** Header values are escaped even alone, since a header sent twice must not read as one value. */
  readonly alwaysEscaped: boolean
  readonly read: (req: R, joined: boolean) => string | undefined
}

/** A reader with its missing-part policy applied, and its escaping settled. */
interface Part<R> {
  readonly read: (req: R) => string | undefined
  /** The default for an absent part, already escaped as the part's values are. */
  readonly fallback: string | undefined
  /** The answer when the part is absent and there is no default; shared, frozen. */
  readonly failure: KeyResult | undefined
}

const EXPECTED_PART = "'ip', 'route', { header: name or names }, a function"

function compilePart<R>(
  part: KeyPart<R>,
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
    out.push({ what: 'route', alwaysEscaped: false, read: (req, joined) => textOf(view.route(req), joined) })
  } else if (typeof part === 'function') {
    const fn = part
    const what = fn.name ? `key function ${fn.name}` : `key function #${index + 1}`
    out.push({
      what,
      alwaysEscaped: false,
      read(req, joined) {
        const value = fn(req)
        if (value === undefined || value === null) return undefined
        if (typeof value !== 'string') {
          throw new SluiceError(
            ErrorCode.INVALID_KEY,
            `The ${what} returned ${describe(value)}; expected a string, undefined or null.`,
          )
        }
        return textOf(value, joined)
      },
    })
  } else if (part !== null && typeof part === 'object' && !Array.isArray(part)) {
    const keys = Object.keys(part)
    if (keys.length !== 1 || keys[0] !== 'header') {
      throw new InvalidOptionError('key', part, `${EXPECTED_PART}; a header part has only a "header" field`)
    }
    const names = part.header
    const list: readonly unknown[] = typeof names === 'string' ? [names] : Array.isArray(names) ? names : []
    if (list.length === 0)
      throw new InvalidOptionError('key', names, 'a header name or a non-empty list of them')
    for (const name of list) out.push(headerReader(view, headerName(name)))
  } else {
    throw new InvalidOptionError('key', part, `${EXPECTED_PART}, or a non-empty list of these`)
  }
}

function headerReader<R>(view: RequestView<R>, name: string): Reader<R> {
  return {
    what: `header ${name}`,
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
function headerName(name: unknown): string {
  const lower = typeof name === 'string' ? name.toLowerCase() : undefined
  if (lower === undefined || !TOKEN.test(lower)) {
    throw new InvalidOptionError('key', name, "a header name (letters, digits and !#$%&'*+-.^_`|~)")
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
  return { read, fallback: undefined, failure: Object.freeze({ ok: false, missing: reader.what, policy }) }
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

function subnetOption(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 128) {
    throw new InvalidOptionError('ipv6Subnet', value, 'an integer from 1 to 128')
  }
  return value
}

function missingPolicy(value: unknown): MissingKeyPolicy {
  if (value === undefined) return 'reject'
  if (value === 'reject' || value === 'skip') return value
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value)
    const fallback = (value as { default?: unknown }).default
    if (keys.length === 1 && typeof fallback === 'string' && fallback !== '') {
      return Object.freeze({ default: fallback })
    }
  }
  throw new InvalidOptionError('onMissing', value, "'reject', 'skip' or { default: a non-empty string }")
}

function checkView(view: unknown): void {
  const v = view as Partial<RequestView<unknown>> | null
  if (
    v === null ||
    typeof v !== 'object' ||
    typeof v.ip !== 'function' ||
    typeof v.route !== 'function' ||
    typeof v.header !== 'function' ||
    (v.countOnce !== undefined && typeof v.countOnce !== 'function')
  ) {
    throw new InvalidOptionError('view', view, 'a request view with ip, route and header functions')
  }
}

// Scratch space for one address at a time: key building is synchronous, so it is never shared.
const words = new Uint16Array(8)

/** `ipKey` without the option check, for compiled keys whose subnet was checked once. */
function addressKey(ip: string, subnet: number): string | undefined {
  if (isIPv4(ip)) return ip // node accepts only canonical dotted quads here
  if (!isIPv6(ip)) return undefined
  const zone = ip.indexOf('%')
  let host: string
  try {
    // The WHATWG parser canonicalises: lower case, zeros compressed, embedded IPv4 turned into hex.
    host = new URL(`http://[${zone === -1 ? ip : ip.slice(0, zone)}]`).hostname
  } catch {
    return undefined
  }
  readWords(host.slice(1, -1))
  if (words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 && words[4] === 0) {
    if (words[5] === 0xffff) {
      const hi = words[6]!
      const lo = words[7]!
      return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`
    }
  }
  for (let i = 0; i < 8; i++) {
    const bits = subnet - i * 16
    if (bits <= 0) words[i] = 0
    else if (bits < 16) words[i] = words[i]! & (0xffff << (16 - bits))
  }
  return `${formatWords()}/${subnet}`
}

/** Fills `words` from a canonical IPv6 text (hex groups, at most one `::`, no embedded IPv4). */
function readWords(text: string): void {
  words.fill(0)
  const gap = text.indexOf('::')
  const head = gap === -1 ? text : text.slice(0, gap)
  const tail = gap === -1 ? '' : text.slice(gap + 2)
  if (head !== '') {
    const groups = head.split(':')
    for (let i = 0; i < groups.length; i++) words[i] = Number.parseInt(groups[i]!, 16)
  }
  if (tail !== '') {
    const groups = tail.split(':')
    const start = 8 - groups.length
    for (let i = 0; i < groups.length; i++) words[start + i] = Number.parseInt(groups[i]!, 16)
  }
}

/** `words` as canonical text (RFC 5952): the longest run of two or more zero groups becomes `::`. */
function formatWords(): string {
  let runStart = -1
  let runLength = 1
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && words[j] === 0) j++
    if (j - i > runLength) {
      runStart = i
      runLength = j - i
    }
    i = j
  }
  if (runStart === -1) return groups(0, 8)
  return `${groups(0, runStart)}::${groups(runStart + runLength, 8)}`
}

function groups(from: number, to: number): string {
  let text = ''
  for (let i = from; i < to; i++) text += i === from ? words[i]!.toString(16) : `:${words[i]!.toString(16)}`
  return text
}
