/**
 * @module The dashboard's public options, the table shape it works with, and its error codes; options are
 * read once, at construction, into a plain config (unknown names and invalid values throw
 * `InvalidOptionError`, nothing falls back silently).
 */
import type { IncomingMessage } from 'node:http'
import { InvalidOptionError, type RuleSpec } from '@sluice/core'
import { integerOption, readOptions, stringOption } from '@sluice/core/options'
import type { LiveStatsSnapshot, StatsRedisClient } from '@sluice/metrics'
import { allowedHostsOption, HostPolicy } from './hosts.ts'

/** What a request may do: change tables, look, or nothing at all. */
export type Access = 'write' | 'read' | 'none'

/**
 * One change to a table, as its audit trail records it: the shape of `RedisLimitTable.audit()`'s records
 * (`@sluice/redis`).
 */
export interface TableAuditRecord {
  /** The table's version after the change. */
  readonly version: number
  /** When it was made, in ms since the epoch. */
  readonly time: number
  /** `set`, `delete`, or `restore` (a process wrote the table back into a Redis that had lost it). */
  readonly change: 'set' | 'delete' | 'restore'
  /** The entry changed; `""` for a restore. */
  readonly entry: string
  /** The entry's specs before (`null`: not limited); absent when the table did not hold it. */
  readonly before?: readonly unknown[] | null
  /** The entry's specs after (`null`: not limited); absent when it was deleted. */
  readonly after?: readonly unknown[] | null
  /** Who made the change. */
  readonly actor: string
}

/**
 * What the dashboard needs of a limit table: `createLimitTable` from `@sluice/core`, `RedisLimitTable`
 * from `@sluice/redis`, or anything with the same methods.
 */
export interface DashboardTable {
  /** Rises by one with each change. */
  readonly version: number
  /** Every entry with its rules (`null`: not limited). Rules are shown as `JSON.stringify` renders them. */
  entries(): ReadonlyMap<string, readonly unknown[] | null>
  /**
   * Sets an entry. Must check every spec before writing anything, and reject with a coded error
   * (`code: 'ERR_SLUICE_…'`) when one is invalid: the dashboard answers that code with status 400 (503 for
   * `ERR_SLUICE_STORE…`). `options.actor` names who made the change, for a table that keeps an audit trail
   * (`RedisLimitTable`); a table without one (`createLimitTable`) ignores it.
   */
  set(entry: string, rules: readonly RuleSpec[] | null, options?: { actor?: string }): Promise<void>
  /** Removes an entry (it falls back to `"*"`, or to not limited); `options.actor` as for `set`. */
  delete(entry: string, options?: { actor?: string }): Promise<void>
  /**
   * The last `count` changes (1 to 1000), newest first, as `RedisLimitTable.audit(count)` answers them.
   * Optional: a table without it (`createLimitTable`) shows no trail.
   */
  audit?(count: number): readonly TableAuditRecord[] | Promise<readonly TableAuditRecord[]>
}

/** Who may do what, asked for every request: page, assets and API alike. */
export type AccessPolicy<Request extends IncomingMessage = IncomingMessage> = (
  request: Request,
) => Access | Promise<Access>

