#!/usr/bin/env node
/**
 * @module Redis time per call: what one script call costs inside redis-server (`INFO commandstats`
 * usec_per_call of EVALSHA, FCALL), for sluice's fixedWindow and slidingLog beside the raw-script floors
 * (lib/ceiling-scripts.mjs: MINIMAL_LUA, the Redis work alone, and CEILING_LUA, the same job written
 * straight down). Redis runs one script at a time, so this figure bounds what one Redis (or one cluster
 * shard) decides per second, and other processes on the machine barely move it; throughput is printed too,
 * with the load average, but means little on a shared machine.
 *
 *   node bench/redis-time.mjs [--before <snapshot dir>] [--rounds 3] [--ms 1500] [--in-flight 64]
 *                             [--only fixedWindow,slidingLog]
 *
 * `--before` measures a second build beside the current one, in the same run (make it with
 * `node -e "import('./bench/lib/snapshot.mjs').then(m => m.snapshot('bench/.snapshot-before'))"` before
 * changing anything). Subjects take turns over the rounds; each figure is the median of its rounds.
 * Every subject runs with `deniedCache: false`, 10,000 keys and 64 calls in flight (`--in-flight`; the
 * issue's throughput goals are at 256) on an ioredis client. Calls/s are also read against the ceiling's
 * of the same round, with the client's CPU per call beside them: when Redis is the bound, one shows it.
 */
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { runCase } from './lib/child.mjs'
import { numberOption, option } from './lib/options.mjs'
import { connectIoredis, redisCpu, redisVersion, scriptStats, startRedis } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const before = option('before', undefined)
const rounds = numberOption('rounds', 3)
const measureMs = numberOption('ms', 1500)
const inFlight = numberOption('in-flight', 64)
const ALGORITHMS = option('only', 'fixedWindow,slidingLog').split(',')

const subjects = []
for (const algorithm of ALGORITHMS) {
  if (before !== undefined)
    subjects.push({ label: `before ${algorithm}`, subject: `sluice:${algorithm}`, snap: before })
  subjects.push({ label: `sluice ${algorithm}`, subject: `sluice:${algorithm}` })
  subjects.push({ label: `minimal ${algorithm}`, subject: `minimal:${algorithm}` })
  subjects.push({ label: `ceiling ${algorithm}`, subject: `ceiling:${algorithm}` })
}

const current = snapshot()
const redis = await startRedis()
const admin = await connectIoredis(redis.port)
const load = [loadavg()[0]]
const figures = new Map(
  subjects.map((s) => [s.label, { usec: [], cpu: [], commands: [], rate: [], client: [], ofCeiling: [] }]),
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
        inFlight,
        warmupMs: 300,
        measureMs,
        keys: 10_000,
        deniedCache: false,
      }
      const env = { ...process.env, SLUICE_BENCH_SNAPSHOT: resolve(s.snap ?? current) }
      // The case's warm-up calls (about a sixth) are counted too: past the first call per script, they cost
      // Redis what the measured ones do.
      await admin.config('RESETSTAT')
      const cpu0 = await redisCpu(admin)
      const result = await runCase('redis', params, { env })
      const cpu = (await redisCpu(admin)) - cpu0
      const { calls, usec, inner } = await scriptStats(admin)
      const f = figures.get(s.label)
      f.usec.push(usec / calls)
      f.cpu.push((cpu * 1e6) / calls)
      f.commands.push(inner / calls)
      f.rate.push(result.perSecond)
      f.client.push(result.clientCpuUsPerCall)
    }
    // Each round's calls/s against the ceiling's of the same round: the load moves both alike.
    for (const s of subjects) {
      const f = figures.get(s.label)
      const ceiling = figures.get(`ceiling ${s.subject.split(':')[1]}`).rate
      f.ofCeiling.push(f.rate[round] / ceiling[round])
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
  `| subject | Redis µs per call (commandstats) | of minimal | of ceiling | Redis CPU µs per call | commands per call | calls/s (${inFlight} in flight) | of the ceiling's, same round | client CPU µs per call |`,
)
console.log('|---|---|---|---|---|---|---|---|---|')
for (const s of subjects) {
  const f = figures.get(s.label)
  const algorithm = s.subject.split(':')[1]
  const usec = median(f.usec)
  const minimal = median(figures.get(`minimal ${algorithm}`).usec)
  const ceiling = median(figures.get(`ceiling ${algorithm}`).usec)
  console.log(
    `| ${s.label} | ${usec.toFixed(2)} (${Math.min(...f.usec).toFixed(2)}–${Math.max(...f.usec).toFixed(2)}) | ${(usec / minimal).toFixed(2)}× | ${(usec / ceiling).toFixed(2)}× | ${median(f.cpu).toFixed(1)} | ${median(f.commands).toFixed(2)} | ${Math.round(median(f.rate)).toLocaleString('en')} | ${median(f.ofCeiling).toFixed(2)}× (${Math.min(...f.ofCeiling).toFixed(2)}–${Math.max(...f.ofCeiling).toFixed(2)}) | ${median(f.client).toFixed(1)} |`,
  )
}
