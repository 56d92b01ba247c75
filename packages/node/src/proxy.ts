/**
 * @module The client's address on a plain node:http server: the socket's, or, behind proxies the user
 * names (`trustProxy`: addresses and CIDRs), the first address in `X-Forwarded-For` read from the right
 * that is not one of them. Each trusted proxy appends the address it received from, so the rightmost
 * entries are the ones a client cannot write; what lies left of the first untrusted hop is the client's
 * own say and is never read. `true` is refused: believing every hop lets any client choose its address.
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
  if (value === true) {
    throw new InvalidOptionError(
      option,
      value,
      `${EXPECTED}. true is refused: it would believe every X-Forwarded-For entry, so any client could send ` +
        'an address of its choice and get a fresh limit on every request',
    )
  }
  if (value === false) return socketAddress
  if (!Array.isArray(value)) throw new InvalidOptionError(option, value, EXPECTED)
  const trusted = new BlockList()
  for (const [i, entry] of (value as unknown[]).entries()) addEntry(trusted, `${option}[${i}]`, entry)
  return value.length === 0 ? socketAddress : forwardedAddress(trusted)
}

function addEntry(trusted: BlockList, option: string, entry: unknown): void {
  if (typeof entry !== 'string') throw new InvalidOptionError(option, entry, 'an address or a CIDR')
  const slash = entry.indexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(address)
  const type = family === 4 ? 'ipv4' : 'ipv6'
  if (family === 0) throw new InvalidOptionError(option, entry, 'an address or a CIDR')
  if (slash === -1) {
    trusted.addAddress(address, type)
    return
  }
  const bits = entry.slice(slash + 1)
  const prefix = Number(bits)
  if (!/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128)) {
    throw new InvalidOptionError(option, entry, `a CIDR whose prefix is 0 to ${family === 4 ? 32 : 128}`)
  }
  trusted.addSubnet(address, prefix, type)
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