export interface DashboardOptions<Request extends IncomingMessage = IncomingMessage> {
  /**
   * Required. Who may do what, per request: `'write'` sees everything and may edit tables, `'read'` sees
   * everything, `'none'` gets 403 for everything. Any other answer, or a throw, is treated as `'none'`.
   */
  access: AccessPolicy<Request>
  /** A Redis client (ioredis or node-redis) to read every process's published stats from. */
  client?: StatsRedisClient
  /** This process's own `liveStats()`, shown as one more instance (do not also publish it to `client`). */
  stats?: { snapshot(): LiveStatsSnapshot }
  /** The name `stats` is shown under. Default `'local'`. */
  instance?: string
  /** Limit tables by name, shown and (for writers) editable. Names: 1 to 100 characters. Default none. */
  tables?: Record<string, DashboardTable>
  /** The prefix the publishers use (`publishStats({ prefix })`). Default `'sluice:stats'`. */
  statsPrefix?: string
  /** Longest history served, in seconds. Integer 10 to 3600. Default 900 (15 minutes). */
  seconds?: number
  /** Most denied keys shown per limiter. Integer 1 to 1000. Default 20. */
  topKeys?: number
  /** Changes of each table's audit trail shown. Integer 0 to 1000. Default 50. */
  auditCount?: number
  /**
   * Where the handler is mounted, for a plain `node:http` server that hands it only some paths
   * (e.g. `'/sluice'`). Express's `req.baseUrl` and the Fastify plugin's prefix are used when present.
   * Default `''` (the whole server).
   */
  basePath?: string
  /**
   * Host names the dashboard answers for besides its own listener's: `'ops.example.com'` (any port) or
   * `'ops.example.com:8443'`. By default it answers only for the address the connection reached with the
   * listener's port (`127.0.0.1:PORT`, `localhost:PORT` and `[::1]:PORT` on a loopback listener; the
   * listener's address and the machine's host name otherwise). Any other `Host` gets 421 and no page, no
   * token and no data, so a name rebound to this machine (DNS rebinding) reaches nothing. Name here the
   * names a proxy in front passes on. Default none.
   */
  allowedHosts?: string[]
  /**
   * Origins besides the dashboard's own (its served Hosts, with the listener's scheme) from which writes
   * are accepted, e.g. `'https://ops.example.com'` behind a proxy that ends TLS. Default none.
   */
  trustedOrigins?: string[]
  /**
   * The token a write must carry in `x-sluice-csrf` (the page gets it in `<meta name="sluice-csrf">`).
   * Default: random per handler, which is right for one process. Several processes behind one address
   * (a cluster, replicas behind a load balancer) must share one: a secret of 32 to 256 URL-safe
   * characters (`[A-Za-z0-9_-]`), e.g. `randomBytes(32).toString('base64url')` kept in your secrets.
   */
  csrfToken?: string
  /** Who a change is recorded as in the audit trail. Default `dashboard <remote address>`. */
  actor?: (request: Request) => string
  /** Largest edit body accepted, in bytes. Integer 256 to 1,048,576. Default 65,536. */
  maxBodyBytes?: number
  /** Milliseconds since the epoch. Default `Date.now`. */
  clock?: () => number
}

/** The dashboard's own error codes; a table's validation errors keep their own (`ERR_SLUICE_INVALID_OPTION` …). */
export const DashboardErrorCode = {
  /** The request's access is `'none'`, or a reader tried to change a table (403). */
  FORBIDDEN: 'ERR_SLUICE_DASHBOARD_FORBIDDEN',
  /** The request's `Host` is not one the dashboard serves (421): nothing is answered for it. */
  HOST: 'ERR_SLUICE_DASHBOARD_HOST',
  /** A write came from another origin (403). */
  CROSS_ORIGIN: 'ERR_SLUICE_DASHBOARD_CROSS_ORIGIN',
  /** A write without the page's `x-sluice-csrf` token, or with a wrong one (403). */
  CSRF: 'ERR_SLUICE_DASHBOARD_CSRF',
  /** No such page, table or route (404). */
  NOT_FOUND: 'ERR_SLUICE_DASHBOARD_NOT_FOUND',
  /** The method does not apply to the path (405). */
  METHOD: 'ERR_SLUICE_DASHBOARD_METHOD',
  /** The body is not `application/json` (415). */
  MEDIA_TYPE: 'ERR_SLUICE_DASHBOARD_MEDIA_TYPE',
  /** The body is larger than `maxBodyBytes` (413). */
  TOO_LARGE: 'ERR_SLUICE_DASHBOARD_TOO_LARGE',
  /** The body is not JSON, or a path or query part is malformed (400). */
  BAD_REQUEST: 'ERR_SLUICE_DASHBOARD_BAD_REQUEST',
  /** Reading stats or changing a table failed for a reason other than the request (500, 503). */
  UNAVAILABLE: 'ERR_SLUICE_DASHBOARD_UNAVAILABLE',
} as const

export type DashboardErrorCode = (typeof DashboardErrorCode)[keyof typeof DashboardErrorCode]

export interface DashboardConfig<Request extends IncomingMessage> {
  readonly access: AccessPolicy<Request>
  readonly client: StatsRedisClient | undefined
  readonly stats: { snapshot(): LiveStatsSnapshot } | undefined
  readonly instance: string
  readonly tables: ReadonlyMap<string, DashboardTable>
  readonly statsPrefix: string | undefined
  readonly seconds: number
  readonly topKeys: number
  readonly auditCount: number
  readonly basePath: string
  readonly hosts: HostPolicy
  readonly csrfToken: string | undefined
  readonly actor: (request: Request) => string
  readonly maxBodyBytes: number
  readonly clock: () => number
}

