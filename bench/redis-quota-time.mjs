#!/usr/bin/env node
/**
 * @module Redis time per call of a quota rule beside a fixedWindow's (`INFO commandstats` usec_per_call of
 * EVALSHA): a quota's consume carries its period [start, end), which the client computes, and its script
 * checks that its TIME lies inside before counting (docs/design/redis.md, "Quota periods"); the goal is at
 * most 1.2× the fixedWindow's Redis time. Both go by their straight-down consume scripts (one rule, no block),
 * and by the composed script as the second of two rules (beside a fixedWindow), where `fixedWindow+fixedWindow`
 * is the twin. Subjects take turns over the rounds, in one run, on one redis-server; each figure is the median
 * of its rounds, and the ratio is taken round by round (the load moves both alike).
 *
 *   node bench/redis-quota-time.mjs [--rounds 5] [--ms 1500] [--in-flight 64]
 *
 * Every subject runs with `deniedCache: false`, 10,000 keys and 64 calls in flight on an ioredis client,
 * as bench/redis-time.mjs does.
 */
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { runCase } from './lib/child.mjs'
import { numberOption } from './lib/options.mjs'
import { connectIoredis, redisVersion, scriptStats, startRedis } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

console.log(`node ${process.version}`)

const rounds = numberOption('rounds', 5)
const measureMs = numberOption('ms', 1500)
const inFlight = numberOption('in-flight', 64)

/** Pairs: the quota subject and its fixedWindow twin. */
const PAIRS = [
  ['sluice:quota', 'sluice:fixedWindow'],
  ['sluice-pair:quota', 'sluice-pair:fixedWindow'],
]

const current = snapshot()
const redis = await startRedis()
const admin = await connectIoredis(redis.port)
const load = [loadavg()[0]]
const usec = new Map(PAIRS.flat().map((s) => [s, []]))
const ratios = new Map(PAIRS.map(([q]) => [q, []]))
console.log(
  `redis-server ${redisVersion()} on ${redis.port}; ${rounds} rounds of ${measureMs} ms per subject`,
)
try {
  for (let round = 0; round < rounds; round++) {
    // The pair's order turns each round.
    const order = round % 2 === 0 ? PAIRS.flat() : PAIRS.flat().reverse()
    for (const subject of order) {
      await admin.flushall()
      await admin.config('RESETSTAT')
      await runCase(
        'redis',
        {
          subject,
          port: redis.port,
          redisPid: redis.pid,
          measure: 'throughput',
          inFlight,
          warmupMs: 300,
          measureMs,
          keys: 10_000,
          deniedCache: false,
        },
        { env: { ...process.env, SLUICE_BENCH_SNAPSHOT: resolve(current) } },
      )
      const stats = await scriptStats(admin)
      usec.get(subject).push(stats.usec / stats.calls)
    }
    for (const [q, fw] of PAIRS) ratios.get(q).push(usec.get(q)[round] / usec.get(fw)[round])
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
  '| subject | Redis µs per call (commandstats), median (range) | quota ÷ fixedWindow, same round |',
)
console.log('|---|---|---|')
for (const [q, fw] of PAIRS) {
  const r = ratios.get(q)
  for (const s of [fw, q]) {
    const u = usec.get(s)
    const ratio =
      s === q ? `${median(r).toFixed(2)}× (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})` : ''
    console.log(
      `| ${s} | ${median(u).toFixed(2)} (${Math.min(...u).toFixed(2)}–${Math.max(...u).toFixed(2)}) | ${ratio} |`,
    )
  }
}
