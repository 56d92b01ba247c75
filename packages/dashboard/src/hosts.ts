/**
 * @module Which `Host` the dashboard answers for, and which `Origin` may write. A page fetched under a name
 * the dashboard does not serve (a DNS-rebound `evil.example` pointed at 127.0.0.1) must get no page, no
 * token and no data: the browser treats such a page as the attacker's own origin, so neither the CSRF token
 * nor an Origin compared with the attacker-chosen Host could stop it. The dashboard therefore serves only
 * names it knows: by default the address the connection reached (its listener) and, for a loopback
 * listener, only loopback names; for any other listener also the machine's host name; each with the
 * listener's port. `allowedHosts` names more.
 */
import type { IncomingMessage } from 'node:http'
import { hostname } from 'node:os'
import type { TLSSocket } from 'node:tls'
import { InvalidOptionError } from '@sluice/core'

/** A Host header's parts, lower-cased: `name` keeps the brackets of an IPv6 literal; `port` may be ''. */
interface HostParts {
  name: string
  port: string
}

const HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/

/** A Host header (or an origin's host) read strictly; undefined when it is not a plain name and port. */
export function hostParts(text: string | undefined): HostParts | undefined {
  if (text === undefined) return undefined
  const match = HOST.exec(text.toLowerCase())
  if (match === null) return undefined
  return { name: match[1]!, port: match[2] ?? '' }
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]']

/** The listener's address as a Host names it: `::ffff:1.2.3.4` is `1.2.3.4`, an IPv6 one is bracketed. */
function addressName(address: string | undefined): string | undefined {
  if (address === undefined || address === '') return undefined
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (v4 !== null) return v4[1]
  return address.includes(':') ? `[${address.toLowerCase()}]` : address
}

function isLoopback(name: string): boolean {
  return name === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(name)
}

/** The configured extra Hosts: `name` (any port) or `name:port`, checked once. */
export function allowedHostsOption(value: unknown): readonly HostParts[] {
  if (value === undefined) return []
  if (!Array.isArray(value)) {
    throw new InvalidOptionError(
      'dashboard.allowedHosts',
      value,
      "a list of host names, e.g. ['ops.example.com']",
    )
  }
  return value.map((item) => {
    const parts = typeof item === 'string' ? hostParts(item) : undefined
    if (parts === undefined) {
      throw new InvalidOptionError(
        'dashboard.allowedHosts',
        item,
        "a host name or address, with an optional port: 'ops.example.com', 'ops.example.com:8443', '[::1]:8080'",
      )
    }
    return parts
  })
}

/** The scheme the request arrived with on this listener. */
function schemeOf(req: IncomingMessage): 'http' | 'https' {
  return (req.socket as TLSSocket | undefined)?.encrypted === true ? 'https' : 'http'
}

export class HostPolicy {
  readonly #extra: readonly HostParts[]
  readonly #trustedOrigins: readonly string[]
  readonly #machine = hostname().toLowerCase()

  constructor(extra: readonly HostParts[], trustedOrigins: readonly string[]) {
    this.#extra = extra
    this.#trustedOrigins = trustedOrigins
  }

  /** Whether `host` (a Host header, or an origin's host) names this dashboard on the request's listener. */
  serves(req: IncomingMessage, host: string | undefined): boolean {
    const parts = hostParts(host)
    if (parts === undefined) return false
    for (const extra of this.#extra) {
      if (extra.name === parts.name && (extra.port === '' || extra.port === parts.port)) return true
    }
    const socket = req.socket
    const port = socket?.localPort
    if (port === undefined) return false
    const defaultPort = schemeOf(req) === 'https' ? 443 : 80
    // A Host leaves the scheme's default port out.
    const portMatches = parts.port === '' ? port === defaultPort : Number(parts.port) === port
    if (!portMatches) return false
    const listener = addressName(socket.localAddress)
    if (listener === undefined) return false
    if (isLoopback(listener)) return LOOPBACK_NAMES.includes(parts.name) || parts.name === listener
    return parts.name === listener || parts.name === this.#machine
  }

  /** Whether a write's `Origin` is this dashboard's own (scheme included) or one of `trustedOrigins`. */
  ownOrigin(req: IncomingMessage, origin: string): boolean {
    const normal = origin.replace(/\/+$/, '').toLowerCase()
    if (this.#trustedOrigins.includes(normal)) return true
    const match = /^([a-z][a-z0-9+.-]*):\/\/([^/?#@]+)$/.exec(normal)
    if (match === null || match[1] !== schemeOf(req)) return false
    return this.serves(req, match[2])
  }
}
