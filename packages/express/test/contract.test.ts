/**
 * The HTTP contract suite on Express 5 and Express 4: one `rateLimit(options)` per limit, passed on each
 * route before its handler; `trust proxy` set to loopback when the suite trusts the proxy.
 */
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { type ExpressRateLimitOptions, rateLimit } from '@sluice/express'
import type { Request, RequestHandler, Response } from 'express'
import { type ContractAdapter, httpContract } from '../../../test/http-contract/index.ts'
import { flavours } from './support.ts'

for (const { name, express } of flavours) {
  const adapter: ContractAdapter = {
    name,
    where: 'rateLimit',
    async start({ limits, routes, trustProxy }) {
      const app = express()
      if (trustProxy === true) app.set('trust proxy', 'loopback')
      const chain: RequestHandler[] = limits.map((o) => rateLimit(o as ExpressRateLimitOptions))
      for (const route of routes) {
        const method = route.method === 'GET' ? 'get' : 'post'
        app[method](route.path, ...chain, (req: Request, res: Response, next: (e?: unknown) => void) => {
          Promise.resolve(route.handle(req.rateLimit)).then((reply) => {
            if (res.writableEnded || res.destroyed) return
            if (reply.stream !== undefined)
              Readable.from(reply.stream).pipe(res.status(reply.status).type('text'))
            else res.status(reply.status).json(reply.body)
          }, next)
        })
      }
      const server = app.listen(0, '127.0.0.1')
      await new Promise<void>((resolve, reject) => {
        server.once('listening', resolve)
        server.once('error', reject)
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
    keyFromHeader: (header) => (req: Request) => req.get(header),
    countWhen: (when) => (_req: Request, res: Response) => when(res.statusCode),
    onLimited: (answer) => async (_req: Request, res: Response, decision: never) => {
      const reply = await answer(decision)
      if (reply !== undefined) res.status(reply.status).json(reply.body)
    },
  }
  httpContract(adapter)
}
