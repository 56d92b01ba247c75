/**
 * @module The overload section's server, in a process of its own: Fastify with no protection (`none`),
 * @fastify/under-pressure at the settings its README shows (`under-pressure`), or sluice's `overload` guard
 * (`sluice`; which build of sluice, the bench says by `SLUICE_BENCH_SNAPSHOT`). Its handler is one of two:
 * - `cpu`: burns `burnMs` of CPU per request (a handler that computes, so a request more is that much more
 *   work), after yielding once unless `sync`;
 * - `pool`: waits for one of `poolSize` connections to a slow dependency, held 50 to 200 ms (uniform) per
 *   request: a server whose event loop stays idle while its requests queue for the dependency.
 * With `clients`, each request's client is its `authorization` token, and the per-client limit
 * (`clientLimit` a second) applies, with or without the guard; without it, a limit no request reaches.
 * Critical to the guard: with `clients`, a request to `/pay` whose token a payer holds (what authentication
 * established, not the path alone); else one with `x-critical: 1`.
 * params: { variant, handler, burnMs, sync, poolSize, clients, clientLimit }. Prints `READY <port>`, serves until SIGTERM.
 */
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { params } from '../lib/child.mjs'
import { sluice } from '../lib/sluice.mjs'
import { HIGH, WINDOW_MS } from '../lib/subjects.mjs'

const require = createRequire(import.meta.url)
const p = params()
const Fastify = require('fastify')
const app = Fastify()

/**
 * The guard's settings in this bench (bench/README.md and docs/overload.md show them beside the figures).
 * Buckets of 20 ms: the trigger is decided once a bucket, so a step in load is admitted unconditionally for
 * up to one bucket, which is what sets the admitted p99 at the step. A critical headroom of 3: a handler
 * that computes sustains about one request in flight (its estimate stays between 1 and 2), and 1.5 times
 * that leaves a critical request no room beside one other.
 */
const SLUICE_OVERLOAD = { maxEventLoopDelayMs: 20, maxUtilization: 0.9, buckets: 50, criticalHeadroom: 3 }

/** How long a request holds a connection to the slow dependency, in ms: uniform between the two. */
const POOL_MS = [50, 200]

/** The tokens of the payers (the attacker among them: it is a paying client, flooding). */
const payers = new Set(['mallory', ...Array.from({ length: 50 }, (_, i) => `payer-${i}`)])

const critical = p.clients
  ? (request) => request.url === '/pay' && payers.has(request.headers.authorization)
  : (request) => request.headers['x-critical'] === '1'

if (p.variant === 'under-pressure') {
  // The settings @fastify/under-pressure's README registers it with.
  await app.register(require('@fastify/under-pressure'), {
    maxEventLoopDelay: 1000,
    maxHeapUsedBytes: 100000000,
    maxRssBytes: 100000000,
    maxEventLoopUtilization: 0.98,
  })
} else if (p.variant === 'sluice' || p.clients) {
  const { fixedWindow, overload } = await sluice('core')
  const { sluice: plugin } = await sluice('fastify')
  const guard = p.variant === 'sluice' ? overload({ ...SLUICE_OVERLOAD, critical }) : undefined
  // The per-client limit with `clients`; else one no request reaches: the guard is what is measured, as an
  // application runs it.
  const limit = p.clients
    ? { rules: [fixedWindow({ limit: p.clientLimit, windowMs: 1000 })], key: (r) => r.headers.authorization }
    : { rules: [fixedWindow({ limit: HIGH, windowMs: WINDOW_MS })] }
  await app.register(plugin, { ...limit, ...(guard === undefined ? {} : { overload: guard }) })
}

const { setImmediate: yielded } = await import('node:timers/promises')

/** The pool's free connections and the requests waiting for one, first come first served. */
let free = p.poolSize
const waiting = []

async function dependency() {
  if (free > 0) free--
  else await new Promise((resolve) => waiting.push(resolve))
  try {
    await sleep(POOL_MS[0] + Math.random() * (POOL_MS[1] - POOL_MS[0]))
  } finally {
    const next = waiting.shift()
    if (next === undefined) free++
    else next()
  }
}

// The cpu handler yields once (as one that awaits anything does: a cache, a database) and then computes. A
// handler that never yields finishes each request before Node parses the next, so no request is ever
// in flight beside another: `sync: true` measures that case (README.md says what the guard does there).
async function handle() {
  if (p.handler === 'pool') {
    await dependency()
    return 'ok'
  }
  if (p.sync !== true) await yielded()
  const until = performance.now() + p.burnMs
  let x = 0
  while (performance.now() < until) x++
  return x > 0 ? 'ok' : 'ok!'
}
app.get('/', handle)
app.get('/pay', handle)

await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write(`READY ${app.server.address().port}\n`)
process.once('SIGTERM', () => app.close().then(() => process.exit(0)))
