/**
 * Issue 24's store faults in the memory store, each pinned by a test named for what broke, on a manual
 * clock: late refunds that took a newer call's units, weighted calls refused by meters, huge penalties.
 * The Redis store's side of the same traces is in packages/redis/test/redis-trust.test.ts.
 */
import { createLimiter, type Decision, fixedWindow, MemoryStore, type RuleInput } from '@sluice/core'
import { describe, expect, it } from 'vitest'
import { HUGE_PENALTY_RULES, LATE_REFUND_RULES, WEIGHTED_METERS } from './support.ts'

function onClock(rules: readonly RuleInput[]) {
  const clock = { now: 0 }
  const limiter = createLimiter({
    rules,
    store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }),
  })
  const at = (t: number, cost = 1): Promise<Decision> => {
    clock.now = t
    return limiter.consume('k', { cost })
  }
  const move = (t: number) => {
    clock.now = t
  }
  return { limiter, at, move }
}

describe('issue 24 in the memory store', () => {
  describe.each(Object.keys(LATE_REFUND_RULES))('%s', (kind) => {
    it('a late refund does not let an extra call in (the issue trace: 100, 1100–1120, refund at 1150, 1160 denied)', async () => {
      const { limiter, at, move } = onClock([LATE_REFUND_RULES[kind]!])
      const first = await at(100)
      expect(first.allowed).toBe(true)
      expect([(await at(1100)).allowed, (await at(1110)).allowed, (await at(1120)).allowed]).toEqual([
        true,
        true,
        true,
      ])
      move(1150)
      // The decision read back from JSON, as a request handler or a queue would keep it.
      await limiter.refund('k', { decision: JSON.parse(JSON.stringify(first)) })
      const late = await at(1160)
      expect(late.allowed).toBe(false)
    })

    it('a refund that names its call still gives its units back while they count', async () => {
      const { limiter, at, move } = onClock([LATE_REFUND_RULES[kind]!])
      await at(1100)
      await at(1110)
      const third = await at(1120)
      expect((await at(1121)).allowed).toBe(false)
      move(1130)
      await limiter.refund('k', { decision: third })
      expect((await at(1130)).allowed).toBe(true)
      expect((await at(1131)).allowed).toBe(false)
    })
  })

  describe.each(Object.keys(WEIGHTED_METERS))('%s with maxQueueMs 0', (kind) => {
    it('admits a weighted call (cost 2) on a fresh key instead of throwing InvalidCostError', async () => {
      const { at } = onClock([WEIGHTED_METERS[kind]!])
      const first = await at(100, 2)
      expect([first.allowed, first.waitMs, first.reason]).toEqual([true, 0, 'rules'])
      // Its slot was free; what follows waits as DESIGN's formulas say.
      expect(await at(100)).toMatchObject({ allowed: false })
    })
  })

  describe.each(Object.keys(HUGE_PENALTY_RULES))('%s', (kind) => {
    it('refuses a penalty whose wait would pass 2^50 ms with a coded error, writing nothing', async () => {
      const { limiter, at } = onClock([HUGE_PENALTY_RULES[kind]!])
      await at(100)
      const before = await limiter.peek('k')
      await expect(limiter.penalize('k', { cost: 1e14 })).rejects.toMatchObject({
        code: 'ERR_SLUICE_INVALID_COST',
      })
      expect(await limiter.peek('k')).toEqual(before)
    })
  })

  it('a custom store answering [] makes consume fail with a coded store error, not a TypeError', async () => {
    const store = { apply: () => [], reset: () => {} }
    const rules = [fixedWindow({ limit: 3, windowMs: 1000 })]
    const strict = createLimiter({ rules, store, onStoreError: 'throw' })
    await expect(strict.consume('k')).rejects.toMatchObject({ code: 'ERR_SLUICE_STORE' })
    await expect(Promise.resolve(strict.consumeNow('k'))).rejects.toMatchObject({ code: 'ERR_SLUICE_STORE' })
    const lenient = createLimiter({ rules, store: { apply: async () => [], reset: () => {} } })
    expect(await lenient.consume('k')).toMatchObject({ allowed: true, reason: 'store-error' })
  })
})
