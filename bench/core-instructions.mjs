#!/usr/bin/env node
/**
 * @module What one in-memory call costs in CPU instructions, counted by callgrind: sluice's hot paths
 * beside a peer or a sibling, in one run, where throughput on a shared machine is noise.
 * `node bench/core-instructions.mjs [--calls N] [--warmup N] [--before DIR [--before-name TEXT]] [--only name,...]`;
 * needs valgrind.
 *
 * Each workload runs under callgrind (cases/calls.mjs) with counting off through start-up and a warm-up
 * (every key touched, `--warmup` calls, one full collection and an idle wait for its sweep, a third of them
 * again), then on for `--calls` calls: their count over `calls` is one call's cost in steady state. All
 * threads are counted (garbage collection included). Node compiles on its main thread and the subjects' windows
 * last a day (lib/callgrind.mjs), so the three runs of a count agree within a few instructions. `--before DIR`
 * also counts sluice's workloads from another snapshot (lib/snapshot.mjs): a change's before and after;
 * `--before-name` says in the file which build that was.
 * Writes bench/CORE-INSTRUCTIONS.md.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { countedInstructions, needValgrind } from './lib/callgrind.mjs'
import { numberOption, option } from './lib/options.mjs'
import { snapshot } from './lib/snapshot.mjs'
import { median } from './lib/stats.mjs'

const CALLS = numberOption('calls', 150_000)
const WARMUP = numberOption('warmup', 150_000)
const BEFORE = option('before', undefined)
const BEFORE_NAME = option('before-name', undefined)
const ONLY = option('only', undefined)?.split(',')
const KEYS = 100_000
const caseFile = fileURLToPath(new URL('./cases/calls.mjs', import.meta.url))
const outFile = fileURLToPath(new URL('./CORE-INSTRUCTIONS.md', import.meta.url))

/**
 * Node's flag that lifts V8's budget for taking called functions whole into their caller (920 bytes of
 * bytecode in all per optimized function by default). Under it the counted calls of sluice's fixed window
 * run one optimized function: the bench's loop with the limiter, store, rule and answer taken in (checked
 * with `--perf-basic-prof`). express-rate-limit's path is one function at the default budget already (1,253
 * instructions a call with this flag or without). Beside the default it prices the calls V8 leaves between
 * sluice's parts.
 */
const INLINE_ALL = ['--max-inlined-bytecode-size-cumulative=100000']

/**
 * Each comparison: sluice's workload, what it is read against, and the goal for `sluice / against` in
 * calls per instruction (the inverse of the instruction ratio): the ratios, same run. A workload is
 * [subject, keys] or [subject, keys, node's flags besides]; a comparison without a goal is a `bound`, a
 * floor or a ceiling.
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
    name: 'fixedWindow vs the floor with its answer (Map + Date.now + a Decision)',
    sluice: ['sluice:fixedWindow', KEYS],
    against: ['map+decision', KEYS],
    goal: undefined,
  },
  {
    name: 'fixedWindow, V8 inlining every call, vs express-rate-limit MemoryStore',
    sluice: ['sluice:fixedWindow', KEYS, INLINE_ALL],
    against: ['erl', KEYS],
    goal: undefined,
    bound: 'ceiling',
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
  {
    // At most 1.3 times fixedWindow's instructions: a decision inside the cached period compares, no Intl.
    name: 'quota (a UTC day) vs fixedWindow',
    sluice: ['sluice:quota', KEYS],
    against: ['sluice:fixedWindow', KEYS],
    goal: 1 / 1.3,
  },
  {
    name: 'two rules, 3 units under both, vs fixedWindow',
    sluice: ['sluice:cost', KEYS],
    against: ['sluice:fixedWindow', KEYS],
    goal: undefined,
    bound: 'beside',
  },
  {
    name: 'two rules, equal per-rule costs by name (the names read, one cost stored) vs one cost for both',
    sluice: ['sluice:costs-equal', KEYS],
    against: ['sluice:cost', KEYS],
    goal: undefined,
    bound: 'beside',
  },
  {
    name: 'two rules, per-rule costs by name vs one cost for both',
    sluice: ['sluice:costs', KEYS],
    against: ['sluice:cost', KEYS],
    goal: undefined,
    bound: 'beside',
  },
].filter((c) => ONLY === undefined || ONLY.some((o) => c.name.includes(o)))

needValgrind('bench/core-instructions.mjs')

/**
 * Instructions (all threads) of `calls` calls of one workload (cases/calls.mjs) from one snapshot, node
 * run with `nodeArgs` besides.
 */
