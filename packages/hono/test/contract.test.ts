/**
 * The HTTP contract suite on Hono (on Node, through `@hono/node-server`): one `rateLimit(options)` per
 * limit, each given the runtime's `getConnInfo`, passed on each route before its handler. When the suite
 * trusts the proxy, `getConnInfo` takes the client from `X-Forwarded-For` sent by a loopback peer.
 */
import type { AddressInfo } from 'node:net'
import { createAdaptorServer } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { type HonoRateLimitOptions, rateLimit } from '@sluice/hono'
import { type Context, Hono, type MiddlewareHandler } from 'hono'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { type ContractAdapter, httpContract } from '../../../test/http-contract/index.ts'

/** The address of the last `X-Forwarded-For` hop, when the peer is this machine (the suite's proxy). */
function behindLoopback(c: Context) {
  const info = getConnInfo(c)
  const peer = info.remote.address ?? ''
  const forwarded = c.req.header('x-forwarded-for')
  if (forwarded === undefined || !/^(::ffff:)?127\.0\.0\.1$|^::1$/.test(peer)) return info
  const hops = forwarded.split(',')
  return { remote: { ...info.remote, address: hops[hops.length - 1]!.trim() } }
}

const adapter: ContractAdapter = {
  name: 'hono',
  where: 'rateLimit',
  async start({ limits, routes, trustProxy }) {
    const app = new Hono()
    const connInfo = trustProxy === true ? behindLoopback : getConnInfo
    const chain: MiddlewareHandler[] = limits.map((o) =>
      rateLimit({ getConnInfo: connInfo, ...(o as HonoRateLimitOptions) }),
    )
    for (const route of routes) {
      const handler: MiddlewareHandler = async (c) => {
        const reply = await route.handle(c.get('rateLimit'))
        if (reply.stream !== undefined) {
          const body = ReadableStream.from(reply.stream).pipeThrough(new TextEncoderStream())
          return c.body(body, reply.status as ContentfulStatusCode, { 'content-type': 'text/plain' })
        }
        return c.json(reply.body as object, reply.status as ContentfulStatusCode)
      }
      // Hono types a handler list by its length; the suite's is known only at run time.
      const on = app.on.bind(app) as (
        method: string,
        path: string,
        ...handlers: MiddlewareHandler[]
      ) => unknown
      on(route.method, route.path, ...chain, handler)
    }
    const server = createAdaptorServer({ fetch: app.fetch })
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve)
      server.once('error', reject)
      server.listen(0, '127.0.0.1')
    })
    const { port } = server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          ;(server as unknown as { closeAllConnections(): void }).closeAllConnections()
        }),
    }
  },
  keyFromHeader: (header) => (c: Context) => c.req.header(header),
  countWhen: (when) => (_c: Context, response: Response) => when(response.status),
  onLimited: (answer) => async (c: Context, decision: never) => {
    const reply = await answer(decision)
    return reply === undefined
      ? undefined
      : c.json(reply.body as object, reply.status as ContentfulStatusCode)
  },
}

httpContract(adapter)
