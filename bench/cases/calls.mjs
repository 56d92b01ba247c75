/**
 * @module A fixed number of in-memory calls of one subject, for core-instructions.mjs to count under
 * callgrind. params: { subject, keys, warmup, calls, batch }. Every key is touched once, `warmup` calls
 * run, then `calls` more, `batch` in flight at a time (`Promise.all`), as cases/memory.mjs runs them.
 * Run with `--expose-gc`: the heap is collected once before the counted calls (lib/collect.mjs).
 */
import { createInterface } from 'node:readline'
import { collected } from '../lib/collect.mjs'
import { memorySubject } from '../lib/subjects.mjs'

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()

/** Says `word` on stdout, then waits for a line on stdin. */
async function handshake(word) {
  process.stdout.write(`${word}\n`)
  await lines.next()
}

const p = JSON.parse(process.argv[2])
// sluice's idle-key sweep runs on a 60 s timer; under callgrind's slowdown it would land in one run and not
// the other (in a real process it runs once a minute, a cost per call too small to count).
const subject = memorySubject(p.subject, { sweepIntervalMs: 0 })
const keys = Array.from({ length: p.keys }, (_, i) => `client:${i}`)
const inFlight = new Array(p.batch)
let k = 0

async function run(n) {
  for (let done = 0; done < n; done += p.batch) {
    for (let i = 0; i < p.batch; i++) {
      inFlight[i] = subject.consume(keys[k])
      if (++k === keys.length) k = 0
    }
    await Promise.all(inFlight)
  }
}

for (const key of keys) await subject.consume(key)
await run(p.warmup)
// Both runs start their counted calls from the same collected heap (node --expose-gc), so a full
// collection of the warm-up's garbage does not land in one run and not the other.
await collected()
// A full collection clears type feedback some optimized code relied on: that code is deoptimized and compiled
// again on the next calls. Those calls run before counting starts, so the count is steady-state code's, not
// the compiler's (which moved one build's figure by a quarter and another's not at all).
await run(p.warmup / 3)
// core-instructions.mjs switches counting on between READY and the next line it sends, and dumps the
// counts between DONE and the last: only the counted calls are counted.
await handshake('READY')
await run(p.calls)
await handshake('DONE')
const admitted = subject.admitted(await subject.consume(keys[0]))
subject.close()
lines.return?.()
process.stdin.destroy()
if (!admitted) throw new Error(`${p.subject} denied a call: the bench limits are too low`)