function total(dir, subject, keys, calls, snapshotDir, nodeArgs) {
  const params = { subject, keys, warmup: WARMUP, calls, batch: 256 }
  return countedInstructions(dir, caseFile, params, snapshotDir, subject, nodeArgs)
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-core-instructions-'))
const perCall = new Map()
/** Instructions per call of one workload from one snapshot (counted once per run). */
async function measure(subject, keys, nodeArgs, snapshotDir, label) {
  const id = `${label}|${subject}|${keys}|${nodeArgs.join(' ')}`
  if (!perCall.has(id)) {
    // Three runs side by side, their median, each run's count printed: the counted calls read steady-state
    // code (lib/callgrind.mjs, lib/collect.mjs, WINDOW_MS in lib/subjects.mjs), so the three agree within a
    // few instructions; a run that does not says something moved under the count.
    const runs = await Promise.all(
      [1, 2, 3].map(() => total(dir, subject, keys, CALLS, snapshotDir, nodeArgs)),
    )
    perCall.set(id, median(runs) / CALLS)
    const each = runs.map((r) => Math.round(r / CALLS)).join(', ')
    const flags = nodeArgs.length === 0 ? '' : ` ${nodeArgs.join(' ')}`
    console.log(
      `${label} ${subject} (${keys} keys${flags}): ${Math.round(perCall.get(id))} instructions per call (${each})`,
    )
  }
  return perCall.get(id)
}

/** A workload of COMPARISONS as `measure` takes it: subject, keys, node's flags besides. */
const spec = ([subject, keys, nodeArgs = []]) => [subject, keys, nodeArgs]

const rows = []
try {
  const now = snapshot(join(dir, 'now'))
  for (const c of COMPARISONS) {
    const against = await measure(...spec(c.against), now, 'after')
    const after = await measure(...spec(c.sluice), now, 'after')
    const row = { ...c, againstCount: against, after }
    if (BEFORE !== undefined) {
      row.before = await measure(...spec(c.sluice), BEFORE, 'before')
      row.againstBefore = c.against[0].startsWith('sluice:')
        ? await measure(...spec(c.against), BEFORE, 'before')
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
  `Each workload runs under callgrind, counting off through start-up and a warm-up (every key touched,`,
  `${WARMUP} calls, one full collection and an idle wait for its sweep, a third of the calls again so that`,
  `what the collection deoptimized is compiled again), then on for ${CALLS} calls, 256 in flight, all threads`,
  'counted; the median of three runs. Node compiles on its main thread (`--no-concurrent-recompilation`) and',
  'every window lasts a day, so that the counted calls run steady-state code and no window ends among them.',
  'The ceiling runs sluice with V8 taking every call into its caller (`--max-inlined-bytecode-size-cumulative`).',
  '"Ratio" is calls per instruction of sluice over the other (its',
  "instructions over sluice's): the issue's per-CPU-second ratios, which a busy machine cannot move.",
  ...(BEFORE_NAME === undefined ? [] : [`"Before" is ${BEFORE_NAME}, counted in the same run.`]),
  '',
  BEFORE === undefined
    ? '| workload | sluice | against | ratio | goal |'
    : '| workload | sluice before | sluice after | against (before / after) | ratio before | ratio after | goal |',
  BEFORE === undefined ? '|---|---|---|---|---|' : '|---|---|---|---|---|---|---|',
]
for (const r of rows) {
  const goal = r.goal !== undefined ? `≥ ${Number(r.goal.toFixed(2))}×` : (r.bound ?? 'floor')
  const ratio = (a, s) => `${(a / s).toFixed(2)}×`
  lines.push(
    BEFORE === undefined
      ? `| ${r.name} | ${n(r.after)} | ${n(r.againstCount)} | ${ratio(r.againstCount, r.after)} | ${goal} |`
      : `| ${r.name} | ${n(r.before)} | ${n(r.after)} | ${n(r.againstBefore)} / ${n(r.againstCount)} | ${ratio(r.againstBefore, r.before)} | ${ratio(r.againstCount, r.after)} | ${goal} |`,
  )
}
if (ONLY === undefined) writeFileSync(outFile, `${lines.join('\n')}\n`)
console.log(`\n${lines.join('\n')}`)
