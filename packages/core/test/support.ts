/**
 * @module Shared helpers for the core suites: a limiter on a MemoryStore with a manual clock, and
 * compact shapes for exact decision assertions. Nothing here sleeps or reads the wall clock.
 */
import {
  type CallOptions,
  createLimiter,
  type Decision,
  fixedWindow,
  type Limiter,
  leakyBucket,
  MemoryStore,
  type RuleInput,
  slidingLog,
  slidingWindow,
  tokenBucket,
  warmUp,
} from '@sluice/core'

/** The figures of a decision that a trace asserts on. */
export interface Figures {
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  waitMs: number
}

export function figures(d: Decision): Figures {
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    waitMs: d.waitMs,
  }
}

/** An admitted call's figures. */
export function admitted(remaining: number, resetMs: number, waitMs = 0): Figures {
  return { allowed: true, remaining, resetMs, retryAfterMs: 0, waitMs }
}

/** A denied call's figures. */
export function denied(remaining: number, resetMs: number, retryAfterMs: number): Figures {
  return { allowed: false, remaining, resetMs, retryAfterMs, waitMs: 0 }
}

export interface Harness {
  clock: { now: number }
  store: MemoryStore
  limiter: Limiter
  /** Sets the clock to `t` and consumes; returns the decision's figures. */
  at(t: number, options?: CallOptions & { key?: string }): Promise<Figures>
  /** Sets the clock to `t` and peeks; returns the decision's figures. */
  peekAt(t: number, options?: CallOptions & { key?: string }): Promise<Figures>
}

/** A limiter over `rules` on a fresh MemoryStore whose clock the test moves by hand. */
export function harness(rules: readonly RuleInput[], start = 0): Harness {
  const clock = { now: start }
  const store = new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 })
  const limiter = createLimiter({ rules, store })
  return {
    clock,
    store,
    limiter,
    async at(t, options = {}) {
      clock.now = t
      const { key = 'k', ...call } = options
      return figures(await limiter.consume(key, call))
    },
    async peekAt(t, options = {}) {
      clock.now = t
      const { key = 'k', ...call } = options
      return figures(await limiter.peek(key, call))
    },
  }
}

/** What `fn` throws; fails the test when it returns. */
export function catchError(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

/** Rules of each refundable kind that admit 3 calls in 1100–1120 after one at 100, and no 4th by 1160. */
export const LATE_REFUND_RULES: Record<string, RuleInput> = {
  fixedWindow: fixedWindow({ limit: 3, windowMs: 1000 }),
  slidingLog: slidingLog({ limit: 3, windowMs: 1000 }),
  slidingWindow: slidingWindow({ limit: 3, windowMs: 1000, buckets: 10 }),
  tokenBucket: tokenBucket({ capacity: 3, refillPerSecond: 3 }),
  leakyBucket: leakyBucket({ ratePerSecond: 3, maxQueueMs: 700 }),
  warmUp: warmUp({ ratePerSecond: 3, warmUpMs: 1000, coldFactor: 1, maxQueueMs: 700 }),
}

/** Meters that admit a call whose slot is free whatever its cost (issue 24: cost 2 threw at request time). */
export const WEIGHTED_METERS: Record<string, RuleInput> = {
  leakyBucket: leakyBucket({ ratePerSecond: 1 }),
  warmUp: warmUp({ ratePerSecond: 1, warmUpMs: 1000 }),
}

/** Rules whose penalties leave a wait: at 1 a second, a penalty of 1e14 would wait about 1e17 ms. */
export const HUGE_PENALTY_RULES: Record<string, RuleInput> = {
  tokenBucket: tokenBucket({ capacity: 1, refillPerSecond: 1 }),
  ...WEIGHTED_METERS,
}