const OPTION_NAMES = [
  'access',
  'client',
  'stats',
  'instance',
  'tables',
  'statsPrefix',
  'seconds',
  'topKeys',
  'auditCount',
  'basePath',
  'allowedHosts',
  'trustedOrigins',
  'csrfToken',
  'actor',
  'maxBodyBytes',
  'clock',
] as const

const TABLE_METHODS = ['entries', 'set', 'delete'] as const

/** Public options to config. Throws `InvalidOptionError` naming the option (`dashboard.access` …). */
export function dashboardConfig<Request extends IncomingMessage>(
  options: DashboardOptions<Request>,
): DashboardConfig<Request> {
  const o = readOptions<DashboardOptions<Request>>('dashboard', options, OPTION_NAMES, true)
  if (typeof o.access !== 'function') {
    throw new InvalidOptionError(
      'dashboard.access',
      o.access,
      "a function (request) => 'write' | 'read' | 'none': the dashboard is never open by default",
    )
  }
  if (o.client !== undefined && (o.client === null || typeof o.client !== 'object')) {
    throw new InvalidOptionError('dashboard.client', o.client, 'an ioredis or node-redis client')
  }
  const stats = o.stats
  if (stats !== undefined && (stats === null || typeof stats.snapshot !== 'function')) {
    throw new InvalidOptionError('dashboard.stats', stats, 'a liveStats() result')
  }
  const tables = new Map<string, DashboardTable>()
  if (o.tables !== undefined) {
    if (o.tables === null || typeof o.tables !== 'object' || Array.isArray(o.tables)) {
      throw new InvalidOptionError('dashboard.tables', o.tables, 'a record of table name to limit table')
    }
    for (const [name, table] of Object.entries(o.tables)) {
      stringOption(`dashboard.tables[${JSON.stringify(name)}]`, name, 100)
      const t = table as unknown as Record<string, unknown> | null
      if (t === null || typeof t !== 'object' || TABLE_METHODS.some((m) => typeof t[m] !== 'function')) {
        throw new InvalidOptionError(
          `dashboard.tables.${name}`,
          table,
          'a limit table (entries, set, delete and version)',
        )
      }
      tables.set(name, table)
    }
  }
  const basePath = o.basePath ?? ''
  if (typeof basePath !== 'string' || (basePath !== '' && !/^\/[^?#]*[^/?#]$/.test(basePath))) {
    throw new InvalidOptionError(
      'dashboard.basePath',
      basePath,
      "'' or a path such as '/sluice' (no trailing /)",
    )
  }
  const trustedOrigins = o.trustedOrigins ?? []
  if (!Array.isArray(trustedOrigins) || trustedOrigins.some((t) => typeof t !== 'string')) {
    throw new InvalidOptionError('dashboard.trustedOrigins', trustedOrigins, 'a list of origins')
  }
  const csrfToken = o.csrfToken
  if (csrfToken !== undefined && (typeof csrfToken !== 'string' || !/^[\w-]{32,256}$/.test(csrfToken))) {
    throw new InvalidOptionError(
      'dashboard.csrfToken',
      csrfToken,
      '32 to 256 characters of A-Z, a-z, 0-9, _ and -',
    )
  }
  const actor = o.actor ?? ((request: Request) => `dashboard ${request.socket?.remoteAddress ?? 'unknown'}`)
  if (typeof actor !== 'function') throw new InvalidOptionError('dashboard.actor', actor, 'a function')
  const clock = o.clock ?? Date.now
  if (typeof clock !== 'function') throw new InvalidOptionError('dashboard.clock', clock, 'a function')
  return {
    access: o.access,
    client: o.client,
    stats,
    instance: stringOption('dashboard.instance', o.instance ?? 'local', 200),
    tables,
    statsPrefix:
      o.statsPrefix === undefined ? undefined : stringOption('dashboard.statsPrefix', o.statsPrefix, 128),
    seconds: integerOption('dashboard.seconds', o.seconds ?? 900, 10, 3600),
    topKeys: integerOption('dashboard.topKeys', o.topKeys ?? 20, 1, 1000),
    auditCount: integerOption('dashboard.auditCount', o.auditCount ?? 50, 0, 1000),
    basePath,
    hosts: new HostPolicy(
      allowedHostsOption(o.allowedHosts),
      trustedOrigins.map((t) => t.replace(/\/+$/, '').toLowerCase()),
    ),
    csrfToken,
    actor,
    maxBodyBytes: integerOption('dashboard.maxBodyBytes', o.maxBodyBytes ?? 65_536, 256, 1_048_576),
    clock,
  }
}
