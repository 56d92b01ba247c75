/**
 * The Redis store's per-call timeouts (packages/redis/src/deadlines.ts): one timer for every call, and a
 * queue that lets go of settled calls as new ones start, so a busy store does not keep a timeout's worth
 * of replies alive. A manual clock and fake timers: nothing here waits.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { Deadlines } from '../src/deadlines.ts'

describe('Deadlines', () => {
  let now = 0
  const timedOut = new Error('timed out')
  beforeEach(() => {
    now = 1_000
    // Timers only: a timeout hands over to a real setImmediate (after the loop's poll phase).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('keeps no settled call once the next starts, one call at a time (it kept every call of a timeout)', () => {
    const deadlines = new Deadlines(
      1_000,
      () => now,
      () => timedOut,
    )
    for (let i = 0; i < 100; i++) {
      const call = deadlines.start<number>()
      call.resolve(i)
      now += 1
    }
    expect(deadlines.held).toBe(1)
  })

  it('lets go of the settled calls ahead of one in flight, and still times that one out', async () => {
    const deadlines = new Deadlines(
      1_000,
      () => now,
      () => timedOut,
    )
    const first = deadlines.start<string>()
    const slow = deadlines.start<string>()
    const third = deadlines.start<string>()
    first.resolve('first')
    third.resolve('third')
    // `first` goes; `slow`, unsettled, and what follows it stay until `slow` settles or times out.
    const last = deadlines.start<string>()
    expect(deadlines.held).toBe(3)
    const settled = Promise.allSettled([first.promise, slow.promise, third.promise, last.promise])
    now += 1_000
    await vi.advanceTimersByTimeAsync(1_000)
    expect(await settled).toEqual([
      { status: 'fulfilled', value: 'first' },
      { status: 'rejected', reason: timedOut },
      { status: 'fulfilled', value: 'third' },
      { status: 'rejected', reason: timedOut },
    ])
    expect(deadlines.held).toBe(0)
  })
})
