/**
 * overload(): every behaviour on a manual clock with injected signals: the formulas, cold start, critical
 * headroom, the trigger decided once per bucket, the pile-up signal of a slow dependency and the best
 * latency's slow memory, idempotent `done`, the options' errors, and a reference model written from
 * docs/design/overload.md's formulas checked against the guard on random traces.
 */
import { ErrorCode, type OverloadSignals, type OverloadState, overload } from '@sluice/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

function rig(
  options: { windowMs?: number; buckets?: number; criticalHeadroom?: number; bestRtDecayMs?: number } = {},
) {
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
    // Bucket [100, 200): 5 completions of 10 ms: fewer, so maxPass does not move.
    complete(r, 100, 5, 10)
    r.overloaded(true)
    r.at(250)
    expect(r.guard.state()).toEqual({
      inFlight: 0,
      maxPass: 200,
      minRt: 10,
      bestRt: 10,
      meanRt: 10,
      estimate: 2,
      triggered: true,
    })
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
    r.at(1000) // bucket 10: bucket 0 has left the window; the best latency is remembered longer
    expect(r.guard.state()).toEqual({
      inFlight: 0,
      maxPass: 0,
      minRt: 0,
      bestRt: 10,
      meanRt: 0,
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
    expect(state()).toEqual({
      inFlight: 1,
      maxPass: 10,
      minRt: 10,
      bestRt: 10,
      meanRt: 10,
      estimate: 1,
      triggered: true,
    })
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

/**
 * A server whose requests wait on a pool of `slots` connections, each held `serviceMs` (a slow dependency):
 * the guard's clock moves 1 ms a step; every `everyMs` ms `arrivals` requests arrive and ask the guard; an
 * admitted one waits its turn for a connection (first come, first served) and is done when it gives it back.
 * The event loop stays idle throughout: only the pile-up can trigger the guard.
 */
function slowDependency(options: { slots: number; serviceMs: number; decayMs?: number }) {
  let now = 0
  let reads = 0
  const guard = overload({
    maxEventLoopDelayMs: 100,
    maxUtilization: 0.9,
    ...(options.decayMs === undefined ? {} : { bestRtDecayMs: options.decayMs }),
    clock: () => now,
    signals: () => {
      reads++
      return { eventLoopDelayMs: 3, utilization: 0.05 }
    },
  })
  const waiting: { done(): void; arrived: number }[] = []
  const serving: { done(): void; arrived: number; until: number }[] = []
  const run = (from: number, to: number, everyMs: number, arrivals: number) => {
    const figures = {
      offered: 0,
      shed: 0,
      served: 0,
      latencies: [] as { arrived: number; ms: number }[],
      triggeredAt: -1,
    }
    for (now = from; now < to; now++) {
      for (let i = serving.length - 1; i >= 0; i--) {
        const request = serving[i]!
        if (request.until > now) continue
        serving.splice(i, 1)
        request.done()
        figures.served++
        figures.latencies.push({ arrived: request.arrived, ms: now - request.arrived })
      }
      while (serving.length < options.slots && waiting.length > 0) {
        serving.push({ ...waiting.shift()!, until: now + options.serviceMs })
      }
      if (now % everyMs !== 0) continue
      for (let i = 0; i < arrivals; i++) {
        figures.offered++
        const ticket = guard.enter()
        if (figures.triggeredAt < 0 && guard.state().triggered) figures.triggeredAt = now
        if (!ticket.admitted) {
          figures.shed++
          continue
        }
        if (serving.length < options.slots)
          serving.push({ done: ticket.done, arrived: now, until: now + options.serviceMs })
        else waiting.push({ done: ticket.done, arrived: now })
      }
    }
    return figures
  }
  return {
    guard,
    run,
    get reads() {
      return reads
    },
  }
}

describe('overload: a slow dependency (requests pile up in flight, the event loop idle)', () => {
  // A pool of 10 connections held 100 ms each: the server sustains 100 requests/s, 10 in flight.
  const pool = { slots: 10, serviceMs: 100 }

  it('does not trigger for a server at its capacity with steady latency', () => {
    const server = slowDependency(pool)
    // One request every 10 ms (100/s, 1×) for 20 s: every one served in 100 ms, none shed.
    const steady = server.run(0, 20_000, 10, 1)
    expect(steady).toMatchObject({ offered: 2000, shed: 0, served: 1990, triggeredAt: -1 })
    expect(new Set(steady.latencies.map((l) => l.ms))).toEqual(new Set([100]))
    expect(server.guard.state()).toEqual({
      inFlight: 10,
      maxPass: 100,
      minRt: 100,
      bestRt: 100,
      meanRt: 100,
      estimate: 10,
      triggered: false,
    })
  })

  it("sheds a slow dependency's pile-up at 3× its capacity though the event loop stays idle", () => {
    const server = slowDependency(pool)
    server.run(0, 5000, 10, 1)
    // Three requests every 10 ms (300/s, 3×) for 20 s.
    const step = server.run(5000, 25_000, 10, 3)
    // In flight passes the estimate at once; the mean latency of the last two buckets passes 2 × 100 ms
    // with the completions of [5200, 5300), and the guard sheds from the bucket after.
    expect(step.triggeredAt).toBe(5300)
    // The pool's capacity is served (100/s) and the rest shed at once: 2000 and 4000 of 6000.
    expect(step).toMatchObject({ offered: 6000, served: 2000, shed: 4000 })
    // The queue let in before the trigger waits 600 ms at most; once it has drained, no request waits for
    // a connection: where no guard would let the wait grow by 2 ms every ms, to 40 s by the end.
    expect(Math.max(...step.latencies.map((l) => l.ms))).toBe(700)
    const later = step.latencies.filter((l) => l.arrived >= 6000).map((l) => l.ms)
    expect(new Set(later)).toEqual(new Set([100]))
    // The event loop's signals never said a thing, and were read once a bucket.
    expect(server.reads).toBe(250)
  })

  it('remembers the best latency for tens of seconds: the estimate does not follow the queue up', () => {
    const server = slowDependency(pool)
    server.run(0, 5000, 10, 1)
    server.run(5000, 25_000, 10, 3)
    // Twenty seconds of 3×: the best latency rose a little in the 300 ms before the trigger, not at all while
    // the guard was shedding (where the queue's latency would have raised it to 700 ms), and fell back to
    // 100 ms once the window held only the drained pool's completions. The room is the pool's, 10.
    expect(server.guard.state()).toMatchObject({ minRt: 100, bestRt: 100, estimate: 10, triggered: true })
  })
  it('needs no event-loop threshold: a guard given none reads no signals and sheds a pile-up alone', () => {
    let now = 0
    let reads = 0
    const guard = overload({
      clock: () => now,
      signals: () => {
        reads++
        return { eventLoopDelayMs: 1e6, utilization: 1 }
      },
    })
    for (let i = 0; i < 20; i++) {
      now = 0
      const ticket = guard.enter()
      now = 10
      if (ticket.admitted) ticket.done()
    } // 200/s, best 10 ms: estimate 2
    now = 200
    const slow = Array.from({ length: 6 }, () => guard.enter())
    now = 290
    for (const ticket of slow.slice(0, 2)) if (ticket.admitted) ticket.done() // 90 ms each
    now = 300
    expect(guard.state()).toMatchObject({ inFlight: 4, meanRt: 90, triggered: true })
    expect(guard.enter().admitted).toBe(false)
    expect(reads).toBe(0)
  })
})

describe('overload: the best latency (bestRt) decays as documented', () => {
  it('falls at once to a lower mean, and rises toward a higher one by 1 − e^(−elapsed / bestRtDecayMs) of the gap', () => {
    const r = rig({ bestRtDecayMs: 30_000 })
    complete(r, 0, 1, 100) // done at 100: the window's mean is 100 ms, the best 100 ms
    expect(r.guard.state()).toMatchObject({ bestRt: 100, meanRt: 100 })
    r.at(20_000) // no completion since: nothing moves
    expect(r.guard.state()).toMatchObject({ bestRt: 100, meanRt: 0, maxPass: 0 })
    // Done at 30 100, 30 s after the last completion, taking 200 ms: alone in the window, mean 200 ms.
    complete(r, 29_900, 1, 200)
    const risen = 100 + (200 - 100) * (1 - Math.exp(-30_000 / 30_000))
    expect(r.guard.state()).toMatchObject({ bestRt: risen, meanRt: 200, minRt: 200 })
    expect(risen).toBeCloseTo(163.21, 2)
    // Done at 30 150 in 50 ms: the window's mean is (200 + 50) / 2 = 125 ms, below the best: taken at once.
    complete(r, 30_100, 1, 50)
    expect(r.guard.state()).toMatchObject({ bestRt: 125, meanRt: 125, minRt: 125 })
  })

  it("never sizes the room by more than maxLatencyRatio × bestRt: the window's best may be a queue's", () => {
    const r = rig()
    complete(r, 0, 20, 10) // best 10 ms, 200/s: estimate 2
    // A second later the window holds only slow completions, 20 of 50 ms: the best barely rises.
    complete(r, 1200, 20, 50)
    const { minRt, bestRt, estimate } = r.guard.state()
    expect(minRt).toBe(50)
    expect(bestRt).toBe(10 + 40 * (1 - Math.exp(-1240 / 30_000)))
    // 200/s × min(50, 2 × 11.62) ms: 4.65 in flight, not the 10 the window's best alone would give.
    expect(estimate).toBe((200 * 2 * bestRt) / 1000)
    expect(estimate).toBeCloseTo(4.65, 2)
  })
})

function idle(): OverloadSignals {
  return { eventLoopDelayMs: 0, utilization: 0 }
}

describe('overload: options', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['a delay of 0', { maxEventLoopDelayMs: 0 }, 'overload.maxEventLoopDelayMs'],
    ['a delay that is a string', { maxEventLoopDelayMs: '100' }, 'overload.maxEventLoopDelayMs'],
    ['utilization above 1', { maxUtilization: 1.5 }, 'overload.maxUtilization'],
    ['utilization of 0', { maxUtilization: 0 }, 'overload.maxUtilization'],
    ['utilization NaN', { maxUtilization: Number.NaN }, 'overload.maxUtilization'],
    ['a latency ratio of 1', { maxLatencyRatio: 1 }, 'overload.maxLatencyRatio'],
    ['a latency ratio of Infinity', { maxLatencyRatio: Infinity }, 'overload.maxLatencyRatio'],
    ['a latency ratio that is a string', { maxLatencyRatio: '2' }, 'overload.maxLatencyRatio'],
    ['a decay of 0 ms', { bestRtDecayMs: 0 }, 'overload.bestRtDecayMs'],
    ['a decay of NaN', { bestRtDecayMs: Number.NaN }, 'overload.bestRtDecayMs'],
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
 * The reference: docs/design/overload.md's formulas computed from scratch on every question, from a log of every
 * completion (time and latency), with the few facts the guard carries from one moment to the next kept as
 * the docs state them: the bucket the trigger was decided in, whether a pile-up holds, and bestRt.
 */
class Model {
  readonly completions: { t: number; rt: number }[] = []
  inFlight = 0
  triggered = false
  piledUp = false
  shedSince = false
  decidedIn = Number.NaN
  bestRt = Infinity
  bestRtAt = 0
  constructor(
    readonly windowMs: number,
    readonly buckets: number,
    readonly headroom: number,
    readonly maxDelay: number,
    readonly latencyRatio: number,
    readonly decayMs: number,
  ) {}

  get bucketMs(): number {
    return this.windowMs / this.buckets
  }

  /** Completions by bucket, for the buckets from `from` to `to`. */
  byBucket(from: number, to: number): { n: number; rt: number }[] {
    const byBucket = new Map<number, { n: number; rt: number }>()
    for (const c of this.completions) {
      const b = Math.floor(c.t / this.bucketMs)
      if (b < from || b > to) continue
      const entry = byBucket.get(b) ?? { n: 0, rt: 0 }
      entry.n++
      entry.rt += c.rt
      byBucket.set(b, entry)
    }
    return [...byBucket.values()]
  }

  mean(from: number, to: number): number {
    const entries = this.byBucket(from, to)
    const n = entries.reduce((sum, e) => sum + e.n, 0)
    return n === 0 ? 0 : entries.reduce((sum, e) => sum + e.rt, 0) / n
  }

  read(now: number, signal: OverloadSignals): void {
    const b = Math.floor(now / this.bucketMs)
    if (b === this.decidedIn) return
    this.decidedIn = b
    const busy = signal.eventLoopDelayMs > this.maxDelay
    const { maxPass, meanRt } = this.state(now)
    this.piledUp =
      (this.piledUp && this.shedSince) ||
      (maxPass > 0 &&
        this.inFlight > Math.max(1, (maxPass * this.bestRt) / 1000) &&
        meanRt > this.latencyRatio * this.bestRt)
    this.shedSince = false
    this.triggered = busy || this.piledUp
  }

  state(now: number): OverloadState {
    const current = Math.floor(now / this.bucketMs)
    const live = this.byBucket(current - this.buckets + 1, current)
    const maxPass = live.length === 0 ? 0 : Math.max(...live.map((e) => (e.n * 1000) / this.bucketMs))
    const minRt = live.length === 0 ? 0 : Math.min(...live.map((e) => e.rt / e.n))
    const rt = Math.min(minRt, this.latencyRatio * this.bestRt)
    return {
      inFlight: this.inFlight,
      maxPass,
      minRt,
      bestRt: this.bestRt === Infinity ? 0 : this.bestRt,
      meanRt: this.mean(Math.max(current - 1, current - this.buckets + 1), current),
      estimate: maxPass === 0 ? Infinity : Math.max(1, (maxPass * rt) / 1000),
      triggered: this.triggered,
    }
  }

  enter(now: number, critical: boolean): boolean {
    const s = this.state(now)
    const admit = !s.triggered || s.inFlight < (critical ? s.estimate * this.headroom : s.estimate)
    if (admit) this.inFlight++
    else this.shedSince = true
    return admit
  }

  complete(now: number, rt: number): void {
    this.inFlight--
    this.completions.push({ t: now, rt })
    const current = Math.floor(now / this.bucketMs)
    const mean = this.mean(current - this.buckets + 1, current)
    if (mean <= this.bestRt) this.bestRt = mean
    else if (!this.piledUp) {
      const kept = Math.exp(-Math.max(0, now - this.bestRtAt) / this.decayMs)
      this.bestRt = this.bestRt + (mean - this.bestRt) * (1 - kept)
    }
    this.bestRtAt = now
  }
}

type Op =
  | { op: 'advance'; ms: number }
  | { op: 'enter'; critical: boolean }
  | { op: 'done'; pick: number }
  | { op: 'state' }
  | { op: 'signal'; delayMs: number }

/** Every act at random: long and short steps, requests done in any order, the signal changing. */
const anyActs: fc.Arbitrary<Op> = fc.oneof(
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

/** Requests arriving and done in turn, the oldest first, in short steps. */
function queue(enter: number, done: number): fc.Arbitrary<Op> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: 0, max: 20 }).map((ms) => ({ op: 'advance' as const, ms })) },
    { weight: enter, arbitrary: fc.boolean().map((critical) => ({ op: 'enter' as const, critical })) },
    { weight: done, arbitrary: fc.constant({ op: 'done' as const, pick: 0 }) },
    { weight: 1, arbitrary: fc.constant({ op: 'state' as const }) },
  )
}

