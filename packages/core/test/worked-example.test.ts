import { createLimiter, MemoryStore, slidingLog } from '@sluice/core'
import { describe, expect, it } from 'vitest'

describe('DESIGN worked example', () => {
  it('slidingLog limit 2 per 1000 ms admits, denies and re-admits exactly at the edge', async () => {
    let now = 0
    const limiter = createLimiter({
      rules: [slidingLog({ limit: 2, windowMs: 1000 })],
      store: new MemoryStore({ clock: () => now }),
    })
    const at = async (t: number) => {
      now = t
      return limiter.consume('k')
    }
    expect((await at(100)).allowed).toBe(true)
    expect((await at(400)).allowed).toBe(true)
    const denied = await at(500)
    expect(denied.allowed).toBe(false)
    expect(denied.retryAfterMs).toBe(600)
    expect((await at(1100)).allowed).toBe(true)
    expect((await at(1101)).allowed).toBe(false)
  })
})
