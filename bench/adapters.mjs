/**
 * @module A short side-by-side run of the Koa, node:http and NestJS adapters, apart from the full bench:
 * `node bench/adapters.mjs [--rounds N] [--seconds S] [--only koa|node|nest]`. Koa bare, Koa + sluice
 * (memory) and Koa + koa-ratelimit (memory); node:http bare and node:http + sluice (memory); Nest on each
 * platform (Express, Fastify) bare, + a guard that only answers true (the floor of any guard), + sluice (`SluiceModule`, memory) and + @nestjs/throttler (memory).
 * Each server runs in a process of its own, driven in alternating rounds by autocannon over loopback, at a
 * limit nothing reaches. Prints each one's median requests per second and its ratio to its bare server,
 * and the server's median CPU time per request (user + system, from /proc: what the server spends,
 * whatever else loads the machine), with the load average beside them: the ratios within one run are the
 * figures to read, not the absolute rate.
 */
import { loadavg } from 'node:os'
import { load, startServer } from './lib/http-load.mjs'
import { numberOption, option } from './lib/options.mjs'
import { summary } from './lib/stats.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const only = option('only', undefined)
const ROUNDS = numberOption('rounds', 3)
const SECONDS = numberOption('seconds', 2)
const CONNECTIONS = 10

const SUBJECTS = [
  { name: 'koa bare', framework: 'koa', variant: 'bare', bare: 'koa bare' },
  { name: 'koa + sluice', framework: 'koa', variant: 'sluice-memory', bare: 'koa bare' },
  { name: 'koa + koa-ratelimit', framework: 'koa', variant: 'peer-memory', bare: 'koa bare' },
  { name: 'node:http bare', framework: 'node', variant: 'bare', bare: 'node:http bare' },
  { name: 'node:http + sluice', framework: 'node', variant: 'sluice-memory', bare: 'node:http bare' },
  ...['express', 'fastify'].flatMap((platform) => {
    const bare = `nest/${platform} bare`
    return [
      { name: bare, framework: 'nest', platform, variant: 'bare', bare },
      { name: `nest/${platform} + pass guard`, framework: 'nest', platform, variant: 'noop', bare },
      { name: `nest/${platform} + sluice`, framework: 'nest', platform, variant: 'sluice-memory', bare },
      { name: `nest/${platform} + throttler`, framework: 'nest', platform, variant: 'peer-memory', bare },
    ]
  }),
].filter((s) => only === undefined || s.framework === only)

const loadAtStart = loadavg()
const servers = {}
for (const s of SUBJECTS) {
  servers[s.name] = await startServer({ framework: s.framework, platform: s.platform, variant: s.variant })
  await load(servers[s.name], 1, CONNECTIONS)
}
const rates = Object.fromEntries(SUBJECTS.map((s) => [s.name, []]))
const cpu = Object.fromEntries(SUBJECTS.map((s) => [s.name, []]))
for (let round = 0; round < ROUNDS; round++) {
  // Each round in a different order, so no subject always runs right after the same one.
  const order = round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse()
  for (const s of order) {
    const result = await load(servers[s.name], SECONDS, CONNECTIONS)
    rates[s.name].push(result.perSecond)
    cpu[s.name].push(result.serverCpuUsPerRequest)
  }
}
for (const server of Object.values(servers)) await server.stop()

const median = (name) => summary(rates[name]).median
console.log(
  `${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections; load average ${fmt(loadAtStart)} at the start, ${fmt(loadavg())} at the end`,
)
for (const s of SUBJECTS) {
  const ratio = median(s.name) / median(s.bare)
  console.log(
    `${s.name.padEnd(26)} ${Math.round(median(s.name)).toString().padStart(7)} req/s   ${ratio.toFixed(2)}× bare   ${summary(cpu[s.name]).median.toFixed(1).padStart(6)} µs CPU/req`,
  )
}

function fmt(avg) {
  return avg.map((n) => n.toFixed(2)).join(' ')
}
