/**
 * @module One server of the runtimes bench, chosen by argv[2], on the port in argv[3]; it prints
 * "listening" once it accepts requests. Run by runtimes.mjs under Node (hono-*) or Bun (bun-*). Every
 * limit is far above what a run sends, so each request is admitted: the figures are each limiter's cost.
 */
import { fixedWindow } from '@sluice/core'

const [subject, portText] = process.argv.slice(2)
const port = Number(portText)
const rules = [fixedWindow({ limit: 1_000_000_000, windowMs: 60_000 })]

if (subject.startsWith('hono')) {
  const { Hono } = await import('hono')
  const { serve } = await import('@hono/node-server')
  const { getConnInfo } = await import('@hono/node-server/conninfo')
  const app = new Hono()
  if (subject === 'hono-sluice') {
    const { rateLimit } = await import('@sluice/hono')
    app.use(rateLimit({ rules, getConnInfo }))
  } else if (subject === 'hono-rate-limiter') {
    const { rateLimiter } = await import('hono-rate-limiter')
    app.use(
      rateLimiter({
        windowMs: 60_000,
        limit: 1_000_000_000,
        standardHeaders: 'draft-7',
        keyGenerator: (c) => getConnInfo(c).remote.address ?? '',
      }),
    )
  }
  app.get('/', (c) => c.json({ ok: true }))
  serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => console.log('listening'))
} else {
  const { fetchLimit } = await import('@sluice/fetch')
  const limit = fetchLimit({ rules })
  const answer = () => Response.json({ ok: true })
  Bun.serve({
    port,
    hostname: '127.0.0.1',
    fetch:
      subject === 'bun-sluice'
        ? (request, server) => limit.handle(request, { ip: server.requestIP(request)?.address }, answer)
        : answer,
  })
  console.log('listening')
}
