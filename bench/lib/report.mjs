/**
 * @module RESULTS.md from a run's results: the machine, the versions, one table per section with
 * median (min–max) of the runs, ratios against the peers and the ceilings, and the goals, met or not.
 */
import { pairedRatio, rate, ratio, spread, times } from './stats.mjs'

const ms = (x) => `${x.toFixed(3)} ms`
const bytes = (x) => `${Math.round(x)} B`
const perDenied = (x) => x.toFixed(3)

const MEMORY_NAMES = {
  rlf: 'rate-limiter-flexible RateLimiterMemory',
  erl: "express-rate-limit's MemoryStore",
  'fastify-local': "@fastify/rate-limit's LocalStore",
  map: 'ceiling: bare Map counter (no clock)',
  'map+clock': 'ceiling: Map of fixed windows + Date.now()',
}
const REDIS_NAMES = { rlf: 'rate-limiter-flexible RateLimiterRedis', rlr: 'rate-limit-redis' }
const FLOOD_NAMES = {
  sluice: 'sluice RedisStore (denied-key cache on: the default)',
  'sluice-nocache': 'sluice RedisStore, deniedCache: false',
  rlf: 'rate-limiter-flexible RateLimiterRedis',
  'rlf-block': 'rate-limiter-flexible RateLimiterRedis, inMemoryBlockOnConsumed',
  rlr: 'rate-limit-redis',
}

function nameOf(subject, names) {
  if (subject === 'sluice:table') return 'sluice fixedWindow, rules from a limit table'
  if (subject.startsWith('sluice:')) return `sluice ${subject.slice(7)}`
  if (subject.startsWith('sluice-node-redis:')) return `sluice ${subject.slice(18)} (node-redis client)`
  if (subject.startsWith('ceiling:')) return `ceiling: raw EVALSHA, ${subject.slice(8)}`
  if (subject.startsWith('ceiling-autopipelined:')) {
    return `raw EVALSHA, ${subject.slice(22)}, ioredis enableAutoPipelining`
  }
  if (subject === 'minimal:concurrency')
    return 'floor: raw EVALSHA, the least Redis work of a concurrency request'
  return names[subject] ?? subject
}

function table(head, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n')
}

const med = (s) => s?.median

/** Ceiling's (client + Redis) CPU per call over the subject's: how near the subject's cost is to the ceiling's. */
function cpuRatio(red, subject, ceiling) {
  const cost = (name) => {
    const t = red[`${name}|throughput`]
    return t === undefined ? Number.NaN : med(t.clientCpuUsPerCall) + med(t.redisCpuUsPerCall)
  }
  const x = cost(ceiling) / cost(subject)
  return Number.isFinite(x) ? x : undefined
}

