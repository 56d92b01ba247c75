/**
 * overload(): every behaviour on a manual clock with injected signals: the formulas, cold start, critical
 * headroom, the trigger read once per bucket, idempotent `done`, the options' errors, and a reference model
 * written from docs/design/overload.md's formulas checked against the guard on random traces.
 */
import { ErrorCode, type OverloadSignals, type OverloadState, overload } from '@sluice/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

function rig(options: { windowMs?: number; buckets?: number; criticalHeadroom?: number } = {}) {
  let now = 0
  let signal: OverloadSignals = { eventLoopDelayMs: 0, utilization: 0 }
  let reads = 0
  const guard = overload({
    maxEventLoopDelayMs: 100,
    maxUtilization: 0.9,
    ...options,
    clock: () => now,
    signals: () => {
      reads++
      return signal
    },
  })
  return {
    guard,
    at(t: number) {
      now = t
    },
    overloaded(on: boolean) {
      signal = { eventLoopDelayMs: on ? 150 : 10, utilization: 0.5 }
    },
    busy(utilization: number) {
      signal = { eventLoopDelayMs: 0, utilization }
    },
    get reads() {
      return reads
    },
  }
}

/** Admits and completes `n` requests, each taking `rtMs`, starting at `t` (all in the same bucket). */
function complete(r: ReturnType<typeof rig>, t: number, n: number, rtMs: number): void {
  for (let i = 0; i < n; i++) {
    r.at(t)
    const ticket = r.guard.enter()
    if (!ticket.admitted) throw new Error('expected admission')
    r.at(t + rtMs)
    ticket.done()
  }
}

describe('overload: the formulas', () => {
  it('estimates maxPass × minRt / 1000 from the live buckets, scaled to a second, and sheds past it', () => {
    const r = rig()
    // Bucket [0, 100): 20 completions of 10 ms each. maxPass = 20 × 1000 / 100 = 200/s; minRt 10 ms.
    complete(r, 0, 20, 10)
    // Bucket [100, 200): 5 completions of 40 ms: fewer, slower: neither figure moves.
    complete(r, 100, 5, 40)
    r.overloaded(true)
    r.at(250)
    expect(r.guard.state()).toEqual({ inFlight: 0, maxPass: 200, minRt: 10, estimate: 2, triggered: true })
    const first = r.guard.enter()
    const second = r.guard.enter()
    const third = r.guard.enter()
    expect([first.admitted, second.admitted, third.admitted]).toEqual([true, true, false])
    expect(third).toEqual({ admitted: false, retryAfterMs: 100 })
    expect(r.guard.state().inFlight).toBe(2)
  })

  it('does not round the estimate: 12.5 admits a 13th request in flight and sheds the 14th', () => {
    const r = rig()
    // 50 completions in one bucket of 100 ms (500/s), each 25 ms: estimate 500 × 25 / 1000 = 12.5.
    complete(r, 0, 50, 25)
    r.overloaded(true)
    r.at(300)
    expect(r.guard.state().estimate).toBe(12.5)
    const admitted = Array.from({ length: 14 }, () => r.guard.enter().admitted)
    expect(admitted.filter(Boolean)).toHaveLength(13)
    expect(admitted[13]).toBe(false)
  })

  it('never estimates below 1: one request in flight at a time when the server completes almost nothing', () => {
    const r = rig()
    complete(r, 0, 1, 1) // 10/s × 1 ms = 0.01
    r.overloaded(true)
    r.at(200)
    expect(r.guard.state().estimate).toBe(1)
    const first = r.guard.enter()
    expect(first.admitted).toBe(true)
    expect(r.guard.enter().admitted).toBe(false)
    if (first.admitted) first.done()
    expect(r.guard.enter().admitted).toBe(true)
  })

  it('counts inFlight before the request: with an estimate of 2, the third request in flight is shed', () => {
    const r = rig()
    complete(r, 0, 20, 10)
    r.overloaded(true)
    r.at(150)
    const tickets = [r.guard.enter(), r.guard.enter()]
    expect(r.guard.state().inFlight).toBe(2)
    expect(r.guard.enter().admitted).toBe(false)
    const [one] = tickets
    r.at(160) // done after 10 ms, as the others took: the estimate stays 2
    if (one?.admitted) one.done()
    expect(r.guard.enter().admitted).toBe(true)
    expect(r.guard.enter().admitted).toBe(false)
  })

  it('forgets buckets older than the window: live are the current one and the buckets − 1 before it', () => {
    const r = rig()
    complete(r, 0, 20, 10) // completions at t=10, bucket 0
    r.overloaded(true)
    r.at(999) // bucket 9: bucket 0 is still live
    expect(r.guard.state().maxPass).toBe(200)
    r.at(1000) // bucket 10: bucket 0 has left the window
    expect(r.guard.state()).toEqual({
      inFlight: 0,
      maxPass: 0,
      minRt: 0,
      estimate: Number.POSITIVE_INFINITY,
      triggered: true,
    })
  })

  it('follows every completion: the estimate grows as a bucket fills', () => {
    const r = rig()
    r.overloaded(true)
    complete(r, 0, 1, 20)
    expect(r.guard.state().estimate).toBe(1) // 10/s × 20 ms = 0.2
    complete(r, 20, 9, 20)
    expect(r.guard.state().maxPass).toBe(100)
    expect(r.guard.state().estimate).toBe(2) // 100/s × 20 ms
  })

  it('takes the latency from enter to done on the guard clock, in the bucket of done', () => {
    const r = rig()
    r.at(50)
    const ticket = r.guard.enter()
    r.at(130)
    if (ticket.admitted) ticket.done()
    expect(r.guard.state()).toMatchObject({ maxPass: 10, minRt: 80 })
  })
})

