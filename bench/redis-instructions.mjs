#!/usr/bin/env node
/**
 * @module What one script call costs inside redis-server in CPU instructions, counted by callgrind: the
 * figure behind redis-time.mjs's µs per call that a busy or shared machine cannot move. sluice's
 * fixedWindow and slidingLog consumes beside the raw floors and ceilings (lib/ceiling-scripts.mjs), driven
 * by the real clients (a RedisStore on ioredis, `deniedCache: false`; the raw scripts by EVALSHA).
 *
 *   node bench/redis-instructions.mjs [--before <snapshot dir>] [--only slidingLog] [--keys 50]
 *                                     [--warmup 6000] [--calls 6000] [--in-flight 64]
 *
 * redis-server runs under callgrind with counting off; per subject the keys are flushed, `--warmup` calls
 * run, then counting is on for `--calls` calls and the counts are dumped. Two figures per call: all of
 * redis-server (reading the request, the script, the reply, the event loop) and the script alone (what
 * `INFO commandstats` times as EVALSHA). Needs valgrind.
 *
 * `--only concurrency` counts a concurrency request as the HTTP kit makes it, its decision and its release
 * (sent un-awaited, batched: lib/subjects.mjs `consumeAndRelease`), so a figure per call is per request, the
 * release's share of its batched script call in it; put it beside fixedWindow (`--only concurrency,fixedWindow`
 * and `--keys 10000`, where each request's key is idle as in redis-concurrency.mjs). It has no floor or ceiling.
 *
 * A slidingLog call's cost grows a little with its log, whose length is the calls a key gets in a window:
 * under callgrind Redis answers some hundreds of calls a second, so the default 50 keys give each key a
 * call about every 100 ms, near the 10 live members and one expiring a call that redis-time.mjs's 10,000
 * keys get at full speed. The members per key the counted calls met are printed beside each figure.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { CEILING_LUA, ceilingArgs, MINIMAL_LUA } from './lib/ceiling-scripts.mjs'
import { numberOption, option } from './lib/options.mjs'
import { redisVersion } from './lib/redis-server.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { consumeAndRelease, ruleFor } from './lib/subjects.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const { Redis } = createRequire(import.meta.url)('ioredis')
const before = option('before', undefined)
const ALGORITHMS = option('only', 'fixedWindow,slidingLog').split(',')
const KEYS = numberOption('keys', 50)
const WARMUP = numberOption('warmup', 6000)
const CALLS = numberOption('calls', 6000)
const IN_FLIGHT = numberOption('in-flight', 64)

if (spawnSync('valgrind', ['--version']).error !== undefined) {
  console.error('bench/redis-instructions.mjs needs valgrind: apt-get install valgrind')
  process.exit(1)
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

/** An ioredis client, once redis-server (slow to start under callgrind) answers. */
async function connect(port) {
  for (let i = 0; ; i++) {
    const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: null })
    client.on('error', () => {})
    try {
      await client.connect()
      await client.ping()
      return client
    } catch (error) {
      client.disconnect()
      if (i === 100) throw error
      await new Promise((resolve) => setTimeout(resolve, 300))
    }
  }
}

/** A subject's consume: sluice's limiter from a snapshot, or a raw script by EVALSHA. */
async function subjectOf(kind, algorithm, client, snap) {
  const rule = ruleFor(algorithm)
  if (kind === 'sluice') {
    const load = (name) =>
      import(pathToFileURL(join(snap, 'node_modules', '@sluice', name, 'dist', 'index.js')).href)
    const { createLimiter } = await load('core')
    const { RedisStore } = await load('redis')
    // A timeout callgrind's slowdown never reaches: a call answered by onStoreError would count nothing.
    const store = new RedisStore({ client, timeoutMs: 600_000, deniedCache: false })
    const limiter = createLimiter({ rules: [rule], store, onStoreError: 'throw' })
    return algorithm === 'concurrency' ? consumeAndRelease(limiter) : (key) => limiter.consume(key)
  }
  const sha = await client.script('LOAD', (kind === 'minimal' ? MINIMAL_LUA : CEILING_LUA)[algorithm])
  const numbers = ceilingArgs(rule).map(String)
  return (key) => client.evalsha(sha, 1, `ceiling:{${key}}:${algorithm}`, '1', ...numbers)
}