export function goals(r) {
  const out = []
  const mem = r.sections.memory
  if (mem !== undefined) {
    // Every in-memory goal is a ratio of decisions per CPU second taken in the same run (wall clock beside
    // the peers' rows): against a peer, the raw ceiling, or sluice's own fixed list (the issue 32 table).
    const cell = (s, keys, field = 'perCpuSecond') => med(mem[`${s}|${keys}|batch`]?.[field])
    const vs = (label, [s, sKeys], [other, oKeys], floor, wall = false) => {
      const cpu = cell(s, sKeys) / cell(other, oKeys)
      if (Number.isNaN(cpu)) return
      out.push([label, `≥ ${floor.toFixed(2)}×`, cpu, cpu >= floor, 'ratio'])
      if (!wall) return
      const w = cell(s, sKeys, 'perSecond') / cell(other, oKeys, 'perSecond')
      out.push(['  the same, wall clock', `≥ ${floor.toFixed(2)}×`, w, w >= floor, 'ratio'])
    }
    // The raw ceiling does a Map lookup, a Date.now() and a count; sluice also builds a decision (its
    // rule's and the call's) and answers through a promise, as every peer's store does.
    for (const keys of [1, 100_000]) {
      vs(
        `in-memory fixedWindow vs the ceiling (Map of fixed windows + Date.now()), ${keys === 1 ? '1 key' : '100 k keys'}, 256 in flight (per CPU second)`,
        ['sluice:fixedWindow', keys],
        ['map+clock', keys],
        0.8,
      )
    }
    for (const [peer, floor] of [
      ['fastify-local', 1.0],
      ['erl', 0.8],
    ]) {
      vs(
        `in-memory fixedWindow vs ${MEMORY_NAMES[peer]}, 100 k keys, 256 in flight (per CPU second)`,
        ['sluice:fixedWindow', 100_000],
        [peer, 100_000],
        floor,
        true,
      )
    }
    vs(
      'in-memory concurrency (consume + release) vs fixedWindow, 100 k keys, 256 in flight (per CPU second)',
      ['sluice:concurrency', 100_000],
      ['sluice:fixedWindow', 100_000],
      0.3,
    )
    vs(
      'in-memory leakyBucket on one hot key vs fixedWindow on one key, 256 in flight (per CPU second)',
      ['sluice:leakyBucket', 1],
      ['sluice:fixedWindow', 1],
      0.5,
    )
    vs(
      'in-memory fixedWindow with rules from a limit table vs the fixed list, 100 k keys, 256 in flight (per CPU second)',
      ['sluice:table', 100_000],
      ['sluice:fixedWindow', 100_000],
      0.9,
    )
  }
  const red = r.sections.redis
  if (red !== undefined) {
    // Against the raw script through the same client, in the same run: rate, CPU per call, and latency
    // (issue 26's goals: fixedWindow 0.9× and slidingLog 0.85× of their ceilings, fixedWindow at least
    // rate-limit-redis's rate, p50 within 1.1× of the ceiling's).
    for (const [algorithm, floor] of [
      ['fixedWindow', 0.9],
      ['slidingLog', 0.85],
    ]) {
      const target = `≥ ${floor}×`
      const s = med(red[`sluice:${algorithm}|throughput`]?.perSecond)
      const c = med(red[`ceiling:${algorithm}|throughput`]?.perSecond)
      if (c !== undefined)
        out.push([
          `Redis ${algorithm}, 256 in flight, vs raw EVALSHA ceiling`,
          target,
          s / c,
          s / c >= floor,
          'ratio',
        ])
      const cpu = cpuRatio(red, `sluice:${algorithm}`, `ceiling:${algorithm}`)
      if (cpu !== undefined) {
        out.push([`  the same, by client + Redis CPU per call`, target, cpu, cpu >= floor, 'ratio'])
      }
      const rlr = med(red['rlr|throughput']?.perSecond)
      if (algorithm === 'fixedWindow' && rlr !== undefined) {
        out.push([
          'Redis fixedWindow, 256 in flight, vs rate-limit-redis',
          '≥ 1.0×',
          s / rlr,
          s / rlr >= 1,
          'ratio',
        ])
      }
      // sluice's p50 over the ceiling's, run by run (each run's two were measured in turns, call by call):
      // 1.00× is as fast as one bare script call.
      const x = pairedRatio(
        red[`sluice:${algorithm}|latency`]?.p50Ms,
        red[`ceiling:${algorithm}|latency`]?.p50Ms,
      )
      if (x !== undefined) {
        out.push([
          `Redis ${algorithm} p50, 1 in flight, vs raw EVALSHA ceiling's p50`,
          '≤ 1.1×',
          x,
          x <= 1.1,
          'ratio',
        ])
      }
    }
    // A concurrency request (decision awaited, release batched) beside a fixedWindow one (issue 26: 0.8×),
    // then the same two jobs as raw scripts through plain ioredis: what they make of the ratio unaided.
    const rate = (subject) => med(red[`${subject}|throughput`]?.perSecond)
    const ratio = (build) => rate(`${build}:concurrency`) / rate(`${build}:fixedWindow`)
    const sluiceRatio = ratio('sluice')
    if (Number.isFinite(sluiceRatio)) {
      out.push([
        'Redis concurrency (decision + release) vs fixedWindow, 256 in flight',
        '≥ 0.8×',
        sluiceRatio,
        sluiceRatio >= 0.8,
        'ratio',
      ])
    }
    // Where Redis is the bound, the ratio is fixedWindow's Redis time per request over concurrency's; the
    // floor is the least Redis work a lease kept by Redis's clock can take (ceiling-scripts.mjs MINIMAL_LUA).
    const usec = (subject) => med(red[`${subject}|throughput`]?.redisScriptUsPerRequest)
    const byRedis = usec('sluice:fixedWindow') / usec('sluice:concurrency')
    if (Number.isFinite(byRedis)) {
      out.push(['  the same, by Redis time per request', '≥ 0.8×', byRedis, byRedis >= 0.8, 'ratio'])
    }
    reach(out, '  the raw ceilings of the two, by rate', '≥ 0.8×', ratio('ceiling'), 0.8, 'ratio')
    reach(
      out,
      "  floor: TIME, ZCARD, ZADD, PEXPIRE and a batched ZREM, by Redis time per request, vs sluice's fixedWindow",
      '≥ 0.8×',
      usec('sluice:fixedWindow') / usec('minimal:concurrency'),
      0.8,
      'ratio',
    )
  }
  const http = r.sections.http
  if (http !== undefined) {
    // req/s against bare, then bare's server CPU per request against this server's, run by run.
    const vsBare = (framework, variant) => {
      const [s, bare] = [http[`${framework}|${variant}`], http[`${framework}|bare`]]
      return [
        pairedRatio(s?.perSecond, bare?.perSecond),
        pairedRatio(bare?.serverCpuUsPerRequest, s?.serverCpuUsPerRequest),
      ]
    }
    for (const [framework, variant, floor] of [
      ['express', 'sluice-memory', 0.95],
      ['fastify', 'sluice-memory', 0.95],
      ['fastify', 'sluice-redis', 0.65],
      ['fastify', 'sluice-redis-node', 0.65],
    ]) {
      if (http[`${framework}|${variant}`] === undefined) continue
      const [rate, cpu] = vsBare(framework, variant)
      const store = {
        'sluice-memory': 'memory',
        'sluice-redis': 'Redis',
        'sluice-redis-node': 'Redis (node-redis)',
      }[variant]
      out.push([`${framework} + sluice ${store} vs bare`, `≥ ${floor}×`, rate, rate >= floor, 'ratio'])
      out.push(['  the same, by server CPU per request', `≥ ${floor}×`, cpu, cpu >= floor, 'ratio'])
      if (variant === 'sluice-memory') {
        const hook = framework === 'express' ? 'middleware' : 'hook'
        const ip = framework === 'express' ? 'req.ip' : 'request.ip'
        for (const [floorVariant, what] of [
          ['noop', `an empty ${hook}`],
          ['noop-headers', `an empty ${hook} setting the two headers`],
          ['noop-ip-headers', `a ${hook} reading ${ip}, setting the headers with a fresh remaining count`],
        ]) {
          const [rateFloor, cpuFloor] = vsBare(framework, floorVariant)
          reach(out, `  floor: ${what}, vs bare`, `≥ ${floor}×`, rateFloor, floor, 'ratio')
          reach(out, '    the same, by server CPU per request', `≥ ${floor}×`, cpuFloor, floor, 'ratio')
        }
      }
    }
  }
  const pre = r.sections.prefetch
  if (pre !== undefined) {
    const s = pre['fastify|sluice-redis-prefetch']
    const memory = pre['fastify|sluice-memory']
    if (s !== undefined && memory !== undefined) {
      const rate = pairedRatio(s.perSecond, memory.perSecond)
      const cpu = pairedRatio(memory.serverCpuUsPerRequest, s.serverCpuUsPerRequest)
      out.push([
        'fastify + sluice Redis with prefetch vs sluice memory',
        '≥ 0.95×',
        rate,
        rate >= 0.95,
        'ratio',
      ])
      out.push(['  the same, by server CPU per request', '≥ 0.95×', cpu, cpu >= 0.95, 'ratio'])
      const trips = med(s.roundTripsPerAdmitted)
      out.push([
        'Redis round trips per admitted request, prefetch, far from the limit',
        '≤ 0.05',
        trips,
        trips <= 0.05,
        'fraction',
      ])
    }
  }
  return out
}

