/**
 * The HTTP contract suite on Koa: one `rateLimit(options)` per limit, passed on each `@koa/router` route
 * before its handler; `app.proxy` set when the suite trusts the proxy.
 */
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import Router from '@koa/router'
import { type Decision, type KoaRateLimitOptions, rateLimit } from '@sluice/koa'
import Koa, { type Context, type Middleware } from 'koa'
import { type ContractAdapter, httpContract } from '../../../test/http-contract/index.ts'

const adapter: ContractAdapter = {
  name: 'koa',
  where: 'rateLimit',
  async start({ limits, routes, trustProxy }) {
    const app = new Koa({ proxy: trustProxy === true })
    // The app's error handler would log each thrown error; the contract's cases look at answers only.
    app.silent = true
    const router = new Router()
    const chain: Middleware[] = limits.map((o) => rateLimit(o as KoaRateLimitOptions))
    for (const route of routes) {
      const method = route.method === 'GET' ? 'get' : 'post'
      router[method](route.path, ...chain, async (ctx: Context) => {
        const reply = await route.handle(ctx.state.rateLimit)
        ctx.status = reply.status
        if (reply.stream !== undefined) {
          ctx.type = 'text/plain'
          ctx.body = Readable.from(reply.stream)
        } else ctx.body = reply.body
      })
    }
    app.use(router.routes())
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
  keyFromHeader: (header) => (ctx: Context) => ctx.get(header) || undefined,
  countWhen: (when) => (ctx: Context) => when(ctx.status),
  onLimited: (answer) => async (ctx: Context, decision: Decision) => {
    const reply = await answer(decision)
    if (reply === undefined) return
    ctx.status = reply.status
    ctx.body = reply.body
  },
}

httpContract(adapter)
