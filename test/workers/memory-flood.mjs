/**
 * A flood of distinct keys on one MemoryStore, in a child process of its own (`--expose-gc`, a capped old
 * space), on the built @sluice/core. It measures the heap (after full collections) empty, with the store
 * just full, and after the flood; it keeps a set of hot keys in use throughout and records every decision
 * they got.
 *
 * Protocol over IPC: `{ flood: { keys, maxKeys, hotKeys, hotEvery, limit } }` → `{ heap, size, hot, forgotten }`.
 */
import { createLimiter, MemoryStore, slidingLog } from '@sluice/core'

if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc')

/** Heap in use after full collections. */
function heap() {
  globalThis.gc()
  globalThis.gc()
  return process.memoryUsage().heapUsed
}

async function flood({ keys, maxKeys, hotKeys, hotEvery, limit }) {
  const hot = Array.from({ length: hotKeys }, (_, i) => `hot-${i}`)
  const decisions = new Map(hot.map((key) => [key, []]))
  const baseline = heap()

  const store = new MemoryStore({ maxKeys, sweepIntervalMs: 0 })
  const limiter = createLimiter({ rules: [slidingLog({ limit, windowMs: 600_000 })], store })
  const sizes = []
  const touchHot = async () => {
    for (const key of hot) {
      const d = await limiter.consume(key)
      decisions.get(key).push([d.allowed ? 1 : 0, d.remaining])
    }
  }

  // Full: as many distinct keys as the store holds.
  for (let i = 0; i < maxKeys; i++) await limiter.consume(`fill-${i}`)
  sizes.push(store.size)
  const full = heap()

  // The flood: `keys` distinct keys, the hot ones used again every `hotEvery` of them.
  for (let i = 0; i < keys; i++) {
    if (i % hotEvery === 0) {
      await touchHot()
      sizes.push(store.size)
    }
    await limiter.consume(`flood-${i}`)
  }
  await touchHot()
  sizes.push(store.size)
  const after = heap()

  // The first keys of the flood have not been used for far longer than the store keeps keys: gone.
  const forgotten = (await limiter.peek('flood-0')).remaining === limit - 1
  return {
    heap: { baseline, full, after },
    size: { max: Math.max(...sizes), final: store.size },
    hot: Object.fromEntries(decisions),
    forgotten,
  }
}

process.on('message', (message) => {
  if (message.flood) {
    flood(message.flood).then(
      (result) => process.send(result),
      (error) => process.send({ error: String(error?.stack ?? error) }),
    )
  }
})
