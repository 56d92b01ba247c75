/**
 * @module Walks across calendar edges for the stores that run `quota` (docs/design/redis.md, "Quota periods";
 * docs/design/postgres.md): seeded steps of consumes, peeks, refunds (newest units and naming a call) and
 * penalties, with and without a block, through MemoryStore and the store under test on one clock, asking for
 * the same decisions field by field (`used` and `resetsAt` included). The walks cross Berlin's 23- and 25-hour
 * days, weeks from Sunday in New York, months, and hours in Kathmandu (5:45 from UTC).
 */
import {
  type Adjustment,
  type BlockPolicy,
  fixedWindow,
  MemoryStore,
  type QuotaRule,
  quota,
  type Rule,
} from '@sluice/core'
import { expect } from 'vitest'
import type { StoreMaker } from './store-conformance.ts'

const HOUR = 3_600_000

/** Berlin's spring-forward day (23 hours) and fall-back day (25 hours) in 2026. */
export const SPRING = Date.UTC(2026, 2, 28, 23) // 29 March 00:00 in Berlin
export const AUTUMN = Date.UTC(2026, 9, 24, 22) // 25 October 00:00 in Berlin

/** Each set of rules, with the longest step its walk takes (its small steps are up to a tenth of it). */
export const RULE_SETS: [string, Rule[], number][] = [
  [
    'day in Europe/Berlin',
    [quota({ limit: 7, per: 'day', timeZone: 'Europe/Berlin' }) as QuotaRule],
    7 * HOUR,
  ],
  [
    'week from Sunday in America/New_York, beside a fixedWindow',
    [
      quota({ limit: 9, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7 }) as QuotaRule,
      fixedWindow({ limit: 4, windowMs: 6 * HOUR }) as Rule,
    ],
    48 * HOUR,
  ],
  ['month in UTC', [quota({ limit: 6, per: 'month' }) as QuotaRule], 10 * 24 * HOUR],
  [
    'hour in Asia/Kathmandu and a day in Europe/Berlin',
    [
      quota({ limit: 5, per: 'hour', timeZone: 'Asia/Kathmandu' }) as QuotaRule,
      quota({ limit: 8, per: 'day', timeZone: 'Europe/Berlin' }) as QuotaRule,
    ],
    2 * HOUR,
  ],
]

/** A seeded sequence in [0, 1) (Park-Miller), so every run walks the same trace. */
function seeded(seed: number): () => number {
  let state = seed
  return () => {
    state = (state * 48_271) % 2_147_483_647
    return state / 2_147_483_647
  }
}

let run = 0

/**
 * Walks each rule set of `RULE_SETS` from three starts (before Berlin's spring-forward day; before its
 * fall-back day, with a block; the end of January), 160 steps each, and asks that each walk reached denials,
 * several periods and (one rule) a count past the limit.
 */
export async function walksAcrossEdges(
  makeStore: (clock: () => number) => ReturnType<StoreMaker> | Promise<ReturnType<StoreMaker>>,
  rules: readonly Rule[],
  longest: number,
): Promise<void> {
  for (const [from, blockOn] of [
    [SPRING - 5 * HOUR, false],
    [AUTUMN - 5 * HOUR, true],
    [Date.UTC(2026, 0, 31, 20), false],
  ] as const) {
    let now = from
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const store = await makeStore(clock)
    const prefix = `quota${run++}`
    const block: BlockPolicy | undefined = blockOn
      ? { ms: 1500, factor: 2, maxMs: 6000, forgetMs: 6000, keep: 2 }
      : undefined
    const random = seeded(from % 2_147_483_646 || 1)
    const history: string[] = []
    const countedAt: number[] = []
    /** What the walk reached: denials, penalties past the limit, and the periods it counted in. */
    let denied = 0
    let over = 0
    const periods = new Set<number>()
    for (let step = 0; step < 160; step++) {
      // Mostly small steps, now and then a long one: every walk crosses several edges.
      const r = random()
      now += Math.floor(random() * (r < 0.85 ? longest / 10 : longest))
      const cost = 1 + Math.floor(random() * 3)
      const key = random() < 0.7 ? 'a' : 'b'
      const pick = random()
      let expected: unknown
      let actual: unknown
      let act: string
      if (pick < 0.6) {
        act = 'consume'
        const e = memory.apply(prefix, key, rules, cost, 'consume', block)
        expected = [...e, e.reason, e.countedAt]
        const a = await store.apply(prefix, key, rules, cost, 'consume', block)
        actual = [...a, a.reason, a.countedAt]
        if (e.countedAt !== undefined) countedAt.push(e.countedAt)
        if (e.some((d) => !d.allowed)) denied++
        periods.add(e[0]!.resetsAt!)
      } else if (pick < 0.7) {
        act = 'peek'
        const e = memory.apply(prefix, key, rules, cost, 'peek', block)
        expected = [...e, e.reason]
        const a = await store.apply(prefix, key, rules, cost, 'peek', block)
        actual = [...a, a.reason]
      } else if (pick < 0.8 && countedAt.length > 0) {
        // A refund naming a call: one counted lately, or one of an earlier period.
        act = 'refund of a call'
        const at = countedAt[Math.floor(random() * countedAt.length)]!
        const marks = rules.map(() => String(at))
        expected = memory.adjust(prefix, key, rules, cost, 'refund', undefined, marks)
        actual = await store.adjust(prefix, key, rules, cost, 'refund', undefined, marks)
      } else {
        const adjustment: Adjustment = pick < 0.9 ? 'refund' : 'penalize'
        act = adjustment
        const e = memory.adjust(prefix, key, rules, cost, adjustment, block)
        const a = await store.adjust(prefix, key, rules, cost, adjustment, block)
        expected = e === undefined ? undefined : [...e, e.reason]
        actual = a === undefined ? undefined : [...a, a.reason]
        if (e?.some((d) => d.used! > d.limit)) over++
      }
      history.push(`${new Date(now).toISOString()} ${act} ${key} x${cost}`)
      expect(actual, `walk so far:\n${history.join('\n')}`).toEqual(expected)
    }
    expect(denied, 'denials').toBeGreaterThan(3)
    expect(periods.size, 'periods counted in').toBeGreaterThan(3)
    if (rules.length === 1) expect(over, 'counts past the limit').toBeGreaterThan(0)
    memory.close()
    await store.close()
  }
}
