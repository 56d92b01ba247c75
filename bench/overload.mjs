#!/usr/bin/env node
/**
 * @module The overload section: what a server keeps of its capacity and its latency when offered more than
 * it can serve. `node bench/overload.mjs [--quick] [--seconds S]`; writes bench/OVERLOAD.md (the quick mode
 * bench/OVERLOAD.quick.md, not committed).
 *
 * A Fastify server whose handler burns `BURN_MS` of CPU per request (cases/overload-server.mjs) is measured
 * first: its capacity (requests/s that 8 keep-alive connections get from it, closed loop) and its unloaded
 * latency (open loop at a quarter of that). Then each subject (no protection, @fastify/under-pressure at its
 * README's settings, sluice's `overload`) runs in a fresh process at 1×, 2× and 4× the capacity, driven by
 * an open-loop generator: requests leave at a fixed arrival rate whatever the server does (a closed loop
 * would slow down with the server and hide the overload), and each request's latency is counted from the
 * moment it was due to leave, so a queue in the client counts too. One request in `CRITICAL_EVERY` carries
 * `x-critical: 1` (critical to sluice's guard; the others ignore it). A client waits `TIMEOUT_MS` at most.
 *
 * Reported per subject and multiple: goodput (2xx answered within the timeout, per second of the run),
 * p50/p99 latency of the 2xx, the same p99 over the run's first and second halves (a queue that grows shows
 * there), the share shed (503), timeouts and errors, and critical requests' success rate.
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
const SUBJECTS = option('subjects', 'none,under-pressure,sluice').split(',')
const CRITICAL_EVERY = 20
const TIMEOUT_MS = 2000
const serverScript = fileURLToPath(new URL('./cases/overload-server.mjs', import.meta.url))
const outFile = fileURLToPath(
  new URL(`./OVERLOAD${SYNC ? '.sync' : ''}${quick ? '.quick' : ''}.md`, import.meta.url),
)

/** Starts a server of the section; resolves with `{ port, stop() }` once it listens. */
function startServer(variant) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [serverScript, JSON.stringify({ variant, burnMs: BURN_MS, sync: SYNC })],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: process.env,
      },
    )
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-4000)
    })
    child.once('exit', (code) => reject(new Error(`server ${variant} exited (${code}):\n${err}`)))
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

/**
 * Sends `rate` requests per second for `seconds`, open loop: the i-th request is due at start + i / rate,
 * and leaves then however many are still unanswered. Resolves when every request has been answered, has
 * failed, or has waited `TIMEOUT_MS`.
 */
function openLoop(port, rate, seconds) {
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
      const critical = i % CRITICAL_EVERY === 0
      const record = (status) => {
        outcomes.push({ due: due - start, status, ms: performance.now() - due, critical })
        finish()
      }
      const req = http.request(
        { agent, host: '127.0.0.1', port, path: '/', headers: critical ? { 'x-critical': '1' } : {} },
        (res) => {
          res.resume()
          res.once('end', () => record(res.statusCode))
          res.once('error', () => record('error'))
        },
      )
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
    timeouts: outcomes.filter((o) => o.status === 'timeout').length,
    errors: outcomes.filter(
      (o) => o.status === 'error' || (typeof o.status === 'number' && o.status >= 300 && o.status !== 503),
    ).length,
    critical: critical.filter((o) => o.status >= 200 && o.status < 300).length / critical.length,
  }
}

snapshot()
const loadStart = loadavg()
console.log(
  `overload section: burn ${BURN_MS} ms, ${SECONDS} s per run, load average ${loadStart.map((l) => l.toFixed(2)).join(' ')}`,
)

// Capacity, closed loop, and the unloaded latency, open loop at a quarter of it.
const base = await startServer('none')
await autocannon({ url: `http://127.0.0.1:${base.port}/`, connections: 8, duration: WARM_SECONDS })
const closed = await autocannon({ url: `http://127.0.0.1:${base.port}/`, connections: 8, duration: SECONDS })
const capacity = closed.requests.total / closed.duration
const unloaded = summarize(await openLoop(base.port, capacity / 4, SECONDS))
await base.stop()
console.log(
  `capacity ${capacity.toFixed(0)} req/s; unloaded p50 ${unloaded.p50.toFixed(2)} ms, p99 ${unloaded.p99.toFixed(2)} ms`,
)

