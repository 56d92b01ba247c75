#!/usr/bin/env node
/**
 * @module The overload section: what a server keeps of its capacity and its latency when offered more than
 * it can serve. `node bench/overload.mjs [--quick] [--seconds S] [--before DIR]`; writes bench/OVERLOAD.md
 * (the quick mode bench/OVERLOAD.quick.md, not committed). `--before DIR` adds sluice as an older build runs
 * it (DIR a snapshot of that build, lib/snapshot.mjs), beside the current one in the same run.
 *
 * Three scenarios, each subject in a fresh process (cases/overload-server.mjs), driven by an open-loop
 * generator: requests leave at a fixed arrival rate whatever the server does (a closed loop would slow down
 * with the server and hide the overload), and each request's latency is counted from the moment it was due
 * to leave, so a queue in the client counts too. A client waits `TIMEOUT_MS` at most.
 * - cpu: a handler that burns `BURN_MS` of CPU per request, measured first (its capacity: requests/s that 8
 *   keep-alive connections get, closed loop; its unloaded latency: open loop at a quarter of that), then at
 *   1×, 2× and 4×, with no protection, @fastify/under-pressure at its README's settings, and sluice's guard.
 *   One request in `CRITICAL_EVERY` carries `x-critical: 1` (critical to the guard; the others ignore it).
 * - slow dependency: a handler that waits on a pool of `POOL_SIZE` connections held 50–200 ms each, its
 *   event loop idle; measured the same way (64 connections for the capacity), then at 1× and 3×.
 * - attacker: the cpu handler with a per-client limit (`CLIENT_LIMIT` a second, by token), users at
 *   `USERS_LOAD`× the capacity, real payments (payers' tokens, `/pay`) at 1/20 of it, and one paying client
 *   sending `ATTACKER_LOAD`× the capacity at `/pay`: no guard (the per-client limit alone) and sluice's guard.
 *
 * Reported per subject and load: goodput (2xx answered within the timeout, per second of the run), p50/p99
 * latency of the 2xx, the same p99 over the run's first and second halves (a queue that grows shows there),
 * the share shed (503), timeouts and errors, and critical requests' success rate.
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import { createRequire } from 'node:module'
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { flag, numberOption, option } from './lib/options.mjs'
import { snapshot } from './lib/snapshot.mjs'

const require = createRequire(import.meta.url)
const autocannon = require('autocannon')

const quick = flag('quick')
const BURN_MS = 1.5
/** `--sync`: a handler that never yields (see cases/overload-server.mjs). */
const SYNC = flag('sync')
const SECONDS = numberOption('seconds', quick ? 3 : 10)
const WARM_SECONDS = quick ? 1 : 2
const MULTIPLES = [1, 2, 4]
const POOL_MULTIPLES = [1, 3]
const BEFORE = option('before', undefined)
const SUBJECTS = option(
  'subjects',
  `none,under-pressure,${BEFORE === undefined ? '' : 'sluice-before,'}sluice`,
)
  .split(',')
  .filter((s) => s !== '')
const CRITICAL_EVERY = 20
const TIMEOUT_MS = 2000
const POOL_SIZE = 16
const CLIENT_LIMIT = 20
const USERS = 500
const PAYERS = 50
const USERS_LOAD = 2
const ATTACKER_LOAD = 2.4
const serverScript = fileURLToPath(new URL('./cases/overload-server.mjs', import.meta.url))
const outFile = fileURLToPath(
  new URL(`./OVERLOAD${SYNC ? '.sync' : ''}${quick ? '.quick' : ''}.md`, import.meta.url),
)

/** The server of a subject: sluice-before is sluice's guard as the older build runs it. */
function serverOf(subject, params) {
  const before = subject === 'sluice-before'
  const variant = before ? 'sluice' : subject
  const env = before ? { ...process.env, SLUICE_BENCH_SNAPSHOT: BEFORE } : process.env
  return startServer({ variant, burnMs: BURN_MS, sync: SYNC, poolSize: POOL_SIZE, ...params }, env)
}