/**
 * A row under a goal: what a ceiling (the least any limiter could cost) reaches against the same target.
 * Marked "reachable" or "out of reach here", never met or not: it says whether the goal can be met on this
 * machine at all.
 */
function reach(out, label, target, value, floor, unit) {
  if (value === undefined || Number.isNaN(value)) return
  out.push([label, target, value, value >= floor ? 'reachable' : 'out of reach here', unit])
}

function goalValue(value, unit) {
  if (value === undefined || Number.isNaN(value)) return 'n/a'
  if (unit === 'ratio') return `${value.toFixed(2)}×`
  if (unit === 'ms') return ms(value)
  if (unit === 'fraction') return value.toFixed(3)
  return `${value >= 1e6 ? `${(value / 1e6).toFixed(2)} M` : `${(value / 1e3).toFixed(0)} k`}/s`
}

export function renderResults(r, analysis) {
  const m = r.machine
  const parts = []
  parts.push(`# sluice bench results${r.quick ? ' (--quick: a smoke check, not figures to quote)' : ''}

Generated by \`pnpm bench\` (\`node bench/main.mjs\`) in ${r.seconds.toFixed(0)} s. Every figure is the
median (min–max) of several runs (in-memory ${r.plan.memory.runs ?? r.plan.runs}, Redis ${r.plan.runs}, HTTP ${r.plan.http.rounds}, heap ${r.plan.heap.runs},
flood ${r.plan.flood.runs}), each in a fresh process; runs of different subjects alternate.
Do not edit by hand: the analysis at the end comes from bench/analysis.md.

| machine | |
|---|---|
| CPU | ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB |
| Node | ${m.node} |
| Redis | redis-server ${m.redis}, on loopback, started by the bench |
| sluice | ${m.packages['@sluice/core']} at ${m.commit} |
| load average (1, 5, 15 min) | start ${r.load.start.map((x) => x.toFixed(2)).join(', ')}; end ${r.load.end.map((x) => x.toFixed(2)).join(', ')} |

Peers: ${Object.entries(m.packages)
    .filter(([n]) => !n.startsWith('@sluice'))
    .map(([n, v]) => `${n} ${v}`)
    .join(', ')}.`)

  const g = goals(r)
  if (g.length > 0) {
    parts.push(`## Goals

${table(
  ['goal', 'target', 'measured (median)', 'met'],
  g.map(([what, target, value, met, unit]) => [
    what,
    target,
    goalValue(value, unit),
    typeof met === 'string' ? met : met ? 'yes' : '**no**',
  ]),
)}`)
  }

  const mem = r.sections.memory
  if (mem !== undefined) {
    const subjects = [...new Set(Object.keys(mem).map((k) => k.split('|')[0]))]
    const cell = (s, keys, mode, field = 'perCpuSecond') => spread(mem[`${s}|${keys}|${mode}`]?.[field])
    const columns = [
      [1, 'serial'],
      [1, 'batch'],
      [100000, 'serial'],
      [100000, 'batch'],
    ]
    const rows = subjects.map((s) => [
      nameOf(s, MEMORY_NAMES),
      ...columns.map(([k, mode]) => cell(s, k, mode)),
    ])
    const wallRows = subjects.map((s) => [
      nameOf(s, MEMORY_NAMES),
      ...columns.map(([k, mode]) => rate(med(mem[`${s}|${k}|${mode}`]?.perSecond))),
    ])
    const fw = (keys, mode) => med(mem[`sluice:fixedWindow|${keys}|${mode}`]?.perCpuSecond)
    const ratioRows = subjects
      .filter((s) => !s.startsWith('sluice:'))
      .map((s) => [
        `sluice fixedWindow / ${nameOf(s, MEMORY_NAMES)}`,
        ...[
          [1, 'serial'],
          [1, 'batch'],
          [100000, 'serial'],
          [100000, 'batch'],
        ].map(([k, mode]) => ratio(fw(k, mode), med(mem[`${s}|${k}|${mode}`]?.perCpuSecond))),
      ])
    parts.push(`## 1. In-memory decisions per second

Through each library's public async API: \`await limiter.consume(key)\` one at a time (serial), or 256
calls started back to back and awaited with \`Promise.all\` (256 in flight, what a busy server has; the
goals refer to this one). Keys cycle through 1 or 100,000 distinct strings. Limits are so high that
nothing is denied. Decisions per second of the process's CPU time (user + system, GC threads included):
on an idle machine that is the wall-clock rate; on this shared one it leaves out the time other
processes held the CPU. Wall-clock medians follow.

${table(['subject', '1 key, serial', '1 key, 256 in flight', '100 k keys, serial', '100 k keys, 256 in flight'], rows)}

${table(['ratio (medians)', '1 key, serial', '1 key, 256 in flight', '100 k keys, serial', '100 k keys, 256 in flight'], ratioRows)}

Wall-clock decisions per second (medians):

${table(['subject', '1 key, serial', '1 key, 256 in flight', '100 k keys, serial', '100 k keys, 256 in flight'], wallRows)}`)
  }

  const red = r.sections.redis
  if (red !== undefined) {
    const subjects = [...new Set(Object.keys(red).map((k) => k.split('|')[0]))]
    const rows = subjects.map((s) => {
      const algorithm = s.includes(':') ? s.split(':')[1] : 'fixedWindow'
      const ceiling = med(red[`ceiling:${algorithm}|throughput`]?.perSecond)
      const t = red[`${s}|throughput`]
      const l = red[`${s}|latency`]
      const us = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a')
      const cpu = cpuRatio(red, s, `ceiling:${algorithm}`)
      return [
        nameOf(s, REDIS_NAMES),
        spread(t?.perSecond),
        s.startsWith('ceiling:') ? '1.00×' : ratio(med(t?.perSecond), ceiling),
        cpu === undefined ? 'n/a' : `${cpu.toFixed(2)}×`,
        t === undefined ? 'n/a' : us(med(t.clientCpuUsPerCall)),
        t?.redisCpuUsPerCall === undefined ? 'n/a' : us(med(t.redisCpuUsPerCall)),
        t?.redisScriptUsPerRequest === undefined ? 'n/a' : med(t.redisScriptUsPerRequest).toFixed(2),
        spread(l?.p50Ms, ms),
        spread(l?.p99Ms, ms),
      ]
    })
    const peerRows = ['rlf', 'rlr']
      .filter((s) => red[`${s}|throughput`] !== undefined)
      .map((s) => [
        `sluice fixedWindow / ${nameOf(s, REDIS_NAMES)}`,
        ratio(med(red['sluice:fixedWindow|throughput']?.perSecond), med(red[`${s}|throughput`]?.perSecond)),
        ratio(pairedRatio(red[`${s}|latency`]?.p50Ms, red['sluice:fixedWindow|latency']?.p50Ms), 1),
      ])
    parts.push(`## 2. Redis decisions per second, one process

256 calls in flight (256 workers, each awaiting its call before sending the next), and latency with one
call in flight. ioredis clients with \`enableOfflineQueue: false, maxRetriesPerRequest: 1\` for every
subject. The ceiling for each algorithm is a raw EVALSHA through ioredis of a straight-line script doing
the same Redis work (bench/lib/ceiling-scripts.mjs). The peers have fixed windows only: compare them with
sluice's fixedWindow. 10,000 keys, Redis flushed before each run. CPU µs per call of the client process
and of redis-server (medians, at 256 in flight) say what each side spends whatever else the machine runs;
"by CPU per call" is the ceiling's client + Redis CPU per call over the subject's (above 1: cheaper).
"Redis script µs" is the time Redis spent inside scripts per call (\`INFO commandstats\`; a concurrency
request's is its decision and its share of a batched release): what bounds one Redis, whatever the
clients. Latency is read in pairs where a ceiling or a peer is measured: the subjects of an algorithm
share one process and take turns call by call, so a run's p50s saw the same machine; the latency ratios
are medians of run-by-run ratios.

${table(['subject', 'calls/s, 256 in flight', 'vs ceiling of its algorithm', 'vs ceiling, by CPU per call', 'client CPU µs/call', 'Redis CPU µs/call', 'Redis script µs/call', 'p50, 1 in flight', 'p99, 1 in flight'], rows)}

${table(['ratio (medians)', 'throughput', 'p50 latency (peer / sluice)'], peerRows)}`)
  }

  const http = r.sections.http
  if (http !== undefined) {
    const rows = []
    for (const framework of ['express', 'fastify']) {
      const peer = framework === 'express' ? 'express-rate-limit' : '@fastify/rate-limit'
      const names = {
        bare: `${framework}, bare`,
        noop: `${framework} + an empty ${framework === 'express' ? 'middleware' : 'onRequest hook'} (floor)`,
        'noop-headers': `${framework} + an empty ${framework === 'express' ? 'middleware' : 'hook'} setting the two headers (floor)`,
        'noop-ip-headers': `${framework} + the same reading ${framework === 'express' ? 'req.ip' : 'request.ip'}, the remaining count new per response (floor)`,
        'sluice-memory': `${framework} + sluice, memory`,
        'peer-memory': `${framework} + ${peer}, memory`,
        'sluice-redis': `${framework} + sluice, Redis`,
        'sluice-redis-node': `${framework} + sluice, Redis on a node-redis client`,
        'peer-redis': `${framework} + ${peer}, Redis${framework === 'express' ? ' (rate-limit-redis)' : ''}`,
      }
      for (const [variant, name] of Object.entries(names)) {
        const s = http[`${framework}|${variant}`]
        if (s === undefined) continue
        const bare = http[`${framework}|bare`]
        rows.push([
          name,
          spread(s.perSecond),
          times(pairedRatio(s.perSecond, bare?.perSecond)),
          spread(s.serverCpuUsPerRequest, (x) => x.toFixed(1)),
          times(pairedRatio(bare?.serverCpuUsPerRequest, s.serverCpuUsPerRequest)),
          spread(s.p99Ms, (x) => `${x} ms`),
        ])
      }
    }
    parts.push(`## 3. HTTP requests per second

autocannon (64 connections, keep-alive) against a server in a process of its own on loopback, GET / answering
a small JSON body; runs of a framework's servers alternate. Three floors stand beside bare: an
empty middleware (Express) or \`onRequest\` hook (Fastify), the least any limiter adds; the same setting
the two draft-11 headers sluice sends, the least a limiter sending them adds; and the same reading the
client address as sluice's \`'ip'\` key must (\`req.ip\`, \`request.ip\`) and sending a remaining count
that is new on each response, as a limiter's is: the least an IP-keyed limiter with those headers adds.
Every limiter keys by client IP with its default headers; limits are so high
that nothing is denied (a non-2xx fails the run). sluice's Redis store runs on ioredis, the client
@fastify/rate-limit takes, and for Fastify on node-redis as well. On 2 cores the load generator, the
server and (for Redis) redis-server share the CPUs. The server's CPU µs per request (from /proc) is what the server
spends whatever else runs; "bare / this" is its inverse ratio, the req/s ratio a server-bound run on an
idle machine would show. Both ratio columns are medians of run-by-run ratios: each run is set against
bare's run of the same round, seconds apart, so a spell of a slower machine moves both sides alike.

${table(['server', 'req/s', 'vs bare', 'server CPU µs/request', 'bare / this (CPU)', 'p99 latency'], rows)}`)
  }

  const heap = r.sections.heap
  if (heap !== undefined) {
    const base = med(heap['sluice:fixedWindow']?.bytesPerKey)
    const rows = Object.entries(heap).map(([s, v]) => [
      nameOf(s, MEMORY_NAMES),
      spread(v.bytesPerKey, bytes),
      s === 'sluice:fixedWindow' ? '' : ratio(base, med(v.bytesPerKey)),
    ])
    parts.push(`## 4. Heap per key

\`process.memoryUsage().heapUsed\` after a full GC, before and after ${r.plan.heap.keys.toLocaleString('en')} distinct
keys were counted once each, divided by the keys (the key strings themselves included, ~32 B each).

${table(['store', 'bytes per key', 'sluice fixedWindow / this'], rows)}`)
  }

  const flood = r.sections.flood
  if (flood !== undefined) {
    const rows = Object.entries(flood).map(([s, v]) => [
      FLOOD_NAMES[s] ?? s,
      spread(v.commandsPerDenied, perDenied),
      spread(v.roundTripsPerDenied, perDenied),
    ])
    parts.push(`## 5. A flood from one key against Redis

${r.plan.flood.calls.toLocaleString('en')} calls on one key, 256 in flight, limit 10 per minute: all but 10 are denied. Redis
commands (\`INFO commandstats\` deltas, commands run inside scripts included) and script calls (round
trips) per denied call.

${table(['store', 'Redis commands per denied call', 'round trips per denied call'], rows)}`)
  }

  const pre = r.sections.prefetch
  if (pre !== undefined) parts.push(prefetchSection(r, pre))

  if (analysis) parts.push(analysis.trim())
  return `${parts.join('\n\n')}\n`
}

