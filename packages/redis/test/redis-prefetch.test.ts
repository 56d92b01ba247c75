/**
 * Prefetch on a real Redis, on a manual clock: batch sizes (1, then doubling with demand, cut to 1/16 of
 * what is left), local answers and their figures, units given back when their time is up, on close, on a
 * block, on other rules; what a reset, a peek and a failing Redis see. The 4-process bound is in
 * redis-prefetch-processes.test.ts.
 */
import {
  createLimiter,
  type Decision,
  fixedWindow,
  type RulesOption,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

let run = 0
const T0 = 1_800_000_000_000

async function setup(
  kind: ClientKind,
  rules: RulesOption<void>,
  more: { units?: number; block?: boolean } = {},
) {
  const clock = { now: T0 }
  const client = await clientOf(kind, server)
  const store = new RedisStore({
    client,
    clock: () => clock.now,
    timeoutMs: 2000,
    prefetch: { units: more.units ?? 8, ms: 100 },
  })
  const limiter = createLimiter({
    rules,
    store,
    prefix: `prefetch${run++}`,
    block: more.block ? { ms: 1000 } : undefined,
  })
  // A second store on the same Redis, without prefetch: what Redis itself holds.
  const plain = createLimiter({
    rules,
    store: new RedisStore({ client, clock: () => clock.now }),
    prefix: limiter.prefix,
  })
  return { clock, store, limiter, plain }
}

const brief = (d: Decision) => [d.allowed, d.reason, d.remaining] as const

/** The units Redis holds for the key: a peek answers what would remain after one more. */
async function inRedis(plain: ReturnType<typeof createLimiter>, key = 'k'): Promise<number> {
  return (await plain.peek(key)).remaining + 1
}

describe.each(CLIENT_KINDS)('prefetch (%s)', (kind) => {
  it('starts at one unit, doubles while batches run out in time, and answers locally with exact figures', async () => {
    const { limiter, plain } = await setup(kind, [fixedWindow({ limit: 1000, windowMs: 60_000 })])
    const seen: (readonly [boolean, string, number])[] = []
    for (let i = 0; i < 16; i++) seen.push(brief(await limiter.consume('k')))
    // Batches of 1 and 2 fetched by the calls that found none; from then on each batch is fetched once
    // half the one before is spent (4, 8, then 8 again: units), and every call finds units or joins a fetch.
    expect(seen).toEqual(seen.map((_, i) => [true, i < 2 ? 'rules' : 'prefetch', 999 - i]))
    // Redis counted the last batch whole: 1 + 2 + 4 + 8 + 8.
    expect(await inRedis(plain)).toBe(1000 - 23)
    // A peek asks Redis and ignores the units held here.
    expect((await limiter.peek('k')).remaining).toBe(1000 - 23 - 1)
  })

  it('gives unspent units back when their time is up, and on close', async () => {
    const rule = tokenBucket({ capacity: 100, refillPerSecond: 0.001 })
    const { clock, store, limiter, plain } = await setup(kind, [rule])
    for (let i = 0; i < 4; i++) await limiter.consume('k') // batches of 1, 2, 4: 3 units held
    expect(await inRedis(plain)).toBe(93)
    // Their time is up: the sweep gives them back, with no call on the key.
    clock.now += 100
    await sleep(250)
    expect(await inRedis(plain)).toBe(96)
    // One unit was spent of the last batch of 4: the next batch is 1.
    expect(brief(await limiter.consume('k'))).toEqual([true, 'rules', 95])
    expect(brief(await limiter.consume('k'))).toEqual([true, 'rules', 94]) // a batch of 2, 1 held
    expect(await inRedis(plain)).toBe(93)
    store.close()
    await sleep(50)
    expect(await inRedis(plain)).toBe(94)
  })

  it('a call that finds its units past their time gives them back and fetches anew', async () => {
    const { clock, limiter, plain } = await setup(kind, [fixedWindow({ limit: 1000, windowMs: 60_000 })])
    for (let i = 0; i < 4; i++) await limiter.consume('k') // 3 units held
    clock.now += 100
    expect(brief(await limiter.consume('k'))).toEqual([true, 'rules', 995])
    await sleep(20)
    expect(await inRedis(plain)).toBe(995)
  })

  it('cuts a batch to 1/16 of what is left, so the last 31 units are decided one call at a time', async () => {
    const { limiter, plain } = await setup(kind, [slidingWindow({ limit: 100, windowMs: 60_000 })], {
      units: 64,
    })
    const decisions: Decision[] = []
    for (let i = 0; i < 130; i++) decisions.push(await limiter.consume('k'))
    const admitted = decisions.filter((d) => d.allowed)
    expect(admitted).toHaveLength(100)
    expect(decisions.slice(0, 100).every((d) => d.allowed)).toBe(true)
    for (const d of admitted) if (d.remaining < 31) expect(d.reason).toBe('rules')
    expect(admitted.filter((d) => d.reason === 'prefetch').length).toBeGreaterThan(20)
    expect((await plain.peek('k')).allowed).toBe(false)
  })

  it('with several rules, every rule counts the batch and the tightest one cuts it', async () => {
    const rules = [
      fixedWindow({ limit: 1000, windowMs: 60_000 }),
      tokenBucket({ capacity: 40, refillPerSecond: 0.001 }),
    ]
    const { limiter } = await setup(kind, rules)
    const seen: (readonly [boolean, string, number])[] = []
    for (let i = 0; i < 11; i++) seen.push(brief(await limiter.consume('k')))
    // 40 tokens: no batch above 2 (fetched ahead from the third call on) until 31 are left, then 1.
    const reasons = [
      'rules',
      'rules',
      'prefetch',
      'prefetch',
      'prefetch',
      'prefetch',
      'prefetch',
      'prefetch',
      'prefetch',
      'rules',
      'rules',
    ]
    expect(seen).toEqual(reasons.map((reason, i) => [true, reason, 39 - i]))
  })

  it('a known block ends local spending at once and gives the units back', async () => {
    const { limiter, plain } = await setup(kind, [fixedWindow({ limit: 100, windowMs: 60_000 })], {
      block: true,
    })
    for (let i = 0; i < 4; i++) await limiter.consume('k') // Redis 93, 3 units held
    const denied = await limiter.consume('k', { cost: 95 })
    expect([denied.allowed, denied.reason, denied.retryAfterMs]).toEqual([false, 'rules', 60_000])
    const blocked = await limiter.consume('k')
    expect([blocked.allowed, blocked.reason]).toEqual([false, 'blocked'])
    await sleep(20)
    expect(await inRedis(plain)).toBe(96)
  })

  it('units held under other rules are given back; a reset forgets them', async () => {
    let rules = [fixedWindow({ limit: 100, windowMs: 60_000 })]
    const { limiter, plain } = await setup(kind, () => rules)
    for (let i = 0; i < 4; i++) await limiter.consume('k') // Redis 93, 3 units held
    // The same state identity with another limit: a table edit.
    rules = [fixedWindow({ limit: 200, windowMs: 60_000 })]
    expect(brief(await limiter.consume('k'))).toEqual([true, 'rules', 195])
    await sleep(20)
    expect(await inRedis(plain)).toBe(195) // 5 counted, under the new limit
    await limiter.consume('k') // a batch of 2: 1 held
    await limiter.reset('k')
    expect(brief(await limiter.consume('k'))).toEqual([true, 'rules', 199])
  })

  it('sliding rules take units back only from where they were counted', async () => {
    const log = await setup(kind, [slidingLog({ limit: 100, windowMs: 60_000 })])
    for (let i = 0; i < 4; i++) await log.limiter.consume('k') // a last entry of 4 at T0, 3 units held
    log.clock.now += 100
    await sleep(250)
    expect(await inRedis(log.plain)).toBe(96)
    // An entry logged after the batch: its units cannot move back in time, so nothing is given back.
    for (let i = 0; i < 2; i++) await log.limiter.consume('k') // a batch of 1 (96 -> 95), then 2 (1 held)
    log.clock.now += 1
    await log.plain.consume('k')
    log.clock.now += 100
    await sleep(250)
    expect(await inRedis(log.plain)).toBe(92)

    const buckets = await setup(kind, [slidingWindow({ limit: 100, windowMs: 60_000 })])
    for (let i = 0; i < 4; i++) await buckets.limiter.consume('k') // 3 units held, counted in T0's bucket
    buckets.clock.now += 6_000 // the next bucket
    await buckets.plain.consume('k')
    await sleep(250)
    expect(await inRedis(buckets.plain)).toBe(100 - 4 - 1)
  })

  it('close() with 256 calls in flight: each is answered by what was fetched for it or by Redis, and every admitted unit stays counted (calls that joined a fetch were refused and their units given back)', async () => {
    const rules = [fixedWindow({ limit: 100_000, windowMs: 60_000 })]
    const { store, limiter, plain } = await setup(kind, rules, { units: 64 })
    let admitted = 0
    const count = (d: Decision) => {
      if (d.allowed && (d.reason === 'rules' || d.reason === 'prefetch')) admitted++
      return d
    }
    // Batches grow to 64 units, so the calls below mostly join fetches on their way.
    for (let i = 0; i < 200; i++) count(await limiter.consume('k'))
    const inFlight = Array.from({ length: 256 }, () => limiter.consume('k'))
    const closed = store.close()
    const decisions = (await Promise.all(inFlight)).map(count)
    await closed
    // Every call in flight at close() is answered by the store, none by onStoreError.
    expect(decisions.filter((d) => d.reason === 'store-error')).toHaveLength(0)
    expect(100_000 - (await inRedis(plain))).toBe(admitted)
  })

  it('while Redis is away, held units are spent, then onStoreError decides', async () => {
    const own = await startRedis()
    const clock = { now: T0 }
    const store = new RedisStore({
      client: await clientOf(kind, own),
      clock: () => clock.now,
      timeoutMs: 200,
      prefetch: { units: 8, ms: 100 },
    })
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 100, windowMs: 60_000 })],
      store,
      onStoreError: 'allow',
    })
    for (let i = 0; i < 4; i++) await limiter.consume('k') // 3 units held
    await own.kill()
    const after = []
    for (let i = 0; i < 4; i++) after.push(brief(await limiter.consume('k')))
    expect(after.slice(0, 3)).toEqual([
      [true, 'prefetch', 95],
      [true, 'prefetch', 94],
      [true, 'prefetch', 93],
    ])
    expect(after[3]![1]).toBe('store-error')
    store.close()
  })
})
