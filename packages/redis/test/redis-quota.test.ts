/**
 * quota on a real Redis (docs/design/redis.md, "Quota periods"): the memory store's decisions, field by field
 * (`used` and `resetsAt` included), across calendar edges (a day of 23 and of 25 hours in Europe/Berlin, a
 * week starting on Sunday in America/New_York, a month, an hour in Asia/Kathmandu), alone and beside a
 * fixedWindow, with costs, peeks, refunds, penalties and blocks; the short call of its straight-down consume;
 * and the period handshake: a call sent for a period that does not hold the script's now changes nothing,
 * is sent once more for the period that does, and a second miss fails the call having counted nothing.
 */
import {
  fixedWindow,
  MemoryStore,
  type QuotaRule,
  quota,
  quotaPeriod,
  type Rule,
  StoreError,
} from '@sluice/core'
import { type RedisClientLike, RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients, nodeRedis } from '../../../test/harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { RULE_SETS, SPRING, walksAcrossEdges } from '../../../test/quota-walks.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

let run = 0
const HOUR = 3_600_000
// Berlin's spring-forward day (23 hours) begins at SPRING; the midnight that ends it comes 23 hours on.

describe.each(CLIENT_KINDS)('quota on Redis (%s)', (kind) => {
  it.each(RULE_SETS)(
    '%s: answers every step of a walk across calendar edges as the memory store, field by field',
    async (_, rules, longest) => {
      const client = await clientOf(kind, server)
      await walksAcrossEdges(
        (clock) => new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 }),
        rules,
        longest,
      )
    },
  )
})

/** A node-redis client that keeps every EVALSHA's ARGV, and answers it with `forged`'s reply when given. */
async function recordingClient(
  sent: string[][],
  forged?: (args: string[]) => unknown,
): Promise<RedisClientLike> {
  const client = await nodeRedis(server)
  return {
    isReady: true,
    sendCommand: (args: string[]) => {
      if (args[0] !== 'EVALSHA') return client.sendCommand(args)
      const argv = args.slice(3 + Number(args[2]))
      sent.push(argv)
      return forged === undefined ? client.sendCommand(args) : Promise.resolve(forged(argv))
    },
  } as unknown as RedisClientLike
}

/**
 * A fresh store's first call goes twice (its deadline waits for a reply to tell it Redis's clock): one on
 * another key first, and `sent` starts after it.
 */
async function warm(store: RedisStore, sent: string[][]): Promise<void> {
  await store.apply('warm', 'warm', [fixedWindow({ limit: 1, windowMs: 1000 }) as Rule], 1, 'peek')
  sent.length = 0
}

