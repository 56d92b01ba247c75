#!/usr/bin/env node
/**
 * @module What a Redis decision costs the client process in CPU instructions, counted by callgrind: sluice's
 * side (the limiter, the store, the wire, ioredis, the socket writes) of `sluice:concurrency` (a decision and
 * its un-awaited release) beside `sluice:fixedWindow`, a figure a shared machine cannot move.
 *
 *   node bench/redis-client-instructions.mjs [--calls 20000] [--warmup 20000] [--before DIR] [--only concurrency]
 *
 * Each subject runs under callgrind (cases/redis-calls.mjs) against one redis-server, 256 in flight, with
 * counting off through start-up and a warm-up, then on for `--calls` calls; all threads are counted. Under
 * callgrind the client, not Redis, is the slow side, so replies arrive in larger bursts than in a real run:
 * read the figures as the client's work per call, not as a throughput. `--before DIR` counts a snapshot too.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { countedInstructions, needValgrind } from './lib/callgrind.mjs'
import { numberOption, option } from './lib/options.mjs'
import { startRedis } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const CALLS = numberOption('calls', 20_000)
const WARMUP = numberOption('warmup', 20_000)
const BEFORE = option('before', undefined)
const ONLY = option('only', 'concurrency,fixedWindow').split(',')
const caseFile = fileURLToPath(new URL('./cases/redis-calls.mjs', import.meta.url))

needValgrind('bench/redis-client-instructions.mjs')

/** Instructions (all threads) of `CALLS` calls of `subject` from `snapshotDir`. */
function total(dir, subject, port, snapshotDir) {
  const params = { subject, port, keys: 10_000, warmup: WARMUP, calls: CALLS, batch: 256 }
  return countedInstructions(dir, caseFile, params, snapshotDir, subject)
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-instructions-'))
const redis = await startRedis()
const figures = []
try {
  const builds = [['after', snapshot(join(dir, 'now'))]]
  if (BEFORE !== undefined) builds.unshift(['before', resolve(BEFORE)])
  for (const algorithm of ONLY) {
    for (const [label, snap] of builds) {
      const n = (await total(dir, `sluice:${algorithm}`, redis.port, snap)) / CALLS
      figures.push([label, algorithm, n])
      console.log(
        `${label} sluice:${algorithm}: ${Math.round(n).toLocaleString('en-US')} instructions per call`,
      )
    }
  }
} finally {
  await redis.stop()
  rmSync(dir, { recursive: true, force: true })
}
const fixed = (label) => figures.find((f) => f[0] === label && f[1] === 'fixedWindow')?.[2]
console.log('\n| build | subject | instructions per call | fixedWindow / it |')
console.log('|---|---|---|---|')
for (const [label, algorithm, n] of figures) {
  const f = fixed(label)
  console.log(
    `| ${label} | sluice:${algorithm} | ${Math.round(n).toLocaleString('en-US')} | ${f === undefined ? '' : `${(f / n).toFixed(2)}×`} |`,
  )
}