describe('overload: cold start, trigger, critical headroom', () => {
  it('sheds nothing with no completed request in the window (no evidence), however overloaded', () => {
    const r = rig()
    r.overloaded(true)
    const tickets = Array.from({ length: 500 }, () => r.guard.enter())
    expect(tickets.every((t) => t.admitted)).toBe(true)
    expect(r.guard.state()).toMatchObject({
      inFlight: 500,
      triggered: true,
      estimate: Number.POSITIVE_INFINITY,
    })
  })

  it('admits everything while no signal is over its threshold, whatever is in flight', () => {
    const r = rig()
    complete(r, 0, 20, 10)
    r.overloaded(false)
    r.at(150)
    expect(Array.from({ length: 50 }, () => r.guard.enter().admitted).every(Boolean)).toBe(true)
    expect(r.guard.state()).toMatchObject({ inFlight: 50, estimate: 2, triggered: false })
  })

  it('is triggered by utilization over maxUtilization alone', () => {
    const r = rig()
    complete(r, 0, 20, 10)
    r.busy(0.95)
    r.at(150)
    expect(r.guard.state().triggered).toBe(true)
    r.busy(0.9)
    r.at(250)
    expect(r.guard.state().triggered).toBe(false) // at the threshold is not over it
  })

  it('reads the signals at most once per bucket, at its first enter or state: a change shows from the next bucket', () => {
    const r = rig()
    complete(r, 0, 20, 10) // bucket 0: one read
    expect(r.reads).toBe(1)
    r.overloaded(true)
    r.at(150) // bucket 1
    const a = r.guard.enter()
    const b = r.guard.enter()
    expect(r.guard.enter().admitted).toBe(false)
    r.overloaded(false) // seen from the next bucket on
    r.at(199)
    expect(r.guard.enter().admitted).toBe(false)
    expect(r.guard.state().triggered).toBe(true)
    expect(r.reads).toBe(2)
    r.at(200)
    expect(r.guard.enter().admitted).toBe(true)
    expect(r.reads).toBe(3)
    expect([a.admitted, b.admitted]).toEqual([true, true])
  })

  it('gives critical requests criticalHeadroom times the room (1.5 by default)', () => {
    const r = rig()
    complete(r, 0, 20, 10) // estimate 2; critical room 3
    r.overloaded(true)
    r.at(150)
    expect(r.guard.enter().admitted).toBe(true)
    expect(r.guard.enter().admitted).toBe(true)
    expect(r.guard.enter().admitted).toBe(false)
    expect(r.guard.enter({ critical: true }).admitted).toBe(true)
    expect(r.guard.enter({ critical: true }).admitted).toBe(false)
    expect(r.guard.enter({ critical: false }).admitted).toBe(false)
  })

  it('takes criticalHeadroom as given: 4 gives critical requests four times the room', () => {
    const r = rig({ criticalHeadroom: 4 })
    complete(r, 0, 20, 10)
    r.overloaded(true)
    r.at(150)
    const critical = Array.from({ length: 10 }, () => r.guard.enter({ critical: true }).admitted)
    expect(critical.filter(Boolean)).toHaveLength(8)
  })

  it('makes done() idempotent: a second call neither lowers inFlight nor counts a completion', () => {
    const r = rig()
    const ticket = r.guard.enter()
    const other = r.guard.enter()
    r.at(10)
    if (!ticket.admitted) throw new Error('expected admission')
    ticket.done()
    ticket.done()
    expect(r.guard.state()).toMatchObject({ inFlight: 1, maxPass: 10 })
    expect(other.admitted).toBe(true)
  })

  it('answers a shed request with one bucket of its own window as retryAfterMs', () => {
    const r = rig({ windowMs: 2000, buckets: 4 })
    complete(r, 0, 1, 1)
    r.overloaded(true)
    r.at(600)
    r.guard.enter()
    expect(r.guard.enter()).toEqual({ admitted: false, retryAfterMs: 500 })
    expect(r.guard.bucketMs).toBe(500)
  })

  it('works with its acts taken off the guard, and calls clock and signals as plain functions', () => {
    let now = 0
    const thisSeen: unknown[] = []
    const guard = overload({
      maxEventLoopDelayMs: 100,
      clock(this: unknown) {
        thisSeen.push(this)
        return now
      },
      signals(this: unknown) {
        thisSeen.push(this)
        return { eventLoopDelayMs: 150, utilization: 0 }
      },
    })
    const { enter, state, close } = guard
    const ticket = enter()
    if (!ticket.admitted) throw new Error('expected admission')
    now = 10
    ticket.done()
    enter()
    expect(enter()).toEqual({ admitted: false, retryAfterMs: 100 })
    expect(state()).toEqual({ inFlight: 1, maxPass: 10, minRt: 10, estimate: 1, triggered: true })
    close()
    expect(new Set(thisSeen)).toEqual(new Set([undefined]))
  })

  it('reports the status to answer with (503 by default) and the critical function', () => {
    const critical = (req: { url: string }) => req.url === '/health'
    const guard = overload({ maxEventLoopDelayMs: 50, status: 429, critical, signals: idle })
    expect(guard.status).toBe(429)
    expect(guard.critical).toBe(critical)
    expect(overload({ maxUtilization: 0.5, signals: idle }).status).toBe(503)
  })
})