describe('quota: the short call and the period handshake', () => {
  const rule = quota({ limit: 3, per: 'day', timeZone: 'Europe/Berlin' }) as QuotaRule
  // Berlin's midnight at the end of its 23-hour day.
  const edge = SPRING + 23 * HOUR
  const before = quotaPeriod(rule, edge - 1)
  const after = quotaPeriod(rule, edge)

  it('sends the deadline, the limit and the period, then the cost when not 1, then the clock when given', async () => {
    expect(before).toEqual({ start: SPRING, end: edge })
    const sent: string[][] = []
    let now = edge - 10
    const store = new RedisStore({
      client: await recordingClient(sent),
      clock: () => now,
      deniedCache: false,
    })
    await warm(store, sent)
    const memory = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
    const prefix = `short${run++}`
    for (const [t, cost] of [
      [edge - 10, 1],
      [edge - 5, 2],
      [edge - 1, 1],
      [edge, 3],
    ] as const) {
      now = t
      expect(await store.apply(prefix, 'k', [rule], cost, 'consume')).toEqual(
        memory.apply(prefix, 'k', [rule], cost, 'consume'),
      )
    }
    // The clock is sent, so the cost is too, whatever it is.
    expect(sent.map((argv) => argv.slice(1))).toEqual([
      ['3', String(SPRING), String(edge), '1', String(edge - 10)],
      ['3', String(SPRING), String(edge), '2', String(edge - 5)],
      ['3', String(SPRING), String(edge), '1', String(edge - 1)],
      ['3', String(edge), String(after.end), '3', String(edge)],
    ])
    // One field, the new period's, living until the period's end (plus the second a caller's clock gets).
    expect(await server.cli('HGETALL', `sluice:${prefix}:{k}:${rule.id}`)).toBe(`${edge}\n3\n`)
    memory.close()
    await store.close()
  })

  it.each([
    [
      'behind: the call is sent for the period before the edge, the script reads a time after it',
      edge + 2,
      edge - 3,
    ],
    [
      'ahead: the call is sent for the period after the edge, the script reads a time before it',
      edge - 2,
      edge + 3,
    ],
  ])(
    'a stale estimate of the script clock at an edge (%s): the script answers its now and counts nothing, the call goes once more for that now, and its units land in that period',
    async (_, scriptNow, estimate) => {
      const sent: string[][] = []
      // The store reads its clock twice for a quota call: when the call is made (the script's now, sent),
      // then when its period is written (the estimate). Here the second read is stale.
      const reads: number[] = []
      let now = scriptNow
      const store = new RedisStore({
        client: await recordingClient(sent),
        clock: () => reads.shift() ?? now,
        deniedCache: false,
      })
      await warm(store, sent)
      const memory = new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })
      const prefix = `edge${run++}`
      reads.push(scriptNow, estimate)
      const expected = memory.apply(prefix, 'k', [rule], 2, 'consume')
      expect(await store.apply(prefix, 'k', [rule], 2, 'consume')).toEqual(expected)
      const stale = quotaPeriod(rule, estimate)
      const right = quotaPeriod(rule, scriptNow)
      expect(stale).not.toEqual(right)
      expect(sent.map((argv) => argv.slice(1))).toEqual([
        ['3', String(stale.start), String(stale.end), '2', String(scriptNow)],
        ['3', String(right.start), String(right.end), '2', String(scriptNow)],
      ])
      expect(expected[0]).toMatchObject({ allowed: true, used: 0, remaining: 1, resetsAt: right.end })
      expect(await server.cli('HGETALL', `sluice:${prefix}:{k}:${rule.id}`)).toBe(`${right.start}\n2\n`)
      // The composed script (a peek, a penalty, a refund) checks its period the same way.
      now = scriptNow
      reads.push(scriptNow, estimate)
      expect(await store.apply(prefix, 'k', [rule], 1, 'peek')).toEqual(
        memory.apply(prefix, 'k', [rule], 1, 'peek'),
      )
      reads.push(scriptNow, estimate)
      expect(await store.adjust(prefix, 'k', [rule], 1, 'penalize')).toEqual(
        memory.adjust(prefix, 'k', [rule], 1, 'penalize'),
      )
      expect(await server.cli('HGETALL', `sluice:${prefix}:{k}:${rule.id}`)).toBe(`${right.start}\n3\n`)
      expect(sent).toHaveLength(6)
      memory.close()
      await store.close()
    },
  )

  it('a second miss (an edge passed between the two calls) fails the call, ERR_SLUICE_STORE, and counts nothing', async () => {
    const sent: string[][] = []
    const prefix = `twice${run++}`
    // Both calls are answered as a script whose now lay outside their period answers.
    const store = new RedisStore({
      client: await recordingClient(sent, (argv) => ['period', Number(argv[3]), Date.now()]),
      deniedCache: false,
    })
    const error = await Promise.resolve(store.apply(prefix, 'k', [rule], 1, 'consume')).catch(
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(StoreError)
    expect(error).toMatchObject({ code: 'ERR_SLUICE_STORE' })
    expect((error as Error).message).toMatch(/outside the quota period .* twice/)
    // Sent twice, the second time for the period holding the now the first answer gave.
    expect(sent).toHaveLength(2)
    const second = quotaPeriod(rule, Number(sent[0]![3]))
    expect(sent[1]!.slice(2, 4)).toEqual([String(second.start), String(second.end)])
    expect(await server.cli('EXISTS', `sluice:${prefix}:{k}:${rule.id}`)).toBe('0\n')
    await store.close()
  })

  it.each([
    ['a now that is not a number', 'x'],
    ['a negative now', -1],
    ['a now with a fraction', 1.5],
  ])(
    "a period answer with %s is no script's: the call fails with ERR_SLUICE_STORE, not sent again",
    async (_, now) => {
      const sent: string[][] = []
      const store = new RedisStore({
        client: await recordingClient(sent, () => ['period', now, Date.now()]),
        deniedCache: false,
      })
      const error = await Promise.resolve(store.apply(`forged${run++}`, 'k', [rule], 1, 'consume')).catch(
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(StoreError)
      expect(error).toMatchObject({
        code: 'ERR_SLUICE_STORE',
        message: expect.stringMatching(/unexpected reply/),
      })
      expect(sent).toHaveLength(1)
      await store.close()
    },
  )

  it("on Redis's own clock: a fresh store's first calls count once each, in the period holding Redis's now", async () => {
    const sent: string[][] = []
    const prefix = `fresh${run++}`
    const store = new RedisStore({ client: await recordingClient(sent), deniedCache: false })
    const first = await store.apply(prefix, 'k', [rule], 1, 'consume')
    const second = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(first[0]).toMatchObject({ allowed: true, used: 0, remaining: 2 })
    expect(second[0]).toMatchObject({ allowed: true, used: 1, remaining: 1 })
    const period = quotaPeriod(rule, second.countedAt!)
    expect(second[0]!.resetsAt).toBe(period.end)
    expect(await server.cli('HGET', `sluice:${prefix}:{k}:${rule.id}`, String(period.start))).toBe('2\n')
    await store.close()
  })
})

