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
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedis } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : args[i + 1]
}
const CALLS = Number(option('calls', 20_000))
const WARMUP = Number(option('warmup', 20_000))
const BEFORE = option('before', undefined)
const ONLY = option('only', 'concurrency,fixedWindow').split(',')
const caseFile = fileURLToPath(new URL('./cases/redis-calls.mjs', import.meta.url))

if (spawnSync('valgrind', ['--version']).error !== undefined) {
  console.error('bench/redis-client-instructions.mjs needs valgrind: apt-get install valgrind')
  process.exit(1)
}

function control(argv) {
  const r = spawnSync('callgrind_control', argv, { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`callgrind_control ${argv.join(' ')}: ${r.stderr || r.stdout}`)
}

/** Instructions (all threads) of `CALLS` calls of `subject` from `snapshotDir`. */
function total(dir, subject, port, snapshotDir) {
  const out = join(dir, `cg-${process.hrtime.bigint()}`)
  const params = { subject, port, keys: 10_000, warmup: WARMUP, calls: CALLS, batch: 256 }
  const argv = [
    '--tool=callgrind',
    '--instr-atstart=no',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}.%p`,
    process.execPath,
    '--expose-gc',
    caseFile,
    JSON.stringify(params),
  ]
  return new Promise((done, reject) => {
    const child = spawn('valgrind', argv, {
      env: { ...process.env, SLUICE_BENCH_SNAPSHOT: snapshotDir },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-2000)
    })
    let said = ''
    child.stdout.on('data', (c) => {
      said += c
      if (said.includes('READY\n')) {
        said = said.replace('READY\n', '')
        control(['-i', 'on', String(child.pid)])
        child.stdin.write('go\n')
      }
      if (said.includes('DONE\n')) {
        said = said.replace('DONE\n', '')
        control(['-d', String(child.pid)])
        child.stdin.write('end\n')
      }
    })
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${subject}: ${err}`))
      const prefix = out.slice(dir.length + 1)
      const part = readdirSync(dir).find((f) => f.startsWith(prefix) && f.endsWith('.1'))
      if (part === undefined) return reject(new Error(`${subject}: no dump`))
      const sum = Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, part), 'utf8'))[1])
      for (const f of readdirSync(dir).filter((f) => f.startsWith(prefix))) rmSync(join(dir, f))
      done(sum)
    })
  })
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