/** Starts a server of the section; resolves with `{ port, stop() }` once it listens. */
function startServer(params, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [serverScript, JSON.stringify(params)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    })
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-4000)
    })
    child.once('exit', (code) => reject(new Error(`server ${params.variant} exited (${code}):\n${err}`)))
    child.stdout.on('data', (c) => {
      const m = /READY (\d+)/.exec(String(c))
      if (m === null) return
      resolve({
        port: Number(m[1]),
        stop() {
          child.removeAllListeners('exit')
          return new Promise((done) => {
            child.once('exit', done)
            child.kill('SIGTERM')
            setTimeout(() => child.kill('SIGKILL'), 3000).unref()
          })
        },
      })
    })
  })
}

/** The cpu scenario's requests: one in `CRITICAL_EVERY` critical. */
const cpuRequest = (i) =>
  i % CRITICAL_EVERY === 0
    ? { path: '/', headers: { 'x-critical': '1' }, critical: true }
    : { path: '/', headers: {}, critical: false }

/**
 * Sends `rate` requests per second for `seconds`, open loop: the i-th request (`requestOf(i)`: its path,
 * headers, and whether it counts as critical) is due at start + i / rate, and leaves then however many are
 * still unanswered. Resolves when every request has been answered, has failed, or has waited `TIMEOUT_MS`.
 */
function openLoop(port, rate, seconds, requestOf = cpuRequest) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 })
  const total = Math.round(rate * seconds)
  const outcomes = []
  let sent = 0
  let settled = 0
  const start = performance.now()
  return new Promise((resolve) => {
    const finish = () => {
      if (++settled === total) {
        agent.destroy()
        resolve({ outcomes, seconds })
      }
    }
    const fire = (i) => {
      const due = start + (i * 1000) / rate
      const { path, headers, critical } = requestOf(i)
      const record = (status) => {
        outcomes.push({ due: due - start, status, ms: performance.now() - due, critical })
        finish()
      }
      const req = http.request({ agent, host: '127.0.0.1', port, path, headers }, (res) => {
        res.resume()
        res.once('end', () => record(res.statusCode))
        res.once('error', () => record('error'))
      })
      // Patience runs from when the request was due, not from when a socket took it.
      const timer = setTimeout(
        () => req.destroy(new Error('timeout')),
        Math.max(1, due + TIMEOUT_MS - performance.now()),
      )
      req.once('close', () => clearTimeout(timer))
      req.once('error', (error) => record(error.message === 'timeout' ? 'timeout' : 'error'))
      req.end()
    }
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1)
      while (sent < due) fire(sent++)
      if (sent < total) setTimeout(tick, 1)
    }
    tick()
  })
}

function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((q / 100) * sorted.length) - 1)]
}

function summarize({ outcomes, seconds }) {
  const ok = outcomes.filter((o) => o.status >= 200 && o.status < 300)
  const ms = (list) => list.map((o) => o.ms).sort((a, b) => a - b)
  const half = (seconds * 1000) / 2
  const critical = outcomes.filter((o) => o.critical)
  return {
    offered: outcomes.length / seconds,
    goodput: ok.length / seconds,
    p50: percentile(ms(ok), 50),
    p99: percentile(ms(ok), 99),
    p99First: percentile(ms(ok.filter((o) => o.due < half)), 99),
    p99Second: percentile(ms(ok.filter((o) => o.due >= half)), 99),
    shed: outcomes.filter((o) => o.status === 503).length / outcomes.length,
    limited: outcomes.filter((o) => o.status === 429).length / outcomes.length,
    timeouts: outcomes.filter((o) => o.status === 'timeout').length,
    errors: outcomes.filter(
      (o) =>
        o.status === 'error' ||
        (typeof o.status === 'number' && o.status >= 300 && o.status !== 503 && o.status !== 429),
    ).length,
    critical:
      critical.length === 0
        ? Number.NaN
        : critical.filter((o) => o.status >= 200 && o.status < 300).length / critical.length,
  }
}