const PREFETCH_NAMES = {
  bare: 'fastify, bare',
  'sluice-memory': 'fastify + sluice, memory',
  'sluice-redis': 'fastify + sluice, Redis',
  'sluice-redis-prefetch': 'fastify + sluice, Redis with prefetch',
  'peer-redis': 'fastify + @fastify/rate-limit, Redis',
}

function prefetchSection(r, pre) {
  const plan = r.plan.prefetch
  const bare = pre['fastify|bare']
  const memory = pre['fastify|sluice-memory']
  const httpRows = []
  for (const [variant, name] of Object.entries(PREFETCH_NAMES)) {
    const s = pre[`fastify|${variant}`]
    if (s === undefined) continue
    httpRows.push([
      name,
      spread(s.perSecond),
      times(pairedRatio(s.perSecond, bare?.perSecond)),
      times(pairedRatio(s.perSecond, memory?.perSecond)),
      spread(s.serverCpuUsPerRequest, (x) => x.toFixed(1)),
      times(pairedRatio(memory?.serverCpuUsPerRequest, s.serverCpuUsPerRequest)),
      s.roundTripsPerAdmitted === undefined ? '' : spread(s.roundTripsPerAdmitted, perDenied),
      s.inCallShare === undefined ? '' : spread(s.inCallShare, (x) => `${(x * 100).toFixed(0)} %`),
    ])
  }
  const o = (algorithm) => pre[`overshoot|${algorithm}`]
  const int = (x) => Math.round(x).toLocaleString('en')
  const pct = (x) => `${(x * 100).toFixed(0)} %`
  const overRows = ['slidingLog', 'fixedWindow']
    .filter((a) => o(a) !== undefined)
    .map((a) => {
      const v = o(a)
      return [
        a,
        spread(v.overshoot, int),
        spread(v.bound, int),
        spread(v.worstOverBound, int),
        v.spansOverBound === undefined
          ? spread(v.windowsOverLimit, int)
          : `${spread(v.spansOverBound, int)} of ${int(med(v.spans))}`,
        spread(v.admitted, int),
        v.countedInRedis === undefined ? 'n/a' : spread(v.countedInRedis, int),
        spread(v.allowed, int),
        spread(v.localShare, pct),
        spread(v.scriptsPerAdmitted, perDenied),
        spread(v.clockUncertaintyMs, (x) => `${x.toFixed(2)} ms`),
      ]
    })
  const log = o('slidingLog')
  // Each admitted fetch logs one entry: fewer seen than Redis decided means some went unseen.
  const check =
    log === undefined || log.entriesSeen.values.every((x, i) => x === log.decided.values[i])
      ? ''
      : `\n\nslidingLog: log entries seen ${spread(log.entriesSeen, int)} against admissions Redis decided ${spread(log.decided, int)}: some admissions were not timed.`
  const { units, ms: spendMs } = plan.prefetch
  const ov = plan.overshoot
  const n = (x) => x.toLocaleString('en')
  return `## 6. Prefetch from Redis

A RedisStore with \`prefetch: { units: ${units}, ms: ${spendMs} }\` (\`true\`: the defaults; batches of up to ${units} units,
spent locally for up to ${spendMs} ms), far from its limit and at it.

Far from the limit: Fastify servers as in section 3 (autocannon, 64 connections, one client IP: one key
at a limit nothing reaches), ${plan.rounds} round${plan.rounds === 1 ? '' : 's'} of ${plan.measureS} s each, runs alternating.
"vs memory" sets each server's run against sluice memory's of the same round; "memory / this (CPU)" is
sluice memory's server CPU per request over this server's. Round trips per request: the script calls
Redis ran during the prefetch server's run (\`CONFIG RESETSTAT\` before, \`INFO commandstats\` EVALSHA + EVAL
read ${spendMs + 50} ms after the run, so its last give-backs count) over the requests it answered.
"Decided in the call": the share of the store's answers given synchronously, from units already in
the process (the hook then goes on in the same tick, as on a memory store); the rest were promised: a
round trip, or a wait for the fetch in flight to bring units.

${table(['server', 'req/s', 'vs bare', 'vs sluice memory', 'server CPU µs/request', 'memory / this (CPU)', 'Redis round trips per request', 'decided in the call'], httpRows)}

At the limit: the overshoot, measured (bench/cases/prefetch-overshoot.mjs), ${ov.runs} run${ov.runs === 1 ? '' : 's'} each. ${ov.processes} processes,
each with ${ov.inFlight} calls in flight, on one key with prefetch, limit ${n(ov.limit)} per ${n(ov.windowMs)} ms, for ${ov.seconds} s; a denied call
sleeps its \`retryAfterMs\` and asks again. Every admission is timed in Redis time: a unit spent from
prefetched units by its worker's clock, converted with the upper bound of the offset to Redis's (Redis
\`TIME\` sampled every 50 ms with its round trip timed; never early; "clock" is the widest bracket of the
offset); an admission Redis decided (a fetch's leader) by Redis itself, which a busy worker may learn of
much later: slidingLog by its entry's score in the log, fixedWindow by its answer's \`resetMs\`.
slidingLog: every span of ${n(ov.windowMs)} ms starting at an admission is swept; the overshoot is the most admitted in
a span minus the limit, the bound the units Redis counted in the ${spendMs} ms before that span (read from the
log's sorted set, snapshotted every ${n(ov.windowMs / 4)} ms; units given back are not counted), "over bound"
the most any span's overshoot passed its own bound (at most 0: the promise held). fixedWindow: admitted
per window of Redis time; the bound is 0. "allowed" is the most exact decisions admit over the run's span
(the limit times the windows it touches); "counted in Redis", the units the log holds for the run, net of
give-backs (units counted and neither spent nor given back make up the difference with "admitted").
A measurement, not a test: the test suite asserts the bound.

${table(['rule', 'overshoot (max)', 'bound at that span', 'over bound (max)', 'spans (windows) over their bound', 'admitted', 'counted in Redis', 'allowed', 'from prefetched units', 'round trips per admitted', 'clock'], overRows)}${check}`
}
