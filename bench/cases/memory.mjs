/**
 * @module In-memory decisions per second of one subject, through its public async API.
 * params: { subject, keys, mode: 'serial' | 'batch', batch, warmupMs, measureMs }
 *  - serial: `await consume(key)`, one call at a time.
 *  - batch: `batch` calls started back to back, then `await Promise.all(...)` (calls in flight, as a
 *    busy server has them).
 * Keys cycle through `keys` distinct strings made before timing starts.
 */
import { params, report } from '../lib/child.mjs'
import { memorySubject } from '../lib/subjects.mjs'

const p = params()
const subject = memorySubject(p.subject)
const keys = Array.from({ length: p.keys }, (_, i) => `client:${i}`)
const CHECK_EVERY = 4096

function start() {
  return { wall: performance.now(), cpu: process.cpuUsage() }
}

/**
 * Calls per second of wall time, and per second of this process's CPU time (user + system, GC threads
 * included). On an idle machine the two agree; on a shared one the second is what the code costs, while
 * the first also counts the time other processes held the CPU.
 */
function rates(n, clocks) {
  const wall = (performance.now() - clocks.wall) / 1000
  const cpu = process.cpuUsage(clocks.cpu)
  return { perSecond: n / wall, perCpuSecond: n / ((cpu.user + cpu.system) / 1e6) }
}

async function serial(ms) {
  const { consume } = subject
  let n = 0
  let k = 0
  const clocks = start()
  const end = performance.now() + ms
  while (performance.now() < end) {
    for (let i = 0; i < CHECK_EVERY; i++) {
      await consume(keys[k])
      if (++k === keys.length) k = 0
    }
    n += CHECK_EVERY
  }
  return rates(n, clocks)
}

async function batched(ms) {
  const { consume } = subject
  const size = p.batch
  const inFlight = new Array(size)
  let n = 0
  let k = 0
  const clocks = start()
  const end = performance.now() + ms
  while (performance.now() < end) {
    for (let r = 0; r < CHECK_EVERY / size; r++) {
      for (let i = 0; i < size; i++) {
        inFlight[i] = consume(keys[k])
        if (++k === keys.length) k = 0
      }
      await Promise.all(inFlight)
    }
    n += CHECK_EVERY
  }
  return rates(n, clocks)
}

const run = p.mode === 'serial' ? serial : batched
// Warm-up: touches every key once at least, so the 100 k-key runs measure a full store.
for (const key of keys) await subject.consume(key)
await run(p.warmupMs)
const result = await run(p.measureMs)
const admitted = subject.admitted(await subject.consume(keys[0]))
subject.close()
if (!admitted) throw new Error(`${p.subject} denied a call: the bench limits are too low`)
report(result)
