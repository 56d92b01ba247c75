/**
 * A reset from another process under prefetch, on a real Redis (issue 24): a process holding a batch keeps
 * spending it after another process resets the key, and those units must be counted in the key's new state
 * no later than its next round trip. The holder runs in a child process on the built packages (`pnpm build`
 * first); both processes drive the store on one fixed clock, so no window turns during a run.
 */
import { createLimiter, fixedWindow, type Rule, slidingWindow, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { startWorker, stopWorkers } from '../../../test/harness/workers.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  stopWorkers()
  await closeClients()
  await stopAll()
})

const AT = 1_800_000_000_000
const LIMIT = 1000
/** The rules, as the worker builds them: each counts 1,000 units, and none refills or turns during a run. */
const RULES: Record<string, [string, object]> = {
  fixedWindow: ['fixedWindow', { limit: LIMIT, windowMs: 3_600_000 }],
  slidingWindow: ['slidingWindow', { limit: LIMIT, windowMs: 3_600_000, buckets: 10 }],
  tokenBucket: ['tokenBucket', { capacity: LIMIT, refillPerSecond: 0.001 }],
}
const factories = { fixedWindow, slidingWindow, tokenBucket } as unknown as Record<
  string,
  (options: object) => Rule
>
let run = 0

describe.each(CLIENT_KINDS)('prefetched units after another process resets the key (%s)', (client) => {
  it.each(Object.keys(RULES))(
    '%s: units spent after the reset are counted in the new state, by the holder next round trip at the latest',
    async (kind) => {
      const prefix = `reset${run++}`
      const [name, options] = RULES[kind]!
      const holder = startWorker('prefetch-holder.mjs')
      await holder.ask({
        setup: { client, host: server.host, port: server.port, prefix, rule: RULES[kind], at: AT },
      })
      // The holder spends one by one: each time its units run out its batch doubles, so it ends up holding some.
      const before = await holder.ask<{ admitted: number }>({ consume: 40 })
      expect(before.admitted).toBe(40)
      // This process resets the key: Redis forgets the 40 and anything the holder still holds.
      const store = new RedisStore({
        client: await clientOf(client, server),
        clock: () => AT,
        deniedCache: false,
        timeoutMs: 10_000,
      })
      const limiter = createLimiter({
        rules: [factories[name]!(options)],
        store,
        prefix,
        onStoreError: 'throw',
      })
      await limiter.reset('shared')
      // A peek's remaining counts the peeked call itself.
      expect((await limiter.peek('shared')).remaining).toBe(LIMIT - 1)
      const after = await holder.ask<{ admitted: number; reasons: Record<string, number> }>({ consume: 40 })
      expect(after.admitted).toBe(40)
      // Some of them came from the batch held before the reset, spent with no round trip.
      expect(after.reasons.prefetch ?? 0).toBeGreaterThan(0)
      await holder.ask({ close: true })
      await holder.kill()
      // Every unit spent after the reset is counted; units spent just before it (since the holder's previous
      // round trip) may be counted again, at most a batch (64) more.
      const counted = LIMIT - 1 - (await limiter.peek('shared')).remaining
      expect(counted).toBeGreaterThanOrEqual(after.admitted)
      expect(counted).toBeLessThanOrEqual(after.admitted + 64)
    },
  )
})
