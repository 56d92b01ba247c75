/**
 * @module The client's address on a plain node:http server: the socket's, or, behind proxies the user
 * names (`trustProxy`: addresses and CIDRs), the first address in `X-Forwarded-For` read from the right
 * that is not one of them. Each trusted proxy appends the address it received from, so the rightmost
 * entries are the ones a client cannot write; what lies left of the first untrusted hop is the client's
 * own say and is never read. `true` is refused: believing every hop lets any client choose its address;
 * so is a list that trusts every address of a family (`0.0.0.0/0`, `::/0`, or blocks that add up to one),
 * which does the same.
 */
import type { IncomingMessage } from 'node:http'
import { BlockList, isIP } from 'node:net'
import { InvalidOptionError } from '@sluice/core'
import { headerValues } from '@sluice/core/http'

/** Reads a request's client address. */
export type AddressOf = (req: IncomingMessage) => string | undefined

const EXPECTED = "a list of your proxies' addresses or CIDRs, such as ['127.0.0.1', '10.0.0.0/8']"

/** The socket's address, for a server no proxy stands before. */
export const socketAddress: AddressOf = (req) => req.socket.remoteAddress

/**
 * Checks `trustProxy` and compiles it into the address reader. Throws `InvalidOptionError` for `true`
 * (saying why it is refused), for anything not a list, and for an entry that is not an address or a CIDR.
 */
export function trustProxyOption(option: string, value: unknown): AddressOf {
  const everyone = (what: string) =>
    new InvalidOptionError(
      option,
      value,
      `${EXPECTED}. ${what} is refused: it would believe every X-Forwarded-For entry, so any client could ` +
        'send an address of its choice and get a fresh limit on every request',
    )
  if (value === true) throw everyone('true')
  if (value === false) return socketAddress
  if (!Array.isArray(value)) throw new InvalidOptionError(option, value, EXPECTED)
  const trusted = new BlockList()
  const blocks: Block[] = []
  for (const [i, entry] of (value as unknown[]).entries()) {
    blocks.push(addEntry(trusted, `${option}[${i}]`, entry))
  }
  const all = familyTrustedWhole(blocks)
  if (all !== undefined) throw everyone(`A list that trusts every ${all} address`)
  return value.length === 0 ? socketAddress : forwardedAddress(trusted)
}

/** An entry's addresses, as a range in the IPv6 space (IPv4 as its mapped form, `::ffff:a.b.c.d`). */
interface Block {
  readonly first: bigint
  readonly last: bigint
}

function addEntry(trusted: BlockList, option: string, entry: unknown): Block {
  if (typeof entry !== 'string') throw new InvalidOptionError(option, entry, 'an address or a CIDR')
  const slash = entry.indexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(address)
  const type = family === 4 ? 'ipv4' : 'ipv6'
  if (family === 0) throw new InvalidOptionError(option, entry, 'an address or a CIDR')
  const width = family === 4 ? 32 : 128
  if (slash === -1) {
    trusted.addAddress(address, type)
    return blockOf(address, family, width, width)
  }
  const bits = entry.slice(slash + 1)
  const prefix = Number(bits)
  if (!/^\d{1,3}$/.test(bits) || prefix > width) {
    throw new InvalidOptionError(option, entry, `a CIDR whose prefix is 0 to ${width}`)
  }
  trusted.addSubnet(address, prefix, type)
  return blockOf(address, family, prefix, width)
}

/** Where IPv4 addresses sit in the IPv6 space, as Node's BlockList matches them: `::ffff:0:0/96`. */
const MAPPED = 0xffffn << 32n
const V4_LAST = MAPPED + (1n << 32n) - 1n
const V6_LAST = (1n << 128n) - 1n

function blockOf(address: string, family: number, prefix: number, width: number): Block {
  const host = BigInt(width - prefix)
  const value = family === 4 ? MAPPED + v4Number(address) : v6Number(address)
  const first = (value >> host) << host
  return { first, last: first + (1n << host) - 1n }
}

/**
 * 'IPv4' or 'IPv6' when the blocks together hold every address of that family (a client of that family
 * could then name any address), else undefined.
 */
function familyTrustedWhole(blocks: readonly Block[]): 'IPv4' | 'IPv6' | undefined {
  if (covers(blocks, MAPPED, V4_LAST)) return 'IPv4'
  if (covers(blocks, 0n, V6_LAST)) return 'IPv6'
  return undefined
}

/** Whether the blocks leave no gap in [from, to]. */
function covers(blocks: readonly Block[], from: bigint, to: bigint): boolean {
  const sorted = [...blocks].sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  let next = from
  for (const { first, last } of sorted) {
    if (last < next) continue
    if (first > next) return false
    if (last >= to) return true
    next = last + 1n
  }
  return false
}

function v4Number(address: string): bigint {
  let n = 0n
  for (const octet of address.split('.')) n = (n << 8n) | BigInt(Number(octet))
  return n
}

/** An IPv6 address `isIP` accepted, `::` and a trailing dotted IPv4 included, as a number. */
function v6Number(address: string): bigint {
  let text = address
  const dot = text.lastIndexOf('.')
  if (dot !== -1) {
    const colon = text.lastIndexOf(':')
    const v4 = v4Number(text.slice(colon + 1))
    text = `${text.slice(0, colon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const groups = (part: string) => (part === '' ? [] : part.split(':'))
  const before = groups(head)
  const after = tail === undefined ? [] : groups(tail)
  const all = [...before, ...Array<string>(8 - before.length - after.length).fill('0'), ...after]
  let n = 0n
  for (const group of all) n = (n << 16n) | BigInt(Number.parseInt(group, 16))
  return n
}

/** Walks `X-Forwarded-For` from the right while each hop is a trusted proxy. */
function forwardedAddress(trusted: BlockList): AddressOf {
  const isTrusted = (address: string) => {
    const plain = unmapped(address)
    const family = isIP(plain)
    return family !== 0 && trusted.check(plain, family === 4 ? 'ipv4' : 'ipv6')
  }
  return (req) => {
    let address = req.socket.remoteAddress
    if (address === undefined || !isTrusted(address)) return address
    const lines = headerValues(req, 'x-forwarded-for')
    if (lines === undefined) return address
    const hops = (typeof lines === 'string' ? lines : lines.join(',')).split(',')
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!.trim()
      if (hop === '') continue
      address = hop
      // An entry that is not an address is never trusted: it is the client's, and 'ip' keys reject it.
      if (!isTrusted(hop)) return hop
    }
    return address
  }
}

/** `::ffff:10.0.0.1` (an IPv4 client of a dual-stack socket) as `10.0.0.1`. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}
