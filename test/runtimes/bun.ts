/** @module The shared suites' runtime on Bun: `Bun.serve`, and Hono's `getConnInfo` from `hono/bun`. */
import { getConnInfo } from 'hono/bun'
import type { Runtime, Served } from './runtime.ts'

interface BunServer {
  readonly port: number
  requestIP(request: Request): { address: string } | null
  stop(closeActive?: boolean): Promise<void>
}
declare const Bun: {
  serve(options: {
    port: number
    hostname: string
    fetch: (request: Request, server: BunServer) => Response | Promise<Response>
  }): BunServer
}

function served(server: BunServer): Served {
  return { url: `http://127.0.0.1:${server.port}`, close: () => server.stop(true) }
}

export const bun: Runtime = {
  name: 'bun',
  serveFetch: async (handler) =>
    served(
      Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: (request, server) => handler(request, server.requestIP(request)?.address),
      }),
    ),
  serveHono: async (app) =>
    served(
      Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (request, server) => app.fetch(request, server) }),
    ),
  getConnInfo,
}
