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

async function serial(ms) {
  const { consume } = subject
  let n = 0
  let k = 0
  const t0 = performance.now()
  const end = t0 + ms
  while (performance.now() < end) {
    for (let i = 0; i < CHECK_EVERY; i++) {
      await consume(keys[k])
      if (++k === keys.length) k = 0
    }
    n += CHECK_EVERY
  }
  return n / ((performance.now() - t0) / 1000)
}

async function batched(ms) {
  const { consume } = subject
  const size = p.batch
  const inFlight = new Array(size)
  let n = 0
  let k = 0
  const t0 = performance.now()
  const end = t0 + ms
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
  return n / ((performance.now() - t0) / 1000)
}

const run = p.mode === 'serial' ? serial : batched
// Warm-up: touches every key once at least, so the 100 k-key runs measure a full store.
for (const key of keys) await subject.consume(key)
await run(p.warmupMs)
const perSecond = await run(p.measureMs)
const admitted = subject.admitted(await subject.consume(keys[0]))
subject.close()
if (!admitted) throw new Error(`${p.subject} denied a call: the bench limits are too low`)
report({ perSecond })
