#!/usr/bin/env node
/**
 * @module What one in-memory call costs in CPU instructions, counted by callgrind: sluice's hot paths
 * beside a peer or a sibling, in one run, where throughput on a shared machine is noise.
 * `node bench/core-instructions.mjs [--calls N] [--before DIR] [--only name,...]`; needs valgrind.
 *
 * Each workload runs twice under callgrind (cases/calls.mjs), with `calls` and with `2 × calls` calls
 * after the same warm-up; the difference over `calls` is one call's cost in steady state, start-up,
 * compilation and warm-up cancelled. All threads are counted (garbage collection included). `--before DIR`
 * also counts sluice's workloads from another snapshot (lib/snapshot.mjs): a change's before and after.
 * Writes bench/CORE-INSTRUCTIONS.md.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { snapshot } from './lib/snapshot.mjs'

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : args[i + 1]
}
const CALLS = Number(option('calls', 40_000))
const BEFORE = option('before', undefined)
const ONLY = option('only', undefined)?.split(',')
const KEYS = 100_000
const caseFile = fileURLToPath(new URL('./cases/calls.mjs', import.meta.url))
const outFile = fileURLToPath(new URL('./CORE-INSTRUCTIONS.md', import.meta.url))

/**
 * Each comparison: sluice's workload, what it is read against, and the goal for `sluice / against` in
 * calls per instruction (the inverse of the instruction ratio): the ratios, same run.
 */
const COMPARISONS = [
  {
    name: 'fixedWindow vs @fastify/rate-limit LocalStore',
    sluice: ['sluice:fixedWindow', KEYS],
    against: ['fastify-local', KEYS],
    goal: 1.0,
  },
  {
    name: 'fixedWindow vs express-rate-limit MemoryStore',
    sluice: ['sluice:fixedWindow', KEYS],
    against: ['erl', KEYS],
    goal: 0.8,
  },
  {
    name: 'fixedWindow vs the raw floor (Map + Date.now)',
    sluice: ['sluice:fixedWindow', KEYS],
    against: ['map+clock', KEYS],
    goal: undefined,
  },
  {
    name: 'concurrency (consume + release) vs fixedWindow',
    sluice: ['sluice:concurrency', KEYS],
    against: ['sluice:fixedWindow', KEYS],
    goal: 0.3,
  },
  {
    name: 'leakyBucket on one hot key vs fixedWindow on one key',
    sluice: ['sluice:leakyBucket', 1],
    against: ['sluice:fixedWindow', 1],
    goal: 0.5,
  },
  {
    name: 'fixedWindow from a limit table vs the fixed list',
    sluice: ['sluice:table', KEYS],
    against: ['sluice:fixedWindow', KEYS],
    goal: 0.9,
  },
].filter((c) => ONLY === undefined || ONLY.some((o) => c.name.includes(o)))

if (spawnSync('valgrind', ['--version']).error !== undefined) {
  console.error('bench/core-instructions.mjs needs valgrind: apt-get install valgrind')
  process.exit(1)
}

/** Total instructions (all threads) of one run of cases/calls.mjs. */
function total(dir, subject, keys, calls, snapshotDir) {
  const out = join(dir, `cg-${process.hrtime.bigint()}`)
  const params = { subject, keys, warmup: 2 * CALLS, calls, batch: 256 }
  const argv = [
    '--tool=callgrind',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}.%p`,
    process.execPath,
    '--expose-gc',
    caseFile,
    JSON.stringify(params),
  ]
  return new Promise((resolve, reject) => {
    const child = spawn('valgrind', argv, {
      env: { ...process.env, SLUICE_BENCH_SNAPSHOT: snapshotDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-2000)
    })
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${subject}: ${err}`))
      let sum = 0
      for (const f of readdirSync(dir).filter((f) => f.startsWith(out.slice(dir.length + 1)))) {
        sum += Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, f), 'utf8'))[1])
        rmSync(join(dir, f))
      }
      resolve(sum)
    })
  })
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-core-instructions-'))
const perCall = new Map()
/** Instructions per call of one workload from one snapshot (counted once per run). */
async function measure(subject, keys, snapshotDir, label) {
  const id = `${label}|${subject}|${keys}`
  if (!perCall.has(id)) {
    // The two lengths run side by side: two processes, each counted on its own.
    const [once, twice] = await Promise.all([
      total(dir, subject, keys, CALLS, snapshotDir),
      total(dir, subject, keys, 2 * CALLS, snapshotDir),
    ])
    perCall.set(id, (twice - once) / CALLS)
    console.log(`${label} ${subject} (${keys} keys): ${Math.round(perCall.get(id))} instructions per call`)
  }
  return perCall.get(id)
}

const rows = []
try {
  const now = snapshot(join(dir, 'now'))
  for (const c of COMPARISONS) {
    const against = await measure(...c.against, now, 'after')
    const after = await measure(...c.sluice, now, 'after')
    const row = { ...c, againstCount: against, after }
    if (BEFORE !== undefined) {
      row.before = await measure(...c.sluice, BEFORE, 'before')
      row.againstBefore = c.against[0].startsWith('sluice:')
        ? await measure(...c.against, BEFORE, 'before')
        : against
    }
    rows.push(row)
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}

const n = (x) => Math.round(x).toLocaleString('en-US')
const lines = [
  '# Instructions per in-memory call',
  '',
  `Written by \`node bench/core-instructions.mjs\` on ${new Date().toISOString().slice(0, 10)}; node ${process.version}.`,
  `Each workload runs under callgrind twice, ${CALLS} and ${2 * CALLS} calls after the same warm-up (every key`,
  'touched, then more calls, then one full collection), 256 in flight; one call costs the difference over the',
  'extra calls, all threads counted. "Ratio" is calls per instruction of sluice over the other (its',
  "instructions over sluice's): the issue's per-CPU-second ratios, which a busy machine cannot move.",
  '',
  BEFORE === undefined
    ? '| workload | sluice | against | ratio | goal |'
    : '| workload | sluice before | sluice after | against (before / after) | ratio before | ratio after | goal |',
  BEFORE === undefined ? '|---|---|---|---|---|' : '|---|---|---|---|---|---|---|',
]
for (const r of rows) {
  const goal = r.goal === undefined ? 'floor' : `≥ ${r.goal.toFixed(1)}×`
  const ratio = (a, s) => `${(a / s).toFixed(2)}×`
  lines.push(
    BEFORE === undefined
      ? `| ${r.name} | ${n(r.after)} | ${n(r.againstCount)} | ${ratio(r.againstCount, r.after)} | ${goal} |`
      : `| ${r.name} | ${n(r.before)} | ${n(r.after)} | ${n(r.againstBefore)} / ${n(r.againstCount)} | ${ratio(r.againstBefore, r.before)} | ${ratio(r.againstCount, r.after)} | ${goal} |`,
  )
}
if (ONLY === undefined) writeFileSync(outFile, `${lines.join('\n')}\n`)
console.log(`\n${lines.join('\n')}`)
