#!/usr/bin/env node
/**
 * @module A concurrency limiter's request on Redis beside a fixedWindow limiter's, side by side on one
 * redis-server: `sluice:concurrency` (a decision awaited, its release sent un-awaited, as the HTTP kit releases
 * on response end) against `sluice:fixedWindow`, with `deniedCache: false`, 10,000 keys and 256 calls in
 * flight on an ioredis client (bench/cases/redis.mjs). Subjects take turns, round after round, so both see the
 * same machine; each figure is the median of its rounds. Throughput on a shared machine is read as the ratio
 * of the two, measured in the same rounds. Beside it, what load does not move: the client's CPU per request,
 * and Redis's time per request (`INFO commandstats` usec of every script call, divided by the requests: a
 * concurrency request's release is counted in it, batched or not) and per script call, and redis-server's
 * CPU per request (/proc, user + system: what load moves least). Beside both, the raw ceilings of each
 * (`ceiling:concurrency`: a raw consume and a share of one raw batched release per request; `ceiling:
 * fixedWindow`): the ratio the two jobs make with no library around them. Last, the floor of a
 * concurrency request (`minimal:concurrency`: TIME, ZCARD, ZADD and PEXPIRE, then its share of a batched
 * ZREM: the least Redis work a lease kept by Redis's clock can take) against sluice's fixedWindow, by
 * Redis's time per request: where Redis is the bound, no concurrency request can beat that ratio (the
 * floor's own rate is bound by its plain client, as the ceilings' are).
 *
 *   node bench/redis-concurrency.mjs [--before <snapshot dir>] [--rounds 5] [--ms 2000]
 *
 * `--before` adds a second build's concurrency (and fixedWindow) beside the current one (make it with
 * `node -e "import('./bench/lib/snapshot.mjs').then(m => m.snapshot('<dir>'))"` before changing anything).
 */
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { runCase } from './lib/child.mjs'
import { numberOption, option } from './lib/options.mjs'
import { connectIoredis, redisVersion, scriptStats, startRedis } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const before = option('before', undefined)
const rounds = numberOption('rounds', 5)
const measureMs = numberOption('ms', 2000)

const subjects = []
for (const algorithm of ['concurrency', 'fixedWindow']) {
  if (before !== undefined)
    subjects.push({ label: `before ${algorithm}`, subject: `sluice:${algorithm}`, snap: before })
  subjects.push({ label: `sluice ${algorithm}`, subject: `sluice:${algorithm}` })
  subjects.push({ label: `ceiling ${algorithm}`, subject: `ceiling:${algorithm}` })
}
subjects.push({ label: 'floor concurrency', subject: 'minimal:concurrency' })

const current = snapshot()
const redis = await startRedis()
const admin = await connectIoredis(redis.port)
const load = [loadavg()[0]]
const figures = new Map(
  subjects.map((s) => [
    s.label,
    { rate: [], clientCpu: [], redisCpu: [], usecPerRequest: [], usecPerCall: [], callsPerRequest: [] },
  ]),
)
console.log(
  `redis-server ${redisVersion()} on ${redis.port}; ${rounds} rounds of ${measureMs} ms per subject`,
)
try {
  for (let round = 0; round < rounds; round++) {
    for (const s of subjects) {
      await admin.flushall()
      const params = {
        subject: s.subject,
        port: redis.port,
        redisPid: redis.pid,
        measure: 'throughput',
        inFlight: 256,
        warmupMs: 500,
        measureMs,
        keys: 10_000,
        deniedCache: false,
      }
      const env = { ...process.env, SLUICE_BENCH_SNAPSHOT: resolve(s.snap ?? current) }
      await admin.config('RESETSTAT')
      const result = await runCase('redis', params, { env })
      const { calls, usec } = await scriptStats(admin)
      // Every request of the case, its warm-up too: commandstats counts those calls as well.
      const requests = result.allRequests
      const f = figures.get(s.label)
      f.rate.push(result.perSecond)
      f.clientCpu.push(result.clientCpuUsPerCall)
      f.redisCpu.push(result.redisCpuUsPerCall)
      f.usecPerRequest.push(usec / requests)
      f.usecPerCall.push(usec / calls)
      f.callsPerRequest.push(calls / requests)
    }
    load.push(loadavg()[0])
  }
} finally {
  admin.disconnect()
  await redis.stop()
}

console.log(
  `load average (1 min) during the run: ${Math.min(...load).toFixed(2)}–${Math.max(...load).toFixed(2)}`,
)
console.log(
  '| subject | requests/s (256 in flight) | of fixedWindow (same build; the floor: against sluice) | client CPU µs per request | Redis CPU µs per request | Redis µs per request (commandstats) | script calls per request | Redis µs per script call |',
)
console.log('|---|---|---|---|---|---|---|---|')
for (const s of subjects) {
  const f = figures.get(s.label)
  const build = s.label.split(' ')[0]
  // The floor has no fixedWindow of its own: it is read against sluice's.
  const fixed = figures.get(`${build} fixedWindow`) ?? figures.get('sluice fixedWindow')
  // The ratio per round (measured in the same round), then its median.
  const ratios = f.rate.map((r, i) => r / fixed.rate[i])
  const range = (xs, d) => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`
  const cells = [
    s.label,
    `${Math.round(median(f.rate)).toLocaleString('en')} (${range(
      f.rate.map((r) => r / 1000),
      1,
    )} k)`,
    `${median(ratios).toFixed(2)}× (${range(ratios, 2)})`,
    median(f.clientCpu).toFixed(1),
    median(f.redisCpu).toFixed(1),
    median(f.usecPerRequest).toFixed(2),
    median(f.callsPerRequest).toFixed(3),
    median(f.usecPerCall).toFixed(2),
  ]
  console.log(`| ${cells.join(' | ')} |`)
}

// What the two rules' own work makes of the ratio: the raw ceilings' (bench/lib/ceiling-scripts.mjs, a
// request of the concurrency ceiling being its raw consume and its share of one raw batched release).
const rateOf = (label) => median(figures.get(label).rate)
console.log(
  `\nsluice concurrency / ceiling concurrency: ${(rateOf('sluice concurrency') / rateOf('ceiling concurrency')).toFixed(2)}×; ` +
    `sluice fixedWindow / ceiling fixedWindow: ${(rateOf('sluice fixedWindow') / rateOf('ceiling fixedWindow')).toFixed(2)}×; ` +
    `sluice concurrency / floor concurrency: ${(rateOf('sluice concurrency') / rateOf('floor concurrency')).toFixed(2)}×`,
)
// By Redis's time per request (commandstats): what one Redis can decide per second, whatever the clients.
const usecOf = (label) => median(figures.get(label).usecPerRequest)
console.log(
  `By Redis µs per request, sluice fixedWindow over: sluice concurrency ${(usecOf('sluice fixedWindow') / usecOf('sluice concurrency')).toFixed(2)}×, ` +
    `the concurrency floor ${(usecOf('sluice fixedWindow') / usecOf('floor concurrency')).toFixed(2)}× (the most a concurrency request can make of a Redis that is the bound)`,
)
