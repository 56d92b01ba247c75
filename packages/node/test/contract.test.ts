/**
 * The HTTP contract suite on node:http: `withRateLimit` around the first limit, each further limit a
 * connect-style `rateLimit(options)` called in turn, and a small router of the test's own that names each
 * route's template through the `route` option; `trustProxy: ['127.0.0.1']` when the suite trusts the proxy.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { type Decision, type NodeRateLimitOptions, rateLimit, withRateLimit } from '@sluice/node'
import { type ContractAdapter, type ContractRoute, httpContract } from '../../../test/http-contract/index.ts'

/** The route a request matches: its method (a GET route's for HEAD), and its path against the template segment by segment. */
function matcher(routes: readonly ContractRoute[]) {
  return (req: IncomingMessage): ContractRoute | undefined => {
    const path = (req.url ?? '').split('?', 1)[0]!.split('/')
    return routes.find((route) => {
      const template = route.path.split('/')
      return (
        // As frameworks do, a HEAD is answered by the GET route.
        (route.method === req.method || (req.method === 'HEAD' && route.method === 'GET')) &&
        template.length === path.length &&
        template.every((part, i) => part.startsWith(':') || part === path[i])
      )
    })
  }
}

const adapter: ContractAdapter = {
  name: 'node:http',
  where: 'rateLimit',
  async start({ limits, routes, trustProxy }) {
    const match = matcher(routes)
    const route = (req: IncomingMessage) => match(req)?.path ?? '(none)'
    const options = limits.map(
      (o) =>
        ({
          route,
          ...(trustProxy === true ? { trustProxy: ['127.0.0.1'] } : {}),
          ...o,
        }) as NodeRateLimitOptions,
    )
    const [first, ...more] = options
    const further = more.map((o) => rateLimit(o))
    const handle = (req: IncomingMessage, res: ServerResponse, i = 0): void => {
      if (i < further.length) {
        further[i]!(req, res, (error) => {
          if (error === undefined) handle(req, res, i + 1)
          else res.writeHead(500).end()
        })
        return
      }
      const target = match(req)
      if (target === undefined) {
        res.writeHead(404).end()
        return
      }
      Promise.resolve(target.handle(req.rateLimit)).then((reply) => {
        if (res.writableEnded || res.destroyed) return
        if (reply.stream !== undefined) {
          res.writeHead(reply.status, { 'content-type': 'text/plain; charset=utf-8' })
          Readable.from(reply.stream).pipe(res)
          return
        }
        res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body))
      })
    }
    const server = createServer(withRateLimit(first!, (req, res) => handle(req, res)))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', resolve)
    })
    const { port } = server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        }),
    }
  },
  keyFromHeader: (header) => (req: IncomingMessage) => req.headers[header] as string | undefined,
  countWhen: (when) => (_req: IncomingMessage, res: ServerResponse) => when(res.statusCode),
  onLimited: (answer) => async (_req: IncomingMessage, res: ServerResponse, decision: Decision) => {
    const reply = await answer(decision)
    if (reply === undefined) return
    res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body))
  },
}

httpContract(adapter)