snapshot()
const loadStart = loadavg()
console.log(
  `overload section: ${SECONDS} s per run, subjects ${SUBJECTS.join(', ')}, load average ${loadStart.map((l) => l.toFixed(2)).join(' ')}`,
)

/** Capacity, closed loop with `connections`, and the unloaded latency, open loop at a quarter of it. */
async function baseline(params, connections) {
  const base = await serverOf('none', params)
  const url = `http://127.0.0.1:${base.port}/`
  await autocannon({ url, connections, duration: WARM_SECONDS })
  const closed = await autocannon({ url, connections, duration: SECONDS })
  const capacity = closed.requests.total / closed.duration
  const unloaded = summarize(await openLoop(base.port, capacity / 4, SECONDS))
  await base.stop()
  console.log(
    `${params.handler}: capacity ${capacity.toFixed(0)} req/s; unloaded p50 ${unloaded.p50.toFixed(2)} ms, p99 ${unloaded.p99.toFixed(2)} ms`,
  )
  return { capacity, unloaded }
}

/** Each subject at each multiple of `capacity`, after a warm-up at half of it. */
async function scenario(name, params, subjects, multiples, capacity) {
  const rows = []
  for (const multiple of multiples) {
    for (const subject of subjects) {
      const server = await serverOf(subject, params)
      // Warm: the JIT, and for sluice's guard some evidence of what the server sustains.
      await openLoop(server.port, capacity / 2, WARM_SECONDS)
      const r = summarize(await openLoop(server.port, capacity * multiple, SECONDS))
      await server.stop()
      rows.push({ subject, multiple, ...r })
      console.log(
        `${name} ${subject} ${multiple}×: goodput ${r.goodput.toFixed(0)}/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms ` +
          `(${r.p99First.toFixed(1)} → ${r.p99Second.toFixed(1)}), shed ${(r.shed * 100).toFixed(1)} %, ` +
          `timeouts ${r.timeouts}, errors ${r.errors}, critical ${(r.critical * 100).toFixed(1)} %`,
      )
    }
  }
  return rows
}

const cpu = await baseline({ handler: 'cpu' }, 8)
const cpuRows = await scenario('cpu', { handler: 'cpu' }, SUBJECTS, MULTIPLES, cpu.capacity)

const poolSubjects = SUBJECTS.filter((s) => s !== 'under-pressure')
const pool = await baseline({ handler: 'pool' }, 64)
const poolRows = await scenario(
  'slow dependency',
  { handler: 'pool' },
  poolSubjects,
  POOL_MULTIPLES,
  pool.capacity,
)

/**
 * The attacker: users, real payments and the attacker at once, each its own open loop, against one server
 * with the per-client limit (`none`: without the guard); the attacker floods at `ATTACKER_LOAD`× the capacity,
 * or stays within its own limit (at 0.9 of it).
 */
const attackerRows = []
for (const attackRate of [cpu.capacity * ATTACKER_LOAD, CLIENT_LIMIT * 0.9]) {
  for (const subject of poolSubjects) {
    const params = { handler: 'cpu', clients: true, clientLimit: CLIENT_LIMIT }
    const server = await serverOf(subject, params)
    const user = (i) => ({ path: '/', headers: { authorization: `user-${i % USERS}` }, critical: false })
    const payer = (i) => ({ path: '/pay', headers: { authorization: `payer-${i % PAYERS}` }, critical: true })
    const attacker = () => ({ path: '/pay', headers: { authorization: 'mallory' }, critical: true })
    await openLoop(server.port, cpu.capacity / 2, WARM_SECONDS, user)
    const [users, payers, attack] = await Promise.all([
      openLoop(server.port, cpu.capacity * USERS_LOAD, SECONDS, user),
      openLoop(server.port, cpu.capacity / 20, SECONDS, payer),
      openLoop(server.port, attackRate, SECONDS, attacker),
    ])
    await server.stop()
    const within = attackRate <= CLIENT_LIMIT
    const row = {
      subject,
      within,
      users: summarize(users),
      payers: summarize(payers),
      attacker: summarize(attack),
    }
    attackerRows.push(row)
    console.log(
      `attacker (${within ? 'within its limit' : 'flooding'}) ${subject}: payments answered ${(row.payers.critical * 100).toFixed(1)} %, ` +
        `users' goodput ${row.users.goodput.toFixed(0)}/s, attacker: ${(row.attacker.limited * 100).toFixed(1)} % 429, ` +
        `${(row.attacker.shed * 100).toFixed(1)} % 503, ${row.attacker.goodput.toFixed(0)}/s served`,
    )
  }
}
const loadEnd = loadavg()