describe('quota and the local layers', () => {
  const rule = quota({ limit: 3, per: 'day', timeZone: 'Europe/Berlin' }) as QuotaRule
  const edge = SPRING + 23 * HOUR

  it('is never prefetched (every consume a round trip), and its denial is answered from memory until the period ends', async () => {
    const sent: string[][] = []
    let now = edge - 5000
    const store = new RedisStore({
      client: await recordingClient(sent),
      clock: () => now,
      prefetch: { units: 64, ms: 100 },
      deniedCache: true,
    })
    await warm(store, sent)
    const prefix = `layers${run++}`
    for (let i = 0; i < 3; i++) {
      expect((await store.apply(prefix, 'k', [rule], 1, 'consume')).reason).toBeUndefined()
    }
    expect(sent).toHaveLength(3)
    const denied = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(denied[0]).toMatchObject({ allowed: false, used: 3, retryAfterMs: 5000, resetsAt: edge })
    expect(sent).toHaveLength(4)
    // Until the period's end, from memory: Redis is not asked.
    now = edge - 1
    const cached = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(cached.reason).toBe('cache')
    expect(cached[0]!.retryAfterMs).toBe(1)
    expect(sent).toHaveLength(4)
    // The next period admits, in Redis.
    now = edge
    const next = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(next.reason).toBeUndefined()
    expect(next[0]).toMatchObject({ allowed: true, used: 0, remaining: 2 })
    expect(sent).toHaveLength(5)
    await store.close()
  })

  it("a reset forgets the period's count and drops the cached denial: the next call is admitted as on a key never seen", async () => {
    let now = edge - 5000
    const clock = () => now
    const store = new RedisStore({ client: await clientOf('ioredis', server), clock, deniedCache: true })
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const prefix = `reset${run++}`
    for (let i = 0; i < 4; i++) {
      expect(await store.apply(prefix, 'k', [rule], 1, 'consume')).toEqual(
        memory.apply(prefix, 'k', [rule], 1, 'consume'),
      )
    }
    now = edge - 4000
    expect((await store.apply(prefix, 'k', [rule], 1, 'consume')).reason).toBe('cache')
    await store.reset(prefix, 'k', [rule])
    memory.reset(prefix, 'k')
    expect(await server.cli('EXISTS', `sluice:${prefix}:{k}:${rule.id}`)).toBe('0\n')
    const after = await store.apply(prefix, 'k', [rule], 1, 'consume')
    expect(after).toEqual(memory.apply(prefix, 'k', [rule], 1, 'consume'))
    expect(after[0]).toMatchObject({ allowed: true, used: 0, remaining: 2 })
    memory.close()
    await store.close()
  })
})
