/**
 * @module What the shared Fetch and Hono suites need of a runtime (Node, Bun, Deno): a server for a
 * `Request → Response` handler, one for a Hono app, and that runtime's `getConnInfo`. Each runtime's
 * module (node.ts, bun.ts, deno.ts) supplies these with its own server, so the suites run unchanged.
 */
import type { Hono } from 'hono'
import type { GetConnInfo } from 'hono/conninfo'

export interface Served {
  /** The server's base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string
  close(): Promise<void>
}

export interface Runtime {
  readonly name: 'node' | 'bun' | 'deno'
  /** Serves `handler`, which is given the request and the client's address as the runtime reports it. */
  serveFetch(
    handler: (request: Request, ip: string | undefined) => Response | Promise<Response>,
  ): Promise<Served>
  serveHono(app: Hono): Promise<Served>
  readonly getConnInfo: GetConnInfo
}