const rows = []
for (const multiple of MULTIPLES) {
  for (const subject of SUBJECTS) {
    const server = await startServer(subject)
    // Warm: the JIT, and for sluice's guard some evidence of what the server sustains.
    await openLoop(server.port, capacity / 2, WARM_SECONDS)
    const r = summarize(await openLoop(server.port, capacity * multiple, SECONDS))
    await server.stop()
    rows.push({ subject, multiple, ...r })
    console.log(
      `${subject} ${multiple}×: goodput ${r.goodput.toFixed(0)}/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms ` +
        `(${r.p99First.toFixed(1)} → ${r.p99Second.toFixed(1)}), shed ${(r.shed * 100).toFixed(1)} %, ` +
        `timeouts ${r.timeouts}, errors ${r.errors}, critical ${(r.critical * 100).toFixed(1)} %`,
    )
  }
}
const loadEnd = loadavg()

const f = (n, digits = 1) => (Number.isNaN(n) ? '–' : n.toFixed(digits))
const lines = [
  '# Overload',
  '',
  `Written by \`node bench/overload.mjs${quick ? ' --quick' : ''}\` on ${new Date().toISOString().slice(0, 16)}Z;`,
  `node ${process.version}, ${cpus().length} cores; load average ${loadStart.map((l) => l.toFixed(2)).join(' ')} at the start,`,
  `${loadEnd.map((l) => l.toFixed(2)).join(' ')} at the end. Handler: ${SYNC ? 'never yields, then' : 'yields once, then'} ${BURN_MS} ms of CPU per request. ${SECONDS} s per run,`,
  `open loop (fixed arrival rate), client timeout ${TIMEOUT_MS} ms, one request in ${CRITICAL_EVERY} critical.`,
  '',
  `Capacity (closed loop, 8 connections): **${f(capacity, 0)} req/s**. Unloaded (open loop at ¼ of it):`,
  `p50 ${f(unloaded.p50, 2)} ms, **p99 ${f(unloaded.p99, 2)} ms**.`,
  '',
  '| subject | offered | goodput (2xx/s) | vs 1× | p50 ms | p99 ms | p99 vs unloaded | p99 1st → 2nd half | shed | timeouts | errors | critical ok |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|',
]
for (const r of rows) {
  const one = rows.find((o) => o.subject === r.subject && o.multiple === 1)
  lines.push(
    `| ${r.subject} | ${r.multiple}× (${f(r.offered, 0)}/s) | ${f(r.goodput, 0)} | ${f(r.goodput / one.goodput, 2)}× | ${f(r.p50)} | ${f(r.p99)} | ` +
      `${f(r.p99 / unloaded.p99, 1)}× | ${f(r.p99First)} → ${f(r.p99Second)} | ${f(r.shed * 100)} % | ${r.timeouts} | ${r.errors} | ${f(r.critical * 100)} % |`,
  )
}
const sluice4 = rows.find((r) => r.subject === 'sluice' && r.multiple === 4)
const sluice1 = rows.find((r) => r.subject === 'sluice' && r.multiple === 1)
lines.push(
  '',
  'Goals (sluice at 4×):',
  `- goodput ≥ 0.9× its 1× goodput: ${f(sluice4.goodput / sluice1.goodput, 2)}× (${sluice4.goodput / sluice1.goodput >= 0.9 ? 'met' : 'not met'})`,
  `- admitted p99 ≤ 5× the unloaded p99: ${f(sluice4.p99 / unloaded.p99, 1)}× (${sluice4.p99 <= 5 * unloaded.p99 ? 'met' : 'not met'})`,
  `  (over the run's second half, once the step in load is behind it: ${f(sluice4.p99Second / unloaded.p99, 1)}×)`,
  `- critical requests ≥ 99 % success: ${f(sluice4.critical * 100)} % (${sluice4.critical >= 0.99 ? 'met' : 'not met'})`,
  '',
)
writeFileSync(outFile, lines.join('\n'))
console.log(`\n${lines.join('\n')}`)
