/** @module The shared suites' runtime on Node: `@hono/node-server` serves both the Fetch handler and Hono. */
import type { AddressInfo } from 'node:net'
import { createAdaptorServer, type HttpBindings } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import type { Runtime, Served } from './runtime.ts'

function listen(
  fetch: (request: Request, env: HttpBindings) => Response | Promise<Response>,
): Promise<Served> {
  const server = createAdaptorServer({ fetch: fetch as never })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            ;(server as unknown as { closeAllConnections(): void }).closeAllConnections()
            server.close(() => done())
          }),
      })
    })
  })
}

export const node: Runtime = {
  name: 'node',
  serveFetch: (handler) => listen((request, env) => handler(request, env.incoming.socket.remoteAddress)),
  serveHono: (app) => listen(app.fetch as never),
  getConnInfo,
}
