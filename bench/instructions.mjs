#!/usr/bin/env node
/**
 * @module What each HTTP server costs per request in CPU instructions, counted by callgrind (valgrind):
 * a figure a busy or shared machine cannot move, for the goals that sit within a few per cent of their
 * floor, where req/s and CPU time swing more between runs than the difference measured.
 * `node bench/instructions.mjs [--requests N] [--rounds R] [--only express|fastify] [--before DIR]
 * [--variants bare,sluice-memory,...]`; needs
 * valgrind. Writes bench/INSTRUCTIONS.md. `--before DIR` also counts sluice from another snapshot (an older
 * build, snapshotted with lib/snapshot.mjs), in the same run: before/after figures for a change.
 *
 * Each server (cases/http-server.mjs, the HTTP section's own) runs under callgrind with counting off. It
 * is warmed up first, so V8 has compiled what it will compile; counting is then switched on for N
 * requests only (`callgrind_control`). The main thread's count is the event loop: parsing, routing, the
 * limiter, writing the response, and the scavenges that run on it. Helper threads (concurrent marking,
 * compiling) are reported beside it.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startServer } from './lib/http-load.mjs'
import { numberOption, option } from './lib/options.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

const require = createRequire(import.meta.url)
const autocannon = require('autocannon')

const REQUESTS = numberOption('requests', 3000)
const ROUNDS = numberOption('rounds', 2)
const WARMUP = 4000
const FRAMEWORKS = option('only', 'express,fastify').split(',')
/** The floors and the limiters on the memory store (nothing here needs Redis). */
const BEFORE = option('before', undefined)
const ALL_VARIANTS = [
  'bare',
  'noop',
  'noop-headers',
  'noop-ip-headers',
  'sluice-memory',
  'sluice-memory-observed',
  'sluice-memory-overload',
  ...(BEFORE === undefined ? [] : ['sluice-memory@before']),
  'peer-memory',
]
/** `--variants` counts only these (bare is always counted: the other figures are read against it). */
const ONLY = option('variants', undefined)?.split(',')
const VARIANTS =
  ONLY === undefined
    ? ALL_VARIANTS
    : ALL_VARIANTS.filter((v) => v === 'bare' || ONLY.includes(v.split('@')[0]))
const PEER = { express: 'express-rate-limit', fastify: '@fastify/rate-limit' }
const outFile = fileURLToPath(new URL('./INSTRUCTIONS.md', import.meta.url))

if (spawnSync('callgrind_control', ['-h']).error !== undefined) {
  console.error('bench/instructions.mjs needs valgrind (callgrind_control): apt-get install valgrind')
  process.exit(1)
}

/** Loads the server with `amount` keep-alive requests over 8 connections; throws on any non-2xx. */
async function send(port, amount) {
  // A server under callgrind on a busy machine can take longer than autocannon's default 10 s to answer.
  const r = await autocannon({ url: `http://127.0.0.1:${port}/`, connections: 8, amount, timeout: 120 })
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) {
    throw new Error(`port ${port}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`)
  }
}

/** One server under callgrind: instructions per request on its main thread and on all its threads. */
async function count(framework, variant, dir) {
  const out = join(dir, `${framework}-${variant}`)
  const wrapper = [
    'valgrind',
    '--tool=callgrind',
    '--separate-threads=yes',
    '--instr-atstart=no',
    // V8 writes and rewrites machine code on the heap; valgrind must see each change.
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}.%p`,
  ]
  const [name, from] = variant.split('@')
  const server = await startServer(
    { framework, variant: name, redisPort: 0 },
    { wrapper, env: { ...process.env, SLUICE_BENCH_SNAPSHOT: from === 'before' ? BEFORE : dir } },
  )
  let perThread
  try {
    await send(server.port, WARMUP)
    control(['-i', 'on', String(server.pid)])
    await send(server.port, REQUESTS)
    // Writes the counts since `-i on` as part 1 of the run, one file per thread (`<out>.<pid>.1-<thread>`).
    control(['-d', String(server.pid)])
    perThread = await dumped(dir, `${framework}-${variant}.${server.pid}.1-`)
  } finally {
    await server.stop()
  }
  return {
    main: perThread[0] / REQUESTS,
    all: perThread.reduce((a, b) => a + b, 0) / REQUESTS,
  }
}

/** The instruction count of each thread in a dump, main thread first, once every file is complete. */
async function dumped(dir, part) {
  for (let tries = 0; tries < 100; tries++) {
    const texts = readdirSync(dir)
      .filter((f) => f.startsWith(part))
      .sort()
      .map((f) => readFileSync(join(dir, f), 'utf8'))
    if (texts.length > 0 && texts.every((t) => /^totals: /m.test(t))) {
      return texts.map((t) => Number(/^summary: (\d+)$/m.exec(t)[1]))
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`no complete counts in ${dir} for ${part}`)
}

function control(argv) {
  const r = spawnSync('callgrind_control', argv, { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`callgrind_control ${argv.join(' ')}: ${r.stderr || r.stdout}`)
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-instructions-'))
const results = {}
try {
  snapshot(dir)
  for (let round = 0; round < ROUNDS; round++) {
    for (const framework of FRAMEWORKS) {
      for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
        const r = await count(framework, variant, dir)
        const key = `${framework}|${variant}`
        results[key] ??= { main: [], all: [] }
        results[key].main.push(r.main)
        results[key].all.push(r.all)
        console.log(`${framework} ${variant}: ${Math.round(r.main)} main-thread instructions per request`)
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}

/** Thousands; a tenth of one where a request is cheap enough for it to matter (Fastify). */
const k = (n) => `${(n / 1000).toFixed(n < 200_000 ? 1 : 0)} k`
const lines = [
  '# Instructions per request',
  '',
  `Written by \`node bench/instructions.mjs\` on ${new Date().toISOString().slice(0, 10)}: each server under`,
  `callgrind, ${WARMUP} requests to warm up, then ${REQUESTS} counted (8 keep-alive connections), median of`,
  `${ROUNDS} round(s); node ${process.version}; "vs bare" is bare's main-thread count over the server's.`,
  "User-space code only: the kernel's share of a request (socket reads and writes) is not counted, so",
  '"vs bare" is lower than the req/s ratio, most for Fastify; the differences between servers are what',
  'these figures settle. Floors and limiters as in the HTTP section of [RESULTS.md](RESULTS.md); every',
  'limiter is on its memory store, keyed by client IP.',
  '',
]
for (const framework of FRAMEWORKS) {
  const bare = median(results[`${framework}|bare`].main)
  lines.push(`## ${framework}`, '', '| server | main thread | vs bare | all threads |', '|---|---|---|---|')
  for (const variant of VARIANTS) {
    const r = results[`${framework}|${variant}`]
    const main = median(r.main)
    const name =
      variant === 'peer-memory'
        ? PEER[framework]
        : variant.replace('@before', ' (before, the --before build)')
    lines.push(`| ${name} | ${k(main)} | ${(bare / main).toFixed(3)}× | ${k(median(r.all))} |`)
  }
  lines.push('')
}
// A partial run (--variants) prints its table and leaves the full one in INSTRUCTIONS.md alone.
if (ONLY === undefined) writeFileSync(outFile, `${lines.join('\n')}`)
console.log(`\n${lines.join('\n')}`)
