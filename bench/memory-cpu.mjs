#!/usr/bin/env node
/**
 * @module The in-memory section's per-CPU-second rows alone, in one run: each subject in fresh processes,
 * subjects taking turns over the rounds (100 k keys, 256 in flight), with sluice measured from the current
 * build and, with `--before DIR`, from an older build's snapshot too. About a minute per round on two cores.
 *   node bench/memory-cpu.mjs [--before DIR] [--rounds 5] [--ms 800]
 * Prints per subject the median calls per CPU second, and each goal's ratio (the issue's rows).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCase } from './lib/child.mjs'
import { numberOption, option } from './lib/options.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const before = option('before', undefined)
const rounds = numberOption('rounds', 5)
const measureMs = numberOption('ms', 800)
const now = mkdtempSync(join(tmpdir(), 'sluice-memory-cpu-'))
snapshot(now)

const SLUICE = ['sluice:fixedWindow', 'sluice:concurrency', 'sluice:table', 'sluice:leakyBucket']
const subjects = [
  ...SLUICE.map((s) => ({ label: s, subject: s, snap: now })),
  ...(before === undefined ? [] : SLUICE.map((s) => ({ label: `before ${s}`, subject: s, snap: before }))),
  ...['erl', 'fastify-local', 'map+clock'].map((s) => ({ label: s, subject: s, snap: now })),
]
const keysOf = (s) => (s.subject === 'sluice:leakyBucket' || s.label.endsWith('one key') ? 1 : 100_000)
subjects.push({ label: 'sluice:fixedWindow one key', subject: 'sluice:fixedWindow', snap: now })
if (before !== undefined)
  subjects.push({ label: 'before sluice:fixedWindow one key', subject: 'sluice:fixedWindow', snap: before })

const rates = new Map(subjects.map((s) => [s.label, []]))
try {
  for (let r = 0; r < rounds; r++) {
    for (const s of subjects) {
      const result = await runCase(
        'memory',
        { subject: s.subject, keys: keysOf(s), mode: 'batch', batch: 256, warmupMs: 300, measureMs },
        { env: { ...process.env, SLUICE_BENCH_SNAPSHOT: s.snap } },
      )
      rates.get(s.label).push(result.perCpuSecond)
    }
    process.stderr.write(`round ${r + 1}/${rounds}\n`)
  }
} finally {
  rmSync(now, { recursive: true, force: true })
}
const m = (label) => median(rates.get(label))
for (const s of subjects) console.log(`${s.label.padEnd(36)} ${(m(s.label) / 1e6).toFixed(2)} M per CPU s`)
const rows = [
  ['fixedWindow vs @fastify/rate-limit LocalStore', 'sluice:fixedWindow', 'fastify-local', 1.0],
  ['fixedWindow vs express-rate-limit MemoryStore', 'sluice:fixedWindow', 'erl', 0.8],
  ['concurrency (consume + release) vs fixedWindow', 'sluice:concurrency', 'sluice:fixedWindow', 0.3],
  [
    'leakyBucket, one hot key, vs fixedWindow on one key',
    'sluice:leakyBucket',
    'sluice:fixedWindow one key',
    0.5,
  ],
  ['fixedWindow from a limit table vs the fixed list', 'sluice:table', 'sluice:fixedWindow', 0.9],
]
console.log('\n| row | before | after | goal |\n|---|---|---|---|')
for (const [name, s, against, goal] of rows) {
  const after = m(s) / m(against)
  const againstBefore = rates.has(`before ${against}`) ? `before ${against}` : against
  const was = before === undefined ? '' : `${(m(`before ${s}`) / m(againstBefore)).toFixed(2)}×`
  console.log(`| ${name} | ${was} | ${after.toFixed(2)}× | ≥ ${goal.toFixed(1)}× |`)
}
