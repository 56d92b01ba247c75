/**
 * @module `startDashboard`: the dashboard as a server of its own, for `sluice dashboard --redis … --port …`.
 * It reads every process's published stats from Redis; tables are handed in (opened by the caller).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { InvalidOptionError } from '@sluice/core'
import type { StatsRedisClient } from '@sluice/metrics'
import { Redis } from 'ioredis'
import { DashboardError } from './api.ts'
import { DashboardServer, locate } from './handler.ts'
import { DashboardErrorCode, type DashboardOptions, dashboardConfig } from './options.ts'

export interface StartDashboardOptions
  extends Omit<DashboardOptions<IncomingMessage>, 'client' | 'basePath'> {
  /**
   * Where the published stats are: a Redis URL (`redis://host:6379/0`, `rediss://…`; the dashboard opens
   * an ioredis client and closes it on `close()`), or a client of your own (left open).
   */
  redis?: string | StatsRedisClient
  /** Port to listen on. Integer 0 (any free port) to 65535. Default 8080. */
  port?: number
  /** Interface to listen on. Default `'127.0.0.1'`: only this machine, until you say otherwise. */
  host?: string
}

export interface RunningDashboard {
  /** `http://host:port/`. */
  readonly url: string
  readonly server: Server
  /** Stops listening and closes the Redis client it opened. */
  close(): Promise<void>
}

/**
 * Starts an HTTP server serving only the dashboard, at `/`. Rejects with `DashboardError`
 * (`ERR_SLUICE_DASHBOARD_UNAVAILABLE`) when the Redis URL cannot be reached, and with
 * `InvalidOptionError` for invalid options.
 */
export async function startDashboard(options: StartDashboardOptions): Promise<RunningDashboard> {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('startDashboard', options, 'an options object')
  }
  const { redis, port = 8080, host = '127.0.0.1', ...rest } = options
  if (typeof port !== 'number' || !Number.isSafeInteger(port) || port < 0 || port > 65_535) {
    throw new InvalidOptionError('startDashboard.port', port, 'an integer from 0 to 65535')
  }
  if (typeof host !== 'string' || host === '') {
    throw new InvalidOptionError('startDashboard.host', host, 'a host name or address')
  }
  let client: StatsRedisClient | undefined
  let owned: Redis | undefined
  if (typeof redis === 'string') {
    owned = await connect(redis)
    client = owned
  } else if (redis !== undefined) {
    client = redis
  }
  try {
    const dashboard = new DashboardServer(
      dashboardConfig({ ...rest, ...(client === undefined ? {} : { client }) }),
    )
    const server = createServer((req, res) => void dashboard.serve(req, res, locate(req.url ?? '/', '')))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    const address = server.address() as AddressInfo
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
    return {
      url: `http://${shown}:${address.port}/`,
      server,
      async close() {
        await new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        })
        owned?.disconnect()
      },
    }
  } catch (error) {
    owned?.disconnect()
    throw error
  }
}

/** An ioredis client for `url`, connected; it reconnects by itself later, failures show on the page. */
async function connect(url: string): Promise<Redis> {
  let client: Redis
  try {
    client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5000 })
  } catch (error) {
    throw new InvalidOptionError('startDashboard.redis', url, `a Redis URL (${(error as Error).message})`)
  }
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (error) {
    client.disconnect()
    throw new DashboardError(
      503,
      DashboardErrorCode.UNAVAILABLE,
      `Redis at ${url.replace(/\/\/[^@/]*@/, '//…@')} cannot be reached: ${(error as Error).message}`,
      { cause: error },
    )
  }
  return client
}
