/**
 * @module A fixed number of in-memory calls of one subject, for core-instructions.mjs to count under
 * callgrind. params: { subject, keys, warmup, calls, batch }. Every key is touched once, `warmup` calls
 * run, then `calls` more, `batch` in flight at a time (`Promise.all`), as cases/memory.mjs runs them.
 * Two runs that differ only in `calls` differ by those calls' instructions alone.
 * Run with `--expose-gc`: the heap is collected once before the counted calls.
 */
import { memorySubject } from '../lib/subjects.mjs'

const p = JSON.parse(process.argv[2])
const subject = memorySubject(p.subject)
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
globalThis.gc?.()
await run(p.calls)
const admitted = subject.admitted(await subject.consume(keys[0]))
subject.close()
if (!admitted) throw new Error(`${p.subject} denied a call: the bench limits are too low`)