const keys = Array.from({ length: KEYS }, (_, i) => `client:${i}`)
let next = 0
/** `n` calls, `IN_FLIGHT` at a time, over the keys in turn. */
async function drive(consume, n) {
  let started = 0
  const worker = async () => {
    while (started < n) {
      started++
      const key = keys[next]
      if (++next === KEYS) next = 0
      await consume(key)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
}

const subjects = []
for (const algorithm of ALGORITHMS) {
  if (before !== undefined)
    subjects.push({ label: `before ${algorithm}`, kind: 'sluice', algorithm, snap: before })
  subjects.push({ label: `sluice ${algorithm}`, kind: 'sluice', algorithm })
  // concurrency's floor and ceiling need a lease id and a release of their own (cases/redis.mjs): not here.
  if (MINIMAL_LUA[algorithm] === undefined || algorithm === 'concurrency') continue
  subjects.push({ label: `minimal ${algorithm}`, kind: 'minimal', algorithm })
  subjects.push({ label: `ceiling ${algorithm}`, kind: 'ceiling', algorithm })
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-instructions-'))
const current = snapshot(join(dir, 'now'))
const port = await freePort()
const server = spawn(
  'valgrind',
  [
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${join(dir, 'cg')}.%p`,
    'redis-server',
    ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
  ],
  { stdio: 'ignore' },
)
const kill = () => server.kill('SIGKILL')
process.once('exit', kill)
const control = (...a) => execFileSync('callgrind_control', [...a, String(server.pid)], { stdio: 'pipe' })
const tag = (label) => label.replace(/\W/g, '_')

console.log(
  `redis-server ${redisVersion()} under callgrind; ${KEYS} keys, ${IN_FLIGHT} in flight, ${CALLS} calls counted per subject`,
)
const shapes = new Map()
try {
  const admin = await connect(port)
  for (const s of subjects) {
    await admin.flushall()
    const client = await connect(port)
    const consume = await subjectOf(s.kind, s.algorithm, client, s.snap ?? current)
    await drive(consume, WARMUP)
    control('-z')
    control('-i', 'on')
    await drive(consume, CALLS)
    // The releases of the last requests go at the end of this turn: counted with them.
    await new Promise((resolve) => setTimeout(resolve, 100))
    control('-i', 'off')
    control('-d', tag(s.label))
    client.disconnect()
    // The members per key the counted calls left (slidingLog's log; fixedWindow's hash has one field).
    let members = 0
    let logs = 0
    for (const key of (await admin.keys('*')).slice(0, 100)) {
      if ((await admin.type(key)) !== 'zset') continue
      members += await admin.zcard(key)
      logs++
    }
    shapes.set(s.label, logs === 0 ? '' : (members / logs).toFixed(1))
  }
  await admin.quit()
} finally {
  server.kill('SIGTERM')
  await new Promise((resolve) => server.once('exit', resolve))
  process.off('exit', kill)
}

/** Instructions per counted call: all of redis-server, and inside the script (evalGenericCommand). */
function countsOf(label) {
  const file = readdirSync(dir)
    .filter((f) => f.startsWith('cg.'))
    .find((f) => readFileSync(join(dir, f), 'utf8').includes(`Trigger: dump ${tag(label)}\n`))
  const path = join(dir, file)
  const total = Number(/^totals: (\d+)$/m.exec(readFileSync(path, 'utf8'))[1])
  const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', path], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  })
  const script = /([\d,]+) \([^)]*\)\s+\S*:evalGenericCommand /.exec(annotated)?.[1]
  return {
    total: total / CALLS,
    script: script === undefined ? Number.NaN : Number(script.replace(/,/g, '')) / CALLS,
  }
}

const counts = new Map(subjects.map((s) => [s.label, countsOf(s.label)]))
rmSync(dir, { recursive: true, force: true })
console.log(
  '| subject | redis-server instructions per call | in the script | script of minimal | script of ceiling | members per key |',
)
console.log('|---|---|---|---|---|---|')
const k = (n) => `${(n / 1000).toFixed(1)} k`
for (const s of subjects) {
  const c = counts.get(s.label)
  const minimal = counts.get(`minimal ${s.algorithm}`)?.script
  const ceiling = counts.get(`ceiling ${s.algorithm}`)?.script
  const of = (floor) => (floor === undefined ? '' : `${(c.script / floor).toFixed(2)}×`)
  console.log(
    `| ${s.label} | ${k(c.total)} | ${k(c.script)} | ${of(minimal)} | ${of(ceiling)} | ${shapes.get(s.label)} |`,
  )
}
