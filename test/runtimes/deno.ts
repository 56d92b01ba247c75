/** @module The shared suites' runtime on Deno: `Deno.serve`, and Hono's `getConnInfo` from `hono/deno`. */
import { getConnInfo } from 'hono/deno'
import type { Runtime, Served } from './runtime.ts'

interface ServeInfo {
  readonly remoteAddr: { readonly hostname: string; readonly port: number }
}
interface DenoServer {
  readonly addr: { readonly port: number }
  shutdown(): Promise<void>
  readonly finished: Promise<void>
}
declare const Deno: {
  serve(
    options: { port: number; hostname: string; onListen?: () => void },
    handler: (request: Request, info: ServeInfo) => Response | Promise<Response>,
  ): DenoServer
}

function served(server: DenoServer): Served {
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() }
}

const options = { port: 0, hostname: '127.0.0.1', onListen: () => {} }

export const deno: Runtime = {
  name: 'deno',
  serveFetch: async (handler) =>
    served(Deno.serve(options, (request, info) => handler(request, info.remoteAddr.hostname))),
  serveHono: async (app) => served(Deno.serve(options, (request, info) => app.fetch(request, info))),
  getConnInfo,
}
