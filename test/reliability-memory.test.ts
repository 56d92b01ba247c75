/**
 * A flood of 2,000,000 distinct keys on a MemoryStore with `maxKeys` 100,000, in a child process of its
 * own (`--expose-gc`, old space capped at 256 MB: a store that kept every key would need several times
 * that). The heap is measured after full collections: empty, with the store just full, after the flood.
 *
 * The bound is derived from the store itself: its cost per key when full (which must stay under 1 KB: a
 * key, a map slot, an entry, one sliding log) times `maxKeys`, plus a quarter for hash-table slack. The
 * heap after the flood must fit in it, the store must never hold more than `maxKeys` keys, and keys in
 * use all along (each used again within every half of `maxKeys` new keys) keep their exact counts.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { startWorker, stopWorkers } from './harness/workers.ts'

afterAll(() => stopWorkers())

const KEYS = 2_000_000
const MAX_KEYS = 100_000
/** Hot keys are used again after this many new keys: less than a generation (MAX_KEYS / 2), so never dropped. */
const HOT_EVERY = 40_000
const HOT_KEYS = 100
const LIMIT = 5
const PER_KEY_BUDGET = 1024

interface Flood {
  heap: { baseline: number; full: number; after: number }
  size: { max: number; final: number }
  hot: Record<string, [allowed: 0 | 1, remaining: number][]>
  forgotten: boolean
}

describe('MemoryStore flooded with 2,000,000 distinct keys, maxKeys 100,000', () => {
  it('keeps the heap within maxKeys x its own cost per key, never holds more than maxKeys keys, and counts live keys exactly', async () => {
    const worker = startWorker('memory-flood.mjs', { execArgv: ['--expose-gc', '--max-old-space-size=256'] })
    const result = await worker.ask<Flood>({
      flood: { keys: KEYS, maxKeys: MAX_KEYS, hotKeys: HOT_KEYS, hotEvery: HOT_EVERY, limit: LIMIT },
    })
    await worker.kill()

    const { baseline, full, after } = result.heap
    const perKey = (full - baseline) / MAX_KEYS
    expect(perKey).toBeGreaterThan(0)
    expect(perKey).toBeLessThan(PER_KEY_BUDGET)
    expect(after - baseline).toBeLessThan(MAX_KEYS * perKey * 1.25)
    expect(result.size.max).toBeLessThanOrEqual(MAX_KEYS)
    expect(result.size.final).toBeLessThanOrEqual(MAX_KEYS)

    // Every hot key: admitted LIMIT times (remaining LIMIT - 1 ... 0), then denied every time after.
    const rounds = KEYS / HOT_EVERY + 1
    const expected = Array.from({ length: rounds }, (_, i) => (i < LIMIT ? [1, LIMIT - 1 - i] : [0, 0]))
    expect(Object.keys(result.hot)).toHaveLength(HOT_KEYS)
    for (const [key, decisions] of Object.entries(result.hot)) expect(decisions, key).toEqual(expected)
    // And the bound is kept by forgetting the least recently used: the flood's first key is gone.
    expect(result.forgotten).toBe(true)
  }, 60_000)
})
