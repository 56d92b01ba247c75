/**
 * @module Client addresses as keys: IPv4 as it is, IPv6 grouped by subnet (one client often holds a whole
 * /64 or more and could otherwise rotate addresses past any limit), IPv4-mapped IPv6 read as IPv4.
 */
import { isIPv4, isIPv6 } from 'node:net'
import { InvalidOptionError } from '../../errors.ts'

/** Default prefix length for grouping IPv6 clients. */
export const DEFAULT_IPV6_SUBNET = 56

/**
 * Normalised, subnet-grouped form of an IP for use in a key; undefined when `ip` is not an IP address.
 * IPv4 stays as it is (`203.0.113.7`); IPv6 becomes its network, e.g. `2001:db8:ab:cd00::/56`;
 * IPv4-mapped IPv6 (`::ffff:203.0.113.7`, `::ffff:cb00:7107`) is read as the IPv4 address;
 * a zone id (`fe80::1%eth0`) names the server's interface, not the client, and is dropped.
 */
export function ipKey(ip: string, ipv6Subnet: number = DEFAULT_IPV6_SUBNET): string | undefined {
  return addressKey(ip, subnetOption('ipv6Subnet', ipv6Subnet))
}

/** An IPv6 prefix length: an integer from 1 to 128. */
export function subnetOption(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 128) {
    throw new InvalidOptionError(option, value, 'an integer from 1 to 128')
  }
  return value
}

// Scratch space for one address at a time: key building is synchronous, so it is never shared.
const words = new Uint16Array(8)

/** `ipKey` without the option check, for compiled keys whose subnet was checked once. */
export function addressKey(ip: string, subnet: number): string | undefined {
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