function idle(): OverloadSignals {
  return { eventLoopDelayMs: 0, utilization: 0 }
}

describe('overload: options', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['no trigger at all', {}, 'overload.maxEventLoopDelayMs'],
    ['a delay of 0', { maxEventLoopDelayMs: 0 }, 'overload.maxEventLoopDelayMs'],
    ['a delay that is a string', { maxEventLoopDelayMs: '100' }, 'overload.maxEventLoopDelayMs'],
    ['utilization above 1', { maxUtilization: 1.5 }, 'overload.maxUtilization'],
    ['utilization of 0', { maxUtilization: 0 }, 'overload.maxUtilization'],
    ['utilization NaN', { maxUtilization: Number.NaN }, 'overload.maxUtilization'],
    ['headroom below 1', { maxEventLoopDelayMs: 100, criticalHeadroom: 0.5 }, 'overload.criticalHeadroom'],
    [
      'headroom infinite',
      { maxEventLoopDelayMs: 100, criticalHeadroom: Infinity },
      'overload.criticalHeadroom',
    ],
    ['critical not a function', { maxEventLoopDelayMs: 100, critical: true }, 'overload.critical'],
    ['status 200', { maxEventLoopDelayMs: 100, status: 200 }, 'overload.status'],
    ['status 600', { maxEventLoopDelayMs: 100, status: 600 }, 'overload.status'],
    ['windowMs 0', { maxEventLoopDelayMs: 100, windowMs: 0 }, 'overload.windowMs'],
    ['windowMs fractional', { maxEventLoopDelayMs: 100, windowMs: 10.5 }, 'overload.windowMs'],
    ['buckets not dividing', { maxEventLoopDelayMs: 100, windowMs: 1000, buckets: 3 }, 'overload.buckets'],
    ['buckets 0', { maxEventLoopDelayMs: 100, buckets: 0 }, 'overload.buckets'],
    ['clock not a function', { maxEventLoopDelayMs: 100, clock: 5 }, 'overload.clock'],
    ['signals not a function', { maxEventLoopDelayMs: 100, signals: {} }, 'overload.signals'],
    ['an unknown option', { maxEventLoopDelayMs: 100, maxHeap: 1 }, 'overload.maxHeap'],
  ]
  it.each(cases)('rejects %s, naming the option', (_what, options, option) => {
    let caught: unknown
    try {
      overload(options as never)
    } catch (error) {
      caught = error
    }
    expect(caught).toMatchObject({ code: ErrorCode.INVALID_OPTION, option })
  })

  it('rejects a missing options object', () => {
    expect(() => overload(undefined as never)).toThrow(expect.objectContaining({ option: 'overload' }))
  })

  it('starts and stops its own event-loop monitor when no signals are given', () => {
    const guard = overload({ maxEventLoopDelayMs: 1000 })
    expect(guard.state()).toMatchObject({ inFlight: 0, triggered: false })
    guard.close()
    guard.close()
  })
})

/**
 * The reference: docs/design/overload.md's formulas from scratch on every question, from a log of every
 * completion (time and latency) and of the buckets in which the signals were read.
 */
class Model {
  readonly completions: { t: number; rt: number }[] = []
  inFlight = 0
  triggered = false
  readBucket = Number.NaN
  constructor(
    readonly windowMs: number,
    readonly buckets: number,
    readonly headroom: number,
    readonly maxDelay: number,
  ) {}

