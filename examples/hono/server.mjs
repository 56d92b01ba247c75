/**
 * A Hono app limited by sluice, on Node through @hono/node-server, state in memory (one process):
 * - every route: 100 per minute per client IP (`app.use`, key 'ip' read by getConnInfo);
 * - GET /search: its own limit, 5 per 10 s per IP (per route); the decision is at c.get('rateLimit');
 * - GET /export: at most 2 exports at once (a concurrency rule), each held until its streamed body ends;
 * - GET /health: not limited (skipped by the app-wide limit).
 * Run: node examples/hono/server.mjs (PORT, default 3002).
 */
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { concurrency, slidingLog, slidingWindow } from '@sluice/core'
import { rateLimit } from '@sluice/hono'
import { Hono } from 'hono'

const app = new Hono()

app.use(
  rateLimit({
    rules: [slidingWindow({ limit: 100, windowMs: 60_000 })],
    getConnInfo,
    skip: (c) => c.req.path === '/health',
  }),
)

app.get('/search', rateLimit({ rules: [slidingLog({ limit: 5, windowMs: 10_000 })], getConnInfo }), (c) =>
  c.json({ results: [], remaining: c.get('rateLimit')?.remaining }),
)

app.get('/export', rateLimit({ rules: [concurrency({ limit: 2 })], key: 'route' }), () => {
  let n = 0
  const rows = new ReadableStream({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      if (++n > 5) controller.close()
      else controller.enqueue(new TextEncoder().encode(`row ${n}\n`))
    },
  })
  return new Response(rows, { headers: { 'content-type': 'text/plain' } })
})

app.get('/health', (c) => c.json({ ok: true }))

const port = Number(process.env.PORT ?? 3002)
serve({ fetch: app.fetch, port }, () => console.log(`examples/hono on http://localhost:${port}`))
