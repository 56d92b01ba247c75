/**
 * The Redis store's record of rule kinds (packages/redis/src/kinds.ts) against the Lua it names. Which kinds
 * may be prefetched used to be found by searching a kind's chunk for its `<kind>Return` function, so renaming
 * that function silently turned prefetch off. Each trait is now a declared field; here every declaration is
 * held to its chunk, so a renamed or missing function fails this suite instead of changing what the store does.
 */
import {
  concurrency,
  fixedWindow,
  leakyBucket,
  quota,
  type Rule,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { REDIS_KINDS } from '../src/kinds.ts'
import { Plans } from '../src/plans.ts'

/** Whether `chunk` defines the top-level function `name`. */
function defines(chunk: string, name: string): boolean {
  return chunk.split('\n').some((line) => line.startsWith(`local function ${name}(`))
}

describe('the Redis record of rule kinds', () => {
  for (const [kind, entry] of Object.entries(REDIS_KINDS)) {
    it(`${kind}: a declared trait names a function its chunk defines, and an undeclared one names none (a renamed Return no longer turns prefetch off silently)`, () => {
      expect(defines(entry.chunk, `${kind}Decide`)).toBe(true)
      expect(defines(entry.chunk, `${kind}Admit`)).toBe(true)
      expect(defines(entry.chunk, `${kind}Return`)).toBe(entry.prefetch)
      expect(defines(entry.chunk, `${kind}Consume`)).toBe(entry.consumesInOneGo)
      expect(defines(entry.chunk, `${kind}Unqueue`)).toBe(entry.mark === 'queue')
      expect(defines(entry.chunk, `${kind}Release`)).toBe(entry.mark === 'lease')
      expect(defines(entry.chunk, `${kind}Outside`)).toBe(entry.period)
      // A kind with a consume written straight down has its script.
      expect(entry.consume === undefined || entry.consume.includes('KEYS[1]')).toBe(true)
    })
  }

  it('a plan is batchable exactly when every rule is of a kind declared prefetchable, and holds leases exactly with a concurrency rule', () => {
    const plans = new Plans()
    const one: [Rule, boolean, boolean][] = [
      [fixedWindow({ limit: 5, windowMs: 1000 }) as Rule, true, false],
      [slidingLog({ limit: 5, windowMs: 1000 }) as Rule, true, false],
      [slidingWindow({ limit: 5, windowMs: 1000 }) as Rule, true, false],
      [tokenBucket({ capacity: 5, refillPerSecond: 1 }) as Rule, true, false],
      [leakyBucket({ ratePerSecond: 5 }), false, false],
      [concurrency({ limit: 5 }) as Rule, false, true],
      [warmUp({ ratePerSecond: 5, warmUpMs: 1000 }), false, false],
      [quota({ limit: 5, per: 'day' }) as Rule, false, false],
    ]
    for (const [rule, batchable, leases] of one) {
      expect(plans.of([rule])).toMatchObject({ batchable, leases })
    }
    const mixed = plans.of([one[0]![0], one[5]![0]])
    expect(mixed).toMatchObject({ batchable: false, leases: true })
    expect(plans.of([one[0]![0], one[3]![0]])).toMatchObject({ batchable: true, leases: false })
  })
})
