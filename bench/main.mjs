#!/usr/bin/env node
/**
 * @module sluice against its peers, side by side, in one run. Run it with `pnpm bench` (builds first) or
 * `node bench/main.mjs [--quick] [--only memory,redis,http,heap,flood,prefetch]` against the current builds;
 * `--report` writes RESULTS.md again from the last run (after editing analysis.md).
 *
 * Every measurement runs in a fresh node process (lib/child.mjs), runs of different subjects alternate so
 * a change in the machine's load touches them all alike, and each figure is the median (min–max) of the
 * runs. A redis-server of the bench's own runs on a free loopback port for the Redis sections. Writes
 * bench/RESULTS.md (bench/RESULTS.quick.md with --quick: a smoke check, not figures to quote).
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpus, loadavg, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import { runCase } from './lib/child.mjs'
import { load, startServer } from './lib/http-load.mjs'
import { redisVersion, scriptStats, startRedis } from './lib/redis-server.mjs'
import { renderResults } from './lib/report.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { summary } from './lib/stats.mjs'
import { ALGORITHMS, MORE_RULES } from './lib/subjects.mjs'

const args = process.argv.slice(2)
const quick = args.includes('--quick')
/** `--report`: write RESULTS.md again from the last full run's figures (after editing analysis.md), measuring nothing. */
const reportOnly = args.includes('--report')
const onlyArg = args.find((a) => a.startsWith('--only'))
const only =
  onlyArg === undefined ? undefined : (onlyArg.split('=')[1] ?? args[args.indexOf(onlyArg) + 1]).split(',')
const wanted = (section) => only === undefined || only.includes(section)

/** The prefetch the `sluice-redis-prefetch` server runs (`prefetch: true`: the defaults), for the overshoot case too. */
const PREFETCH = { units: 64, ms: 100 }
/** The overshoot case: processes sharing one key, each with calls in flight, at a limit they keep reaching. */
const OVERSHOOT = { processes: 4, inFlight: 256, limit: 2000, windowMs: 1000 }

/**
 * How long and how often: `--quick` is a smoke check in under a minute, the full run takes about 15 (the
 * prefetch section about 2 of them).
 */
const PLAN = quick
  ? {
      runs: 1,
      memory: {
        warmupMs: 100,
        measureMs: 200,
        subjects: [
          'sluice:fixedWindow',
          'sluice:concurrency',
          'sluice:warmUp',
          'sluice:table',
          'rlf',
          'erl',
          'fastify-local',
          'map',
          'map+clock',
        ],
      },
      redis: {
        warmupMs: 200,
        measureMs: 400,
        throughput: [
          'sluice:fixedWindow',
          'sluice:slidingLog',
          'sluice:concurrency',
          'sluice:warmUp',
          'ceiling:fixedWindow',
          'ceiling:slidingLog',
          'ceiling:concurrency',
          'minimal:concurrency',
          'rlf',
          'rlr',
        ],
        latency: ['sluice:fixedWindow', 'ceiling:fixedWindow'],
      },
      http: { warmupS: 1, measureS: 1, rounds: 1 },
      heap: { keys: 100_000, runs: 1, subjects: ['sluice:fixedWindow', 'rlf', 'erl', 'map'] },
      flood: { calls: 5000, runs: 1 },
      prefetch: {
        warmupS: 1,
        measureS: 1,
        rounds: 1,
        prefetch: PREFETCH,
        overshoot: { ...OVERSHOOT, seconds: 2, runs: 1 },
      },
    }
  : {
      runs: 5,
      memory: {
        warmupMs: 300,
        measureMs: 800,
        subjects: [
          ...ALGORITHMS.map((a) => `sluice:${a}`),
          ...MORE_RULES.map((a) => `sluice:${a}`),
          'sluice:table',
          'rlf',
          'erl',
          'fastify-local',
          'map',
          'map+clock',
        ],
      },
      redis: {
        warmupMs: 500,
        measureMs: 1200,
        throughput: [
          ...ALGORITHMS.map((a) => `sluice:${a}`),
          ...MORE_RULES.map((a) => `sluice:${a}`),
          'sluice-node-redis:fixedWindow',
          ...ALGORITHMS.map((a) => `ceiling:${a}`),
          'ceiling:concurrency',
          'minimal:concurrency',
          'ceiling-autopipelined:fixedWindow',
          'rlf',
          'rlr',
        ],
        latency: [
          ...ALGORITHMS.map((a) => `sluice:${a}`),
          ...MORE_RULES.map((a) => `sluice:${a}`),
          ...ALGORITHMS.map((a) => `ceiling:${a}`),
          'rlf',
          'rlr',
        ],
      },
      http: { warmupS: 2, measureS: 2, rounds: 7 },
      heap: {
        keys: 1_000_000,
        runs: 2,
        subjects: [
          ...ALGORITHMS.map((a) => `sluice:${a}`),
          'sluice:table',
          'rlf',
          'erl',
          'fastify-local',
          'map',
          'map+clock',
        ],
      },
      flood: { calls: 20_000, runs: 2 },
      prefetch: {
        warmupS: 2,
        measureS: 2,
        rounds: 7,
        prefetch: PREFETCH,
        overshoot: { ...OVERSHOOT, seconds: 4, runs: 2 },
      },
    }