  get bucketMs(): number {
    return this.windowMs / this.buckets
  }

  read(now: number, signal: OverloadSignals): void {
    const b = Math.floor(now / this.bucketMs)
    if (b !== this.readBucket) {
      this.readBucket = b
      this.triggered = signal.eventLoopDelayMs > this.maxDelay
    }
  }

  state(now: number): OverloadState {
    const current = Math.floor(now / this.bucketMs)
    const byBucket = new Map<number, { n: number; rt: number }>()
    for (const c of this.completions) {
      const b = Math.floor(c.t / this.bucketMs)
      if (b <= current - this.buckets || b > current) continue
      const entry = byBucket.get(b) ?? { n: 0, rt: 0 }
      entry.n++
      entry.rt += c.rt
      byBucket.set(b, entry)
    }
    if (byBucket.size === 0) {
      return { inFlight: this.inFlight, maxPass: 0, minRt: 0, estimate: Infinity, triggered: this.triggered }
    }
    const maxPass = Math.max(...[...byBucket.values()].map((e) => (e.n * 1000) / this.bucketMs))
    const minRt = Math.min(...[...byBucket.values()].map((e) => e.rt / e.n))
    return {
      inFlight: this.inFlight,
      maxPass,
      minRt,
      estimate: Math.max(1, (maxPass * minRt) / 1000),
      triggered: this.triggered,
    }
  }

  enter(now: number, critical: boolean): boolean {
    const s = this.state(now)
    const admit = !s.triggered || s.inFlight < (critical ? s.estimate * this.headroom : s.estimate)
    if (admit) this.inFlight++
    return admit
  }
}

type Op =
  | { op: 'advance'; ms: number }
  | { op: 'enter'; critical: boolean }
  | { op: 'done'; pick: number }
  | { op: 'state' }
  | { op: 'signal'; delayMs: number }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 2500 }))
      .map((ms) => ({ op: 'advance' as const, ms })),
  },
  { weight: 6, arbitrary: fc.boolean().map((critical) => ({ op: 'enter' as const, critical })) },
  { weight: 5, arbitrary: fc.nat(1000).map((pick) => ({ op: 'done' as const, pick })) },
  { weight: 1, arbitrary: fc.constant({ op: 'state' as const }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(0, 99, 100, 101, 500).map((delayMs) => ({ op: 'signal' as const, delayMs })),
  },
)

describe('overload: the reference model on random traces', () => {
  it('agrees with the model on every ticket and every state', () => {
    fc.assert(
      fc.property(
        fc.record({
          shape: fc.constantFrom(
            { windowMs: 1000, buckets: 10 },
            { windowMs: 1000, buckets: 1 },
            { windowMs: 300, buckets: 3 },
            { windowMs: 50, buckets: 5 },
          ),
          headroom: fc.constantFrom(1, 1.5, 2.25),
          ops: fc.array(opArb, { minLength: 1, maxLength: 250 }),
        }),
        ({ shape: { windowMs, buckets }, headroom, ops }) => {
          let now = 0
          let signal: OverloadSignals = { eventLoopDelayMs: 0, utilization: 0 }
          const model = new Model(windowMs, buckets, headroom, 100)
          const guard = overload({
            maxEventLoopDelayMs: 100,
            criticalHeadroom: headroom,
            windowMs,
            buckets,
            clock: () => now,
            signals: () => signal,
          })
          const open: { done(): void; enteredAt: number; finished: boolean }[] = []
          for (const step of ops) {
            if (step.op === 'advance') now += step.ms
            else if (step.op === 'signal') signal = { eventLoopDelayMs: step.delayMs, utilization: 0 }
            else if (step.op === 'state') {
              model.read(now, signal)
              expect(guard.state()).toEqual(model.state(now))
            } else if (step.op === 'enter') {
              model.read(now, signal)
              const expected = model.enter(now, step.critical)
              const ticket = guard.enter({ critical: step.critical })
              expect(ticket.admitted).toBe(expected)
              if (ticket.admitted) open.push({ done: ticket.done, enteredAt: now, finished: false })
              else expect(ticket.retryAfterMs).toBe(windowMs / buckets)
            } else if (open.length > 0) {
              // Done, sometimes twice: a ticket already done changes nothing.
              const ticket = open[step.pick % open.length]!
              if (!ticket.finished) {
                ticket.finished = true
                model.inFlight--
                model.completions.push({ t: now, rt: now - ticket.enteredAt })
              }
              ticket.done()
            }
          }
          model.read(now, signal)
          expect(guard.state()).toEqual(model.state(now))
        },
      ),
      { seed: 31, numRuns: 300 },
    )
  })
})