const f = (n, digits = 1) => (Number.isNaN(n) ? '–' : n.toFixed(digits))
const met = (ok) => (ok ? 'met' : 'not met')
const label = (subject) => (subject === 'sluice-before' ? 'sluice, before' : subject)

/** A scenario's table: one row per subject and load. */
function table(rows, unloaded) {
  const lines = [
    '| subject | offered | goodput (2xx/s) | vs 1× | p50 ms | p99 ms | p99 vs unloaded | p99 1st → 2nd half | shed | timeouts | errors | critical ok |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const r of rows) {
    const one = rows.find((o) => o.subject === r.subject && o.multiple === 1)
    lines.push(
      `| ${label(r.subject)} | ${r.multiple}× (${f(r.offered, 0)}/s) | ${f(r.goodput, 0)} | ${f(r.goodput / one.goodput, 2)}× | ${f(r.p50)} | ${f(r.p99)} | ` +
        `${f(r.p99 / unloaded.p99, 1)}× | ${f(r.p99First)} → ${f(r.p99Second)} | ${f(r.shed * 100)} % | ${r.timeouts} | ${r.errors} | ${f(r.critical * 100)} % |`,
    )
  }
  return lines
}

const lines = [
  '# Overload',
  '',
  `Written by \`node bench/overload.mjs${quick ? ' --quick' : ''}${BEFORE === undefined ? '' : ' --before DIR'}\` on ${new Date().toISOString().slice(0, 16)}Z;`,
  `node ${process.version}, ${cpus().length} cores; load average ${loadStart.map((l) => l.toFixed(2)).join(' ')} at the start,`,
  `${loadEnd.map((l) => l.toFixed(2)).join(' ')} at the end. ${SECONDS} s per run, open loop (fixed arrival rate), client`,
  `timeout ${TIMEOUT_MS} ms. sluice's guard: \`{ maxEventLoopDelayMs: 20, maxUtilization: 0.9, buckets: 50, criticalHeadroom: 3 }\`.`,
  ...(BEFORE === undefined
    ? []
    : [
        '"sluice, before" is the same guard as the older build given by `--before` runs it, in the same run.',
      ]),
  '',
  '## A handler that computes',
  '',
  `Handler: ${SYNC ? 'never yields, then' : 'yields once, then'} ${BURN_MS} ms of CPU per request; one request in ${CRITICAL_EVERY} critical.`,
  `Capacity (closed loop, 8 connections): **${f(cpu.capacity, 0)} req/s**. Unloaded (open loop at ¼ of it):`,
  `p50 ${f(cpu.unloaded.p50, 2)} ms, **p99 ${f(cpu.unloaded.p99, 2)} ms**.`,
  '',
  ...table(cpuRows, cpu.unloaded),
  '',
]
const sluice4 = cpuRows.find((r) => r.subject === 'sluice' && r.multiple === 4)
const sluice1 = cpuRows.find((r) => r.subject === 'sluice' && r.multiple === 1)
if (sluice4 !== undefined && sluice1 !== undefined) {
  lines.push(
    'Goals (sluice at 4×):',
    `- goodput ≥ 0.9× its 1× goodput: ${f(sluice4.goodput / sluice1.goodput, 2)}× (${met(sluice4.goodput / sluice1.goodput >= 0.9)})`,
    `- admitted p99 ≤ 5× the unloaded p99: ${f(sluice4.p99 / cpu.unloaded.p99, 1)}× (${met(sluice4.p99 <= 5 * cpu.unloaded.p99)})`,
    `  (over the run's second half, once the step in load is behind it: ${f(sluice4.p99Second / cpu.unloaded.p99, 1)}×)`,
    `- critical requests ≥ 99 % success: ${f(sluice4.critical * 100)} % (${met(sluice4.critical >= 0.99)})`,
    '',
  )
}
lines.push(
  '## A slow dependency',
  '',
  `Handler: waits for one of ${POOL_SIZE} connections to a dependency that holds each 50–200 ms (uniform); the event`,
  `loop stays idle. Capacity (closed loop, 64 connections): **${f(pool.capacity, 0)} req/s**. Unloaded (open loop`,
  `at ¼ of it): p50 ${f(pool.unloaded.p50, 1)} ms, **p99 ${f(pool.unloaded.p99, 1)} ms**.`,
  '',
  ...table(poolRows, pool.unloaded),
  '',
)
const pool3 = poolRows.find((r) => r.subject === 'sluice' && r.multiple === 3)
if (pool3 !== undefined) {
  lines.push(
    'Goals (sluice at 3×):',
    `- goodput ≥ 0.8× the capacity: ${f(pool3.goodput / pool.capacity, 2)}× (${met(pool3.goodput >= 0.8 * pool.capacity)})`,
    `- admitted p99 ≤ 5× the unloaded p99: ${f(pool3.p99 / pool.unloaded.p99, 1)}× (${met(pool3.p99 <= 5 * pool.unloaded.p99)})`,
    '',
  )
}
lines.push(
  '## An attacker at the critical path',
  '',
  `The cpu handler, each client limited to ${CLIENT_LIMIT} requests a second (by its token). Users (${USERS} tokens) at`,
  `${USERS_LOAD}× the capacity on \`/\`; real payments (${PAYERS} payers' tokens) at 1/20 of it on \`/pay\`; one paying`,
  `client, the attacker, on \`/pay\`: flooding at ${ATTACKER_LOAD}× the capacity, or within its own limit (${f(CLIENT_LIMIT * 0.9, 0)}/s).`,
  'Critical to the guard: `/pay` with a payer\'s token. "none" is the per-client limit without the guard.',
  '',
  "| attacker | subject | real payments answered | their p99 ms | users' goodput (2xx/s) | users' p99 ms | attacker: 429 | attacker: 503 | attacker served/s | timeouts |",
  '|---|---|---|---|---|---|---|---|---|---|',
)
for (const r of attackerRows) {
  lines.push(
    `| ${r.within ? 'within its limit' : 'flooding'} | ${label(r.subject)} | ${f(r.payers.critical * 100)} % | ${f(r.payers.p99)} | ${f(r.users.goodput, 0)} | ${f(r.users.p99)} | ` +
      `${f(r.attacker.limited * 100)} % | ${f(r.attacker.shed * 100)} % | ${f(r.attacker.goodput, 0)} | ${r.users.timeouts + r.payers.timeouts + r.attacker.timeouts} |`,
  )
}
const attackedRow = (subject, within) =>
  attackerRows.find((r) => r.subject === subject && r.within === within)
const flooded = attackedRow('sluice', false)
const unguarded = attackedRow('none', false)
const calm = attackedRow('sluice', true)
if (flooded !== undefined && unguarded !== undefined && calm !== undefined) {
  lines.push(
    '',
    'Goals (sluice):',
    `- real payments answered, the attacker flooding, ≥ without the guard: ${f(flooded.payers.critical * 100)} % against ${f(unguarded.payers.critical * 100)} % (${met(flooded.payers.critical >= unguarded.payers.critical)})`,
    `- real payments answered, the attacker within its own limit, ≥ 95 %: ${f(calm.payers.critical * 100)} % (${met(calm.payers.critical >= 0.95)})`,
  )
}
lines.push('')
writeFileSync(outFile, lines.join('\n'))
console.log(`\n${lines.join('\n')}`)
