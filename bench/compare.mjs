#!/usr/bin/env node
/**
 * @module Before and after a change, in one run: the bench's in-memory rows (sluice's decisions/s, one key
 * and 100 k keys, serial and 256 in flight) and its HTTP rows (Express and Fastify with sluice on the memory
 * store), each measured on the current build and on an older one, alternating, in fresh processes.
 * `node bench/compare.mjs --before DIR [--rounds N]`, where DIR is a snapshot of the older build
 * (lib/snapshot.mjs: `node -e "import('./bench/lib/snapshot.mjs').then((m) => m.snapshot('/tmp/before'))"`
 * in a checkout of it, after `pnpm build`). Prints a table of medians and after/before ratios.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCase } from './lib/child.mjs'
import { load, startServer } from './lib/http-load.mjs'
import { numberOption, option } from './lib/options.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

// What every figure below was measured on: the bench's published figures are taken on the active LTS line.
console.log(`node ${process.version}`)

const before = option('before', undefined)
if (before === undefined) {
  console.error('usage: node bench/compare.mjs --before DIR [--rounds N]')
  process.exit(2)
}
const ROUNDS = numberOption('rounds', 5)
const after = mkdtempSync(join(tmpdir(), 'sluice-compare-'))
snapshot(after)
const builds = { after, before }
const rows = new Map()
const record = (row, build, value) => {
  if (!rows.has(row)) rows.set(row, { after: [], before: [] })
  rows.get(row)[build].push(value)
}

try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? ['after', 'before'] : ['before', 'after']
    for (const subject of ['sluice:fixedWindow', 'sluice:slidingLog']) {
      for (const keys of [1, 100_000]) {
        for (const mode of ['serial', 'batch']) {
          for (const build of order) {
            const env = { ...process.env, SLUICE_BENCH_SNAPSHOT: builds[build] }
            const params = { subject, keys, mode, batch: 256, warmupMs: 300, measureMs: 800 }
            const r = await runCase('memory', params, { env })
            record(`memory ${subject} ${keys} keys ${mode}`, build, r.perSecond)
          }
        }
      }
    }
    for (const framework of ['express', 'fastify']) {
      for (const build of order) {
        const env = { ...process.env, SLUICE_BENCH_SNAPSHOT: builds[build] }
        const server = await startServer({ framework, variant: 'sluice-memory', redisPort: 0 }, { env })
        try {
          await load(server, 1, 64)
          record(`http ${framework} sluice-memory`, build, (await load(server, 2, 64)).perSecond)
        } finally {
          await server.stop()
        }
      }
    }
    console.log(`round ${round + 1} of ${ROUNDS} done`)
  }
} finally {
  rmSync(after, { recursive: true, force: true })
}

const fmt = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : `${(n / 1e3).toFixed(1)} k`)
console.log('\n| row | after | before | after / before |\n|---|---|---|---|')
for (const [row, { after: a, before: b }] of rows) {
  const ratios = a.map((x, i) => x / b[i])
  console.log(`| ${row} | ${fmt(median(a))}/s | ${fmt(median(b))}/s | ${median(ratios).toFixed(3)}× |`)
}
