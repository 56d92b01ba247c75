/**
 * Bun.serve limited by sluice, state in memory (one process):
 * - /pay: 3 per 10 s per client IP, with `fetchLimit` around a plain `Request → Response` handler;
 * - /hono/*: a Hono app on the same server, 5 per 10 s per client IP (`getConnInfo` from hono/bun);
 * - everything else: 404, not limited.
 * Run: bun examples/bun/server.ts (PORT, default 3003); from the repository root, `node_modules/.bin/bun`.
 */
import { slidingLog } from '@sluice/core'
import { fetchLimit } from '@sluice/fetch'
import { rateLimit } from '@sluice/hono'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/bun'

declare const Bun: {
  serve(options: {
    port: number
    fetch(
      request: Request,
      server: { requestIP(request: Request): { address: string } | null },
    ): Promise<Response> | Response
  }): { port: number }
}

const pay = fetchLimit({ rules: [slidingLog({ limit: 3, windowMs: 10_000 })] })

const hono = new Hono().basePath('/hono')
hono.use(rateLimit({ rules: [slidingLog({ limit: 5, windowMs: 10_000 })], getConnInfo }))
hono.get('/hello', (c) => c.json({ hello: 'hono', remaining: c.get('rateLimit')?.remaining }))

const server = Bun.serve({
  port: Number(process.env.PORT ?? 3003),
  fetch(request, server) {
    const { pathname } = new URL(request.url)
    if (pathname.startsWith('/hono/')) return hono.fetch(request, server)
    if (pathname !== '/pay') return new Response('not found', { status: 404 })
    return pay.handle(
      request,
      { ip: server.requestIP(request)?.address, route: 'POST /pay' },
      (_request, decision) => Response.json({ paid: true, remaining: decision?.remaining }),
    )
  },
})
console.log(`examples/bun on http://localhost:${server.port}`)
