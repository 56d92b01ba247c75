/**
 * @module The overload section's server, in a process of its own: Fastify whose one route burns `burnMs`
 * of CPU per request (a handler that computes, so a request more is that much more work), with no
 * protection (`none`), @fastify/under-pressure at the settings its README shows (`under-pressure`), or
 * sluice's `overload` guard (`sluice`). A request with `x-critical: 1` is critical to sluice's guard.
 * params: { variant, burnMs, sync }. Prints `READY <port>`, serves until SIGTERM.
 */
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { params } from '../lib/child.mjs'
import { sluice } from '../lib/sluice.mjs'
import { HIGH, WINDOW_MS } from '../lib/subjects.mjs'

const require = createRequire(import.meta.url)
const p = params()
const Fastify = require('fastify')
const app = Fastify()

/**
 * The guard's settings in this bench (bench/README.md and docs/overload.md show them beside the figures).
 * Buckets of 20 ms: the trigger is read once a bucket, so a step in load is admitted unconditionally for
 * up to one bucket, which is what sets the admitted p99 at the step. A critical headroom of 3: a handler
 * that computes sustains about one request in flight (its estimate stays between 1 and 2), and 1.5 times
 * that leaves a critical request no room beside one other.
 */
const SLUICE_OVERLOAD = { maxEventLoopDelayMs: 20, maxUtilization: 0.9, buckets: 50, criticalHeadroom: 3 }

if (p.variant === 'under-pressure') {
  // The settings @fastify/under-pressure's README registers it with.
  await app.register(require('@fastify/under-pressure'), {
    maxEventLoopDelay: 1000,
    maxHeapUsedBytes: 100000000,
    maxRssBytes: 100000000,
    maxEventLoopUtilization: 0.98,
  })
} else if (p.variant === 'sluice') {
  const { fixedWindow, overload } = await sluice('core')
  const { sluice: plugin } = await sluice('fastify')
  const guard = overload({
    ...SLUICE_OVERLOAD,
    critical: (request) => request.headers['x-critical'] === '1',
  })
  // A per-client limit no request reaches: the guard is what is measured, as an application runs it.
  await app.register(plugin, { rules: [fixedWindow({ limit: HIGH, windowMs: WINDOW_MS })], overload: guard })
}

const { setImmediate: yielded } = await import('node:timers/promises')

// The handler yields once (as one that awaits anything does: a cache, a database) and then computes. A
// handler that never yields finishes each request before Node parses the next, so no request is ever
// in flight beside another: `sync: true` measures that case (README.md says what the guard does there).
app.get('/', async () => {
  if (p.sync !== true) await yielded()
  const until = performance.now() + p.burnMs
  let x = 0
  while (performance.now() < until) x++
  return x > 0 ? 'ok' : 'ok!'
})

await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write(`READY ${app.server.address().port}\n`)
process.once('SIGTERM', () => app.close().then(() => process.exit(0)))
