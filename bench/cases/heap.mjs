/**
 * @module Heap bytes per key once `keys` distinct keys have been counted once each. Run with
 * `--expose-gc`: the heap is measured after a full collection before and after, and keys are made on the
 * fly so only what the store keeps stays alive (the key strings included, for every subject alike).
 * params: { subject, keys }
 */
import { params, report } from '../lib/child.mjs'
import { memorySubject } from '../lib/subjects.mjs'

const p = params()
if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc')
const subject = memorySubject(p.subject, { maxKeys: 2 * p.keys })

function heap() {
  globalThis.gc()
  globalThis.gc()
  return process.memoryUsage().heapUsed
}

// Warm up the code paths on keys of their own, then measure from a settled heap.
for (let i = 0; i < 1000; i++) await subject.consume(`warm:${i}`)
const before = heap()
const batch = new Array(256)
for (let i = 0; i < p.keys; i += batch.length) {
  const n = Math.min(batch.length, p.keys - i)
  for (let j = 0; j < n; j++) batch[j] = subject.consume(`client:${i + j}`)
  await Promise.all(batch.slice(0, n))
}
const after = heap()
// The store must still hold the keys; touch one so it cannot have been collected early.
const admitted = subject.admitted(await subject.consume('client:0'))
if (!admitted) throw new Error(`${p.subject} denied a call`)
report({ bytesPerKey: (after - before) / p.keys })
subject.close()
