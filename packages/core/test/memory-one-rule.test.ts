/**
 * A limiter on a memory store answers a one-rule call by the store's one-rule path, without the list `apply`
 * answers: every Decision must be the one `apply` and `compose` give, field for field, for every rule kind.
 * A store whose `apply` is not the memory store's own (a subclass, a spy) goes by `apply`, as before.
 */
import {
  concurrency,
  createLimiter,
  type Decision,
  fixedWindow,
  leakyBucket,
  MemoryStore,
  type Rule,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'
import { describe, expect, it, vi } from 'vitest'

/** A memory store that answers every call by `apply`, as any store other than the memory store itself. */
class ListStore extends MemoryStore {
  override apply(...args: Parameters<MemoryStore['apply']>): ReturnType<MemoryStore['apply']> {
    return super.apply(...args)
  }
}

const RULES: [string, () => Rule][] = [
  ['fixedWindow', () => fixedWindow({ limit: 3, windowMs: 1000 }) as Rule],
  ['slidingLog', () => slidingLog({ limit: 3, windowMs: 1000 }) as Rule],
  ['slidingWindow', () => slidingWindow({ limit: 3, windowMs: 1000, buckets: 4 }) as Rule],
  ['tokenBucket', () => tokenBucket({ capacity: 3, refillPerSecond: 2 }) as Rule],
  ['leakyBucket', () => leakyBucket({ ratePerSecond: 4, maxQueueMs: 600 })],
  ['warmUp', () => warmUp({ ratePerSecond: 4, warmUpMs: 2000, maxQueueMs: 600 })],
  ['concurrency', () => concurrency({ limit: 2, leaseMs: 700 }) as Rule],
]

/** A decision as data, its lease (an id of its own per store) told only by whether it has one. */
function plain(d: Decision): unknown {
  const { lease, ...rest } = d
  return {
    ...rest,
    lease: lease === undefined ? undefined : 'lease',
    rules: d.rules.map(({ lease, ...r }) => ({ ...r, lease: lease === undefined ? undefined : 'lease' })),
  }
}

describe('memory store one-rule path', () => {
  it.each(RULES)(
    '%s: a limiter on a memory store decides every call as apply and compose do',
    async (_, rule) => {
      let now = 1_000_000
      const clock = () => now
      const fast = createLimiter({ rules: [rule()], store: new MemoryStore({ clock }) })
      const listed = createLimiter({ rules: [rule()], store: new ListStore({ clock }) })
      const steps: [number, 'consume' | 'peek', number][] = [
        [0, 'consume', 1],
        [0, 'consume', 2],
        [10, 'peek', 1],
        [20, 'consume', 1],
        [30, 'consume', 1],
        [250, 'consume', 1],
        [400, 'peek', 2],
        [999, 'consume', 1],
        [1000, 'consume', 1],
        [1001, 'consume', 2],
        [1700, 'consume', 1],
        [5000, 'peek', 1],
        [5000, 'consume', 1],
      ]
      for (const [at, mode, cost] of steps) {
        now = 1_000_000 + at
        for (const key of ['a', 'b']) {
          const a = await fast[mode](key, { cost })
          const b = await listed[mode](key, { cost })
          expect(plain(a)).toStrictEqual(plain(b))
          expect(Object.keys(a)).toStrictEqual(Object.keys(b))
          // The decision is plain data either way: the counted time survives a JSON round trip.
          expect(JSON.parse(JSON.stringify(a)).countedAt).toBe(a.countedAt)
        }
      }
    },
  )

  it('a decision from the one-rule path refunds its own call (countedAt names it)', async () => {
    let now = 5_000
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 2, windowMs: 1000 })],
      store: new MemoryStore({ clock: () => now }),
    })
    const first = await limiter.consume('k')
    expect(first.countedAt).toBe(5_000)
    await limiter.consume('k')
    expect((await limiter.peek('k', { cost: 1 })).allowed).toBe(false)
    await limiter.refund('k', { decision: first })
    // One unit back: a peek of one is admitted, and would leave none.
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 0 })
    now = 6_000
    // The window the call was counted in is over: nothing of a newer window's is given back.
    expect((await limiter.consume('k')).remaining).toBe(1)
    await limiter.refund('k', { decision: first })
    expect((await limiter.consume('k')).remaining).toBe(0)
    expect((await limiter.peek('k')).allowed).toBe(false)
  })

  it('a spy put on the store after the limiter was built still sees every call', async () => {
    const store = new MemoryStore()
    const limiter = createLimiter({ rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store })
    await limiter.consume('k')
    const apply = vi.spyOn(store, 'apply')
    await limiter.consume('k')
    await limiter.peek('k')
    expect(apply).toHaveBeenCalledTimes(2)
    // Two counted: a peek of one would leave two.
    expect((await limiter.peek('k')).remaining).toBe(2)
  })

  it('a store error on the one-rule path goes to onStoreError', async () => {
    const store = new MemoryStore({
      clock: () => {
        throw new Error('clock broke')
      },
    })
    const allow = createLimiter({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], store })
    expect((await allow.consume('k')).reason).toBe('store-error')
    const strict = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 1000 })],
      store,
      prefix: 'strict',
      onStoreError: 'throw',
    })
    await expect(strict.consume('k')).rejects.toMatchObject({ code: 'ERR_SLUICE_STORE' })
  })
})
