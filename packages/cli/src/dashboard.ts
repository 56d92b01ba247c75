/**
 * @module `sluice dashboard --redis URL [--port 8080] [--host 127.0.0.1] [--table NAME]... [--access
 * read|write]`: the live dashboard as a server of its own (`startDashboard` from `@sluice/dashboard`). It
 * reads every process's published statistics from Redis and shows each `--table` (a `RedisLimitTable`,
 * followed live), editable when `--access write`. Input is checked in full before Redis is contacted.
 * It serves until SIGINT or SIGTERM, then closes its tables, its server and its Redis connection.
 */
import { InvalidOptionError } from '@sluice/core'
import { prefixOption } from '@sluice/core/options'
import { type Access, dashboard, type RunningDashboard, startDashboard } from '@sluice/dashboard'
import { RedisLimitTable } from '@sluice/redis'
import { readArgs } from './args.ts'
import type { Io } from './io.ts'
import { connect, requiredUrl, shownUrl } from './redis.ts'

export const DASHBOARD_USAGE = `Usage: sluice dashboard --redis URL [options]

Serves the live dashboard: every process that publishes its statistics to Redis (publishStats), and the
limit tables named by --table, followed live. Stop it with Ctrl-C (SIGINT) or SIGTERM.

Options:
  --redis URL               where the statistics and tables are, e.g. redis://127.0.0.1:6379 (required,
                            unless SLUICE_REDIS_URL is set)
  --port PORT               port to listen on (default 8080; 0: any free port)
  --host HOST               interface to listen on (default 127.0.0.1: this machine only)
  --allowed-host NAME       a Host name to answer for besides the listener's own (127.0.0.1:PORT,
                            localhost:PORT, [::1]:PORT on loopback); repeat for more. Any other Host
                            gets 421 (no page, no data), so a DNS-rebound name reaches nothing
  --table NAME              a limit table to show; repeat for more (default none)
  --access read|write       what every visitor may do (default read); write allows editing the tables
  --prefix PREFIX           the tables' key prefix (default sluice)
  --stats-prefix PREFIX     the publishers' prefix (default sluice:stats)
  --timeout MS              how long to wait for Redis at start (default 2000)

Exit codes: 0 stopped by a signal, 1 invalid input, 2 Redis could not be reached.`

const VALUED = [
  'redis',
  'port',
  'host',
  'allowed-host',
  'table',
  'access',
  'prefix',
  'stats-prefix',
  'timeout',
]
const FLAGS = ['help']

/** Waits for SIGINT or SIGTERM; the handlers are removed once one came. */
function signalled(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off('SIGINT', on)
      process.off('SIGTERM', on)
      resolve(signal)
    }
    process.on('SIGINT', on)
    process.on('SIGTERM', on)
  })
}

export async function dashboardCommand(argv: readonly string[], io: Io): Promise<number> {
  const { positionals, options, lists } = readArgs(argv, VALUED, FLAGS)
  if (options.has('help')) {
    io.out(DASHBOARD_USAGE)
    return 0
  }
  if (positionals.length > 0) {
    throw new InvalidOptionError('dashboard', positionals.join(' '), 'no arguments, only options')
  }
  const url = requiredUrl(options.get('redis'))
  const portText = options.get('port') ?? '8080'
  const port = Number(portText)
  if (typeof portText !== 'string' || !/^\d{1,5}$/.test(portText) || port > 65_535) {
    throw new InvalidOptionError('--port', portText, 'an integer from 0 to 65535')
  }
  const host = options.get('host') ?? '127.0.0.1'
  if (typeof host !== 'string' || host === '') {
    throw new InvalidOptionError('--host', host, 'a host name or address')
  }
  const access = options.get('access') ?? 'read'
  if (access !== 'read' && access !== 'write') {
    throw new InvalidOptionError('--access', access, 'read or write')
  }
  const names = lists.get('table') ?? []
  for (const name of names) prefixOption('--table', name)
  const repeated = names.find((name, i) => names.indexOf(name) !== i)
  if (repeated !== undefined) throw new InvalidOptionError('--table', repeated, 'each table named once')
  const timeoutMs = Number(options.get('timeout') ?? 2000)
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new InvalidOptionError('--timeout', options.get('timeout'), 'an integer >= 1 (ms)')
  }
  const allowedHosts = [...(lists.get('allowed-host') ?? [])]
  for (const name of allowedHosts) {
    try {
      dashboard({ access: () => 'none', allowedHosts: [name] })
    } catch {
      throw new InvalidOptionError(
        '--allowed-host',
        name,
        'a host name with an optional port, e.g. ops.example.com',
      )
    }
  }
  const prefix = options.get('prefix')
  const statsPrefix = options.get('stats-prefix')
  if (statsPrefix === '') throw new InvalidOptionError('--stats-prefix', statsPrefix, 'a prefix')

  const client = await connect(url, timeoutMs, true)
  const tables: Record<string, RedisLimitTable> = {}
  let running: RunningDashboard | undefined
  try {
    for (const name of names) {
      tables[name] = await RedisLimitTable.open({
        client,
        name,
        timeoutMs,
        ...(typeof prefix === 'string' && { prefix }),
      })
    }
    const policy: Access = access
    try {
      running = await startDashboard({
        redis: client,
        port,
        host,
        tables,
        access: () => policy,
        allowedHosts,
        ...(typeof statsPrefix === 'string' && { statsPrefix }),
      })
    } catch (error) {
      throw listenError(error, port, host)
    }
    const shown = names.length === 0 ? 'no tables' : `tables ${names.join(', ')}`
    io.out(`sluice dashboard on ${running.url} (${access} access, ${shown}, Redis ${shownUrl(url)})`)
    const signal = await signalled()
    io.err(`${signal}: stopping.`)
    return 0
  } finally {
    await running?.close()
    for (const table of Object.values(tables)) await table.close()
    client.disconnect()
  }
}

/** A server that cannot listen where it was told is invalid input (exit 1), said in the option's words. */
function listenError(error: unknown, port: number, host: string): unknown {
  const code = (error as { code?: unknown } | null)?.code
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    return new InvalidOptionError('--port', port, `a port free to listen on at ${host} (${code})`)
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new InvalidOptionError('--host', host, `an address of this machine (${code})`)
  }
  return error
}
