/**
 * @module The runtimes bench, short and in one run: Hono on Node bare, + sluice (`@sluice/hono`), and
 * + hono-rate-limiter (its MemoryStore); Bun.serve bare and + sluice (`@sluice/fetch`). Each subject is a
 * server process of its own; autocannon loads it from this process (10 connections, DURATION s, after a
 * 1 s warm-up), subjects taking turns over ROUNDS rounds so that drift in the machine's load falls on all
 * alike. Prints requests per second (median of the rounds), each against its bare peer, the server's CPU
 * time per request (user + system, from /proc: what the server spends, whatever else loads the machine),
 * and the load average. Run: node bench/runtimes.mjs [--duration 3] [--rounds 2].
 */
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { cpuUs } from './lib/http-load.mjs'
import { numberOption } from './lib/options.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const DURATION = numberOption('duration', 3)
const ROUNDS = numberOption('rounds', 2)
const server = fileURLToPath(new URL('./cases/runtime-server.mjs', import.meta.url))
// Bun's own binary, not node_modules/.bin/bun: that is a shell script whose bun, a child of its own, would
// outlive the kill and hide its CPU time from /proc/<pid>.
const rootRequire = createRequire(fileURLToPath(new URL('../package.json', import.meta.url)))
const bun = join(dirname(rootRequire.resolve('bun/package.json')), 'bin', 'bun.exe')

const subjects = [
  { name: 'hono-bare', runtime: process.execPath },
  { name: 'hono-sluice', runtime: process.execPath },
  { name: 'hono-rate-limiter', runtime: process.execPath },
  { name: 'bun-bare', runtime: bun },
  { name: 'bun-sluice', runtime: bun },
]

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

async function start(subject) {
  const port = await freePort()
  const child = spawn(subject.runtime, [server, subject.name, String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => String(chunk).includes('listening') && resolve())
    child.once('exit', (code) => reject(new Error(`${subject.name} exited (${code})`)))
  })
  return { url: `http://127.0.0.1:${port}/`, pid: child.pid, stop: () => child.kill('SIGKILL') }
}

function load(url, duration) {
  return new Promise((resolve, reject) => {
    autocannon({ url, connections: 10, duration }, (error, result) =>
      error ? reject(error) : resolve(result),
    )
  })
}

const rps = Object.fromEntries(subjects.map((s) => [s.name, []]))
const cpu = Object.fromEntries(subjects.map((s) => [s.name, []]))
const load1 = []
for (let round = 0; round < ROUNDS; round++) {
  for (const subject of subjects) {
    const running = await start(subject)
    try {
      await load(running.url, 1)
      const cpu0 = cpuUs(running.pid)
      const result = await load(running.url, DURATION)
      const cpu1 = cpuUs(running.pid)
      if (result.non2xx > 0 || result.errors > 0)
        throw new Error(`${subject.name}: ${result.non2xx} non-2xx, ${result.errors} errors`)
      rps[subject.name].push(result.requests.average)
      cpu[subject.name].push(cpu0 === undefined ? Number.NaN : (cpu1 - cpu0) / result.requests.total)
    } finally {
      running.stop()
    }
    load1.push(loadavg()[0])
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const m = Object.fromEntries(Object.entries(rps).map(([k, v]) => [k, median(v)]))
const c = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, median(v)]))
const row = (name, bare) =>
  `| ${name} | ${Math.round(m[name]).toLocaleString('en')} | ${bare === undefined ? '' : `${(m[name] / m[bare]).toFixed(2)}×`} | ${c[name].toFixed(1)} |`
console.log(
  `runtimes bench: ${ROUNDS} rounds of ${DURATION} s, 10 connections; load average (1 min) ${Math.min(...load1).toFixed(1)} to ${Math.max(...load1).toFixed(1)}`,
)
console.log('| subject | req/s (median) | of bare | server CPU µs/req (median) |')
console.log('|---|---|---|---|')
console.log(row('hono-bare'))
console.log(row('hono-sluice', 'hono-bare'))
console.log(row('hono-rate-limiter', 'hono-bare'))
console.log(row('bun-bare'))
console.log(row('bun-sluice', 'bun-bare'))