const KEY_COUNTS = [1, 100_000]
const MODES = ['serial', 'batch']
const BATCH = 256
const IN_FLIGHT = 256
const HTTP_CONNECTIONS = 64
const FRAMEWORKS = ['express', 'fastify']
const VARIANTS = [
  'bare',
  'noop',
  'noop-headers',
  'noop-ip-headers',
  'sluice-memory',
  'peer-memory',
  'sluice-redis',
  'peer-redis',
]
/** The servers of each framework; sluice on node-redis too where a Redis goal is set (Fastify). */
const VARIANTS_OF = { express: VARIANTS, fastify: [...VARIANTS, 'sluice-redis-node'] }
const FLOOD_SUBJECTS = ['sluice', 'sluice-nocache', 'rlf', 'rlf-block', 'rlr']
/** The prefetch section's Fastify servers: sluice on Redis with prefetch, beside what it should come near. */
const PREFETCH_VARIANTS = ['bare', 'sluice-memory', 'sluice-redis', 'sluice-redis-prefetch', 'peer-redis']
/** After a prefetch server's run, how long until its script calls are read: its last give-backs come up to `ms` after the run. */
const GIVE_BACK_WAIT_MS = PREFETCH.ms + 50

const started = Date.now()
const log = (...a) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s]`, ...a)

/** Runs every config `runs` times, alternating; the summary of each result field, per config key. */
async function alternate(configs, runs, measure) {
  const raw = new Map(configs.map((c) => [c.key, []]))
  for (let r = 0; r < runs; r++) {
    for (const c of configs) {
      const result = await measure(c)
      raw.get(c.key).push(result)
    }
  }
  const out = {}
  for (const c of configs) {
    const results = raw.get(c.key)
    out[c.key] = {}
    for (const field of Object.keys(results[0])) out[c.key][field] = summary(results.map((x) => x[field]))
  }
  return out
}

function machine() {
  const version = (name) =>
    JSON.parse(readFileSync(`${dir}node_modules/${name}/package.json`, 'utf8')).version
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', cwd: dir })
  const dirty = spawnSync('git', ['status', '--porcelain', '--', '../packages'], {
    encoding: 'utf8',
    cwd: dir,
  })
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    redis: redisVersion(),
    commit: `${git.stdout.trim()}${dirty.stdout.trim() === '' ? '' : ' + uncommitted changes'}`,
    packages: {
      '@sluice/core': version('@sluice/core'),
      'rate-limiter-flexible': version('rate-limiter-flexible'),
      'express-rate-limit': version('express-rate-limit'),
      'rate-limit-redis': version('rate-limit-redis'),
      '@fastify/rate-limit': version('@fastify/rate-limit'),
      ioredis: version('ioredis'),
      redis: version('redis'),
      express: version('express'),
      fastify: version('fastify'),
      autocannon: version('autocannon'),
    },
  }
}

async function redisAdmin(port) {
  const { Redis } = createRequire(import.meta.url)('ioredis')
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true })
  await client.connect()
  return client
}

async function flushRedis(port) {
  const client = await redisAdmin(port)
  await client.flushall()
  client.disconnect()
}

const dir = fileURLToPath(new URL('./', import.meta.url))
/** The last run's figures, kept where tools keep caches (out of git and of the linter's way). */
const cacheDir = `${dir}node_modules/.cache/sluice-bench/`
const lastResults = `${cacheDir}${quick ? 'last-quick.json' : 'last.json'}`

if (reportOnly) {
  if (!existsSync(lastResults)) throw new Error('no earlier run to report: run node bench/main.mjs first')
  const results = JSON.parse(readFileSync(lastResults, 'utf8'))
  const target = `${dir}${quick ? 'RESULTS.quick.md' : 'RESULTS.md'}`
  writeFileSync(target, renderResults(results, quick ? '' : readFileSync(`${dir}analysis.md`, 'utf8')))
  console.log(`wrote ${target} from ${lastResults}`)
  process.exit(0)
}

snapshot()
const results = { quick, machine: machine(), load: { start: loadavg() }, plan: PLAN, sections: {} }
log(
  `sluice bench${quick ? ' --quick' : ''}: ${results.machine.cpu}, ${results.machine.cores} cores, Node ${process.version}`,
)

if (wanted('memory')) {
  log('1. in-memory decisions/s')
  const configs = []
  for (const subject of PLAN.memory.subjects)
    for (const keys of KEY_COUNTS)
      for (const mode of MODES) configs.push({ key: `${subject}|${keys}|${mode}`, subject, keys, mode })
  results.sections.memory = await alternate(configs, PLAN.memory.runs ?? PLAN.runs, (c) =>
    runCase('memory', {
      ...c,
      batch: BATCH,
      warmupMs: PLAN.memory.warmupMs,
      measureMs: PLAN.memory.measureMs,
    }),
  )
}

const needsRedis = wanted('redis') || wanted('http') || wanted('flood') || wanted('prefetch')
const redis = needsRedis ? await startRedis() : undefined
try {
  if (wanted('redis')) {
    log(
      `2. Redis decisions/s (${IN_FLIGHT} in flight) and latency (1 in flight), redis-server on ${redis.port}`,
    )
    const configs = PLAN.redis.throughput.map((subject) => ({
      key: `${subject}|throughput`,
      subject,
      measure: 'throughput',
      inFlight: IN_FLIGHT,
    }))
    // Latency is read in pairs where a ceiling or a peer is measured: the subjects of an algorithm (the peers
    // with fixedWindow) share one process and take turns call by call, so each run's p50s saw the same
    // machine (bench/redis-latency.mjs); an algorithm with no ceiling is measured alone.
    const groups = new Map()
    for (const subject of PLAN.redis.latency) {
      const algorithm = subject.split(':')[1] ?? 'fixedWindow'
      groups.set(algorithm, [...(groups.get(algorithm) ?? []), subject])
    }
    for (const subjects of groups.values()) {
      configs.push({ key: `${subjects.join(',')}|latency`, subjects, measure: 'interleaved', inFlight: 1 })
    }
    const admin = await redisAdmin(redis.port)
    let measured
    try {
      measured = await alternate(configs, PLAN.runs, async (c) => {
        await admin.flushall()
        await admin.config('RESETSTAT')
        const result = await runCase('redis', {
          ...c,
          port: redis.port,
          redisPid: redis.pid,
          keys: 10_000,
          warmupMs: PLAN.redis.warmupMs,
          measureMs: PLAN.redis.measureMs,
        })
        // Redis's time inside scripts per request (INFO commandstats), the warm-up's requests counted
        // too: what bounds one Redis, whatever the clients do, and what load does not move.
        const { usec } = await scriptStats(admin)
        if (c.measure === 'throughput') result.redisScriptUsPerRequest = usec / result.allRequests
        if (c.measure !== 'interleaved') return result
        // `<subject>|<field>`, so each field is summarised over runs, then filed under `<subject>|latency`.
        return Object.fromEntries(
          Object.entries(result).flatMap(([subject, r]) =>
            Object.entries(r).map(([field, value]) => [`${subject}|${field}`, value]),
          ),
        )
      })
    } finally {
      admin.disconnect()
    }
    results.sections.redis = {}
    for (const [key, fields] of Object.entries(measured)) {
      if (!key.endsWith('|latency')) {
        results.sections.redis[key] = fields
        continue
      }
      for (const [name, summarised] of Object.entries(fields)) {
        const [subject, field] = name.split('|')
        results.sections.redis[`${subject}|latency`] ??= {}
        results.sections.redis[`${subject}|latency`][field] = summarised
      }
    }
  }

  if (wanted('http')) {
    log(`3. HTTP req/s, ${HTTP_CONNECTIONS} connections, servers in processes of their own`)
    results.sections.http = {}
    for (const framework of FRAMEWORKS) {
      const servers = {}
      try {
        for (const variant of VARIANTS_OF[framework]) {
          servers[variant] = await startServer({ framework, variant, redisPort: redis.port })
          await load(servers[variant], PLAN.http.warmupS, HTTP_CONNECTIONS)
        }
        const configs = VARIANTS_OF[framework].map((variant) => ({ key: `${framework}|${variant}`, variant }))
        Object.assign(
          results.sections.http,
          await alternate(configs, PLAN.http.rounds, (c) =>
            load(servers[c.variant], PLAN.http.measureS, HTTP_CONNECTIONS),
          ),
        )
      } finally {
        for (const server of Object.values(servers)) await server.stop()
      }
      await flushRedis(redis.port)
    }
  }

  if (wanted('flood')) {
    log('5. a flood from one key: Redis commands per denied call')
    const configs = FLOOD_SUBJECTS.map((subject) => ({ key: subject, subject }))
    results.sections.flood = await alternate(configs, PLAN.flood.runs, async (c) => {
      await flushRedis(redis.port)
      return runCase('flood', {
        subject: c.subject,
        port: redis.port,
        calls: PLAN.flood.calls,
        inFlight: IN_FLIGHT,
        limit: 10,
      })
    })
  }

  if (wanted('prefetch')) {
    log('6. prefetch from Redis: Fastify req/s and round trips per request, far from the limit')
    results.sections.prefetch = {}
    await flushRedis(redis.port)
    const admin = await redisAdmin(redis.port)
    const servers = {}
    try {
      for (const variant of PREFETCH_VARIANTS) {
        servers[variant] = await startServer({ framework: 'fastify', variant, redisPort: redis.port })
        await load(servers[variant], PLAN.prefetch.warmupS, HTTP_CONNECTIONS)
      }
      const configs = PREFETCH_VARIANTS.map((variant) => ({ key: `fastify|${variant}`, variant }))
      Object.assign(
        results.sections.prefetch,
        await alternate(configs, PLAN.prefetch.rounds, async (c) => {
          if (c.variant !== 'sluice-redis-prefetch') {
            return load(servers[c.variant], PLAN.prefetch.measureS, HTTP_CONNECTIONS)
          }
          // Only this server talks to Redis during its run; its last give-backs come up to `ms` after it.
          await servers[c.variant].stats()
          await admin.config('RESETSTAT')
          const run = await load(servers[c.variant], PLAN.prefetch.measureS, HTTP_CONNECTIONS)
          await new Promise((resolve) => setTimeout(resolve, GIVE_BACK_WAIT_MS))
          const scripts = (await scriptStats(admin)).calls
          const { inCall, promised } = await servers[c.variant].stats()
          return {
            ...run,
            scripts,
            roundTripsPerAdmitted: scripts / run.requests,
            inCallShare: inCall / (inCall + promised),
          }
        }),
      )
    } finally {
      for (const server of Object.values(servers)) await server.stop()
      admin.disconnect()
    }
    const { runs, ...overshoot } = PLAN.prefetch.overshoot
    log(
      `   overshoot: ${overshoot.processes} processes × ${overshoot.inFlight} in flight on one key, limit ${overshoot.limit} per ${overshoot.windowMs} ms`,
    )
    const configs = ['slidingLog', 'fixedWindow'].map((algorithm) => ({
      key: `overshoot|${algorithm}`,
      algorithm,
    }))
    Object.assign(
      results.sections.prefetch,
      await alternate(configs, runs, async (c) => {
        await flushRedis(redis.port)
        return runCase('prefetch-overshoot', {
          port: redis.port,
          algorithm: c.algorithm,
          ...overshoot,
          ...PLAN.prefetch.prefetch,
        })
      }),
    )
  }
} finally {
  await redis?.stop()
}

if (wanted('heap')) {
  log(`4. heap bytes per key after ${PLAN.heap.keys.toLocaleString('en')} keys`)
  const configs = PLAN.heap.subjects.map((subject) => ({ key: subject, subject }))
  results.sections.heap = await alternate(configs, PLAN.heap.runs, (c) =>
    runCase('heap', { subject: c.subject, keys: PLAN.heap.keys }, { nodeArgs: ['--expose-gc'] }),
  )
}

results.load.end = loadavg()
results.seconds = (Date.now() - started) / 1000
const target = `${dir}${quick ? 'RESULTS.quick.md' : 'RESULTS.md'}`
const analysis = quick ? '' : readFileSync(`${dir}analysis.md`, 'utf8')
writeFileSync(target, renderResults(results, analysis))
mkdirSync(cacheDir, { recursive: true })
writeFileSync(lastResults, JSON.stringify(results))
log(`wrote ${target} in ${results.seconds.toFixed(0)} s`)