/**
 * A queue building up, the event loop calm: first as many arrivals as completions, then three times as
 * many, so latency climbs while requests pile up (the pile-up signal's own ground).
 */
const queueActs = fc
  .tuple(
    fc.array(queue(4, 4), { minLength: 20, maxLength: 200, size: 'max' }),
    fc.array(queue(6, 2), { minLength: 20, maxLength: 300, size: 'max' }),
  )
  .map(([calm, step]) => [...calm, ...step])

describe('overload: the reference model on random traces', () => {
  it.each([
    ['every act at random', fc.array(anyActs, { minLength: 1, maxLength: 400, size: 'max' }), 31],
    ['a queue building up', queueActs, 45],
  ] as const)('agrees with the model on every ticket and every state: %s', (_what, opsArb, seed) => {
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
          latencyRatio: fc.constantFrom(1.25, 2),
          decayMs: fc.constantFrom(500, 30_000),
          ops: opsArb as fc.Arbitrary<Op[]>,
        }),
        ({ shape: { windowMs, buckets }, headroom, latencyRatio, decayMs, ops }) => {
          let now = 0
          let signal: OverloadSignals = { eventLoopDelayMs: 0, utilization: 0 }
          const model = new Model(windowMs, buckets, headroom, 100, latencyRatio, decayMs)
          const guard = overload({
            maxEventLoopDelayMs: 100,
            maxLatencyRatio: latencyRatio,
            bestRtDecayMs: decayMs,
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
              // Done, sometimes twice: a ticket already done changes nothing. Pick 0 is the oldest open one.
              const ticket =
                step.pick === 0 ? (open.find((t) => !t.finished) ?? open[0]!) : open[step.pick % open.length]!
              if (!ticket.finished) {
                ticket.finished = true
                model.complete(now, now - ticket.enteredAt)
              }
              ticket.done()
            }
          }
          model.read(now, signal)
          expect(guard.state()).toEqual(model.state(now))
        },
      ),
      { seed, numRuns: 300 },
    )
  })
})
