/**
 * A call answered by `onStoreError` after its timeout is never left counted in Redis (docs/redis.md, "When
 * the store fails"). Each window where a timed-out call could still count is driven here on purpose rather
 * than by a loaded machine: the event loop held past a deadline while Redis's reply waits in the socket, and
 * Redis's replies held back in transit (a relay between the client and a real redis-server) so that a script
 * that ran in time is answered after its call's timeout.
 */

import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { concurrency, createLimiter, fixedWindow, type Rule, slidingLog } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CLIENT_KINDS,
  type ClientKind,
  clientOf,
  closeClients,
  ioredis,
  VALKEY_KINDS,
} from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer

/**
 * A TCP relay in front of the test's redis-server: requests go through at once; while `hold()` is on,
 * replies are kept back, in order, until `release()`.
 */
class Relay {
  readonly #server: Server
  readonly #pairs = new Set<Socket>()
  #held: (() => void)[] | undefined
  port = 0

  constructor(target: RedisServer) {
    this.#server = createServer((client) => {
      const upstream = createConnection({ host: target.host, port: target.port })
      this.#pairs.add(client).add(upstream)
      client.on('data', (chunk) => upstream.write(chunk))
      upstream.on('data', (chunk) => {
        const send = () => client.write(chunk)
        if (this.#held === undefined) send()
        else this.#held.push(send)
      })
      const end = () => {
        client.destroy()
        upstream.destroy()
      }
      client.on('close', end).on('error', end)
      upstream.on('close', end).on('error', end)
    })
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    this.port = (this.#server.address() as { port: number }).port
    return this
  }

  hold(): void {
    this.#held = []
  }

  release(): void {
    const held = this.#held ?? []
    this.#held = undefined
    for (const send of held) send()
  }

  close(): void {
    for (const socket of this.#pairs) socket.destroy()
    this.#server.close()
  }
}

const relays: Relay[] = []

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  for (const relay of relays) relay.close()
  await closeClients()
  await stopAll()
})

let run = 0

/**
 * A store on `kind` through a relay (or straight to Redis: the relay runs in this process, so it stops
 * with the event loop), and a limiter on it whose store errors are allowed.
 */
async function setup(kind: ClientKind, rules: Rule[], prefetch = false, direct = false) {
  const relay = await new Relay(server).listen()
  relays.push(relay)
  const client = await clientOf(
    kind,
    direct ? server : ({ host: '127.0.0.1', port: relay.port } as RedisServer),
  )
  const store = new RedisStore({
    client,
    timeoutMs: 100,
    deniedCache: false,
    prefetch: prefetch ? { units: 64, ms: 60_000 } : undefined,
  })
  const limiter = createLimiter({ rules, store, prefix: `late${run++}`, onStoreError: 'allow' })
  return { relay, store, limiter }
}

/** Polls `check` every 20 ms, at most `tries` times, until it holds. */
async function eventually(check: () => Promise<boolean>, tries = 250): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true
    await sleep(20)
  }
  return false
}

/** Units counted on a fixed window's key: the sum of its window fields. */
async function fixedCount(key: string): Promise<number> {
  const fields = (await server.cli('HVALS', key)).trim().split('\n').filter(Boolean)
  return fields.reduce((sum, n) => sum + Number(n), 0)
}

/** Units counted on a sliding log's key: one member per call, `<seq>:<end>:<cost>`. */
async function logCount(key: string): Promise<number> {
  const members = (await server.cli('ZRANGE', key, '0', '-1')).trim().split('\n').filter(Boolean)
  return members.reduce((sum, m) => sum + Number(m.split(':')[2]), 0)
}

describe.each([...CLIENT_KINDS, ...VALKEY_KINDS])('a call answered after its timeout (%s)', (kind) => {
  it('is answered by its reply, not by onStoreError, when the event loop was held past its deadline with the reply waiting (it was counted, and answered store-error)', async () => {
    const rule = slidingLog({ limit: 1000, windowMs: 60_000 }) as Rule
    const { limiter } = await setup(kind, [rule], false, true)
    expect((await limiter.consume('k')).reason).toBe('rules') // Redis's clock learnt
    const pending = limiter.consume('k')
    // Once the call is written (node-redis writes at setImmediate), the loop is held for 3 timeouts: Redis
    // answers meanwhile, and the reply waits in the socket while the deadline passes.
    await new Promise((resolve) => setImmediate(resolve))
    const until = performance.now() + 300
    while (performance.now() < until) {}
    const d = await pending
    expect([d.allowed, d.reason]).toEqual([true, 'rules'])
    expect(await logCount(`sluice:${limiter.prefix}:{k}:${rule.id}`)).toBe(2)
  })

  it('is given back when its script ran in time but its reply came after its timeout (slidingLog: it stayed counted)', async () => {
    const rule = slidingLog({ limit: 1000, windowMs: 60_000 }) as Rule
    const { relay, limiter } = await setup(kind, [rule])
    expect((await limiter.consume('k')).reason).toBe('rules')
    relay.hold()
    const d = await limiter.consume('k')
    expect([d.allowed, d.reason]).toEqual([true, 'store-error'])
    const key = `sluice:${limiter.prefix}:{k}:${rule.id}`
    // Redis ran it in time: counted, until its reply arrives and the store gives it back.
    expect(await logCount(key)).toBe(2)
    relay.release()
    expect(await eventually(async () => (await logCount(key)) === 1)).toBe(true)
  })

  it('gives back each rule its own cost when a call of per-rule costs ran in time but its reply came after its timeout', async () => {
    const log = slidingLog({ limit: 1000, windowMs: 60_000, name: 'log' }) as Rule
    const fixed = fixedWindow({ limit: 1000, windowMs: 3_600_000, name: 'fixed' }) as Rule
    const { relay, limiter, store } = await setup(kind, [log, fixed])
    // Redis's clock learnt and both scripts loaded (on another key), on a machine that may be busy.
    for (let i = 0; i < 10 && (await limiter.consume('warm')).reason !== 'rules'; i++);
    for (let i = 0; i < 10; i++) await store.apply(limiter.prefix, 'warm', [log, fixed], [1, 2], 'peek')
    expect((await limiter.consume('k')).reason).toBe('rules')
    relay.hold()
    const late = await Promise.resolve(
      store.apply(limiter.prefix, 'k', [log, fixed], [2, 5], 'consume'),
    ).catch((e: unknown) => e)
    expect(late).toMatchObject({ code: 'ERR_SLUICE_STORE_TIMEOUT' })
    const logKey = `sluice:${limiter.prefix}:{k}:${log.id}`
    const fixedKey = `sluice:${limiter.prefix}:{k}:${fixed.id}`
    expect([await logCount(logKey), await fixedCount(fixedKey)]).toEqual([3, 6])
    relay.release()
    const back = async () => (await logCount(logKey)) === 1 && (await fixedCount(fixedKey)) === 1
    expect(await eventually(back)).toBe(true)
  })

  it('ends the lease a timed-out concurrency consume took (it held a unit for the whole lease)', async () => {
    const rule = concurrency({ limit: 2 }) as Rule
    const { relay, limiter } = await setup(kind, [rule])
    expect((await limiter.consume('k')).reason).toBe('rules')
    relay.hold()
    expect((await limiter.consume('k')).reason).toBe('store-error')
    const key = `sluice:${limiter.prefix}:{k}:${rule.id}`
    expect(await server.cli('ZCARD', key)).toBe('2\n')
    relay.release()
    expect(await eventually(async () => (await server.cli('ZCARD', key)) === '1\n')).toBe(true)
    expect((await limiter.consume('k')).allowed).toBe(true)
  })

  it('sends again a return of prefetched units that Redis answered late (sent while it was paused: they stayed counted)', async () => {
    const rule = fixedWindow({ limit: 1000, windowMs: 3_600_000 }) as Rule
    const own = await startRedis()
    const store = new RedisStore({
      client: await clientOf(kind, own),
      timeoutMs: 100,
      prefetch: { units: 8, ms: 1000 },
    })
    const limiter = createLimiter({ rules: [rule], store, prefix: `return${run++}` })
    const admin = await ioredis(own)
    for (let i = 0; i < 4; i++) expect((await limiter.consume('k')).allowed).toBe(true)
    const key = `sluice:${limiter.prefix}:{k}:${rule.id}`
    const count = async () => Number((await own.cli('HVALS', key)).trim())
    // Batches of 1, 2 and 4: 3 units held here, counted in Redis.
    expect(await count()).toBe(7)
    // Their 1000 ms end while Redis is paused: their return reaches it after its deadline, and does nothing.
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL')
    await admin.ping()
    expect(await eventually(async () => (await count()) === 4)).toBe(true)
    await store.close()
  })

  it('under prefetch, with Redis paused twice in the middle of a run, ends with Redis counting exactly what was admitted', async () => {
    const rule = fixedWindow({ limit: 1_000_000, windowMs: 3_600_000 }) as Rule
    const own = await startRedis()
    const store = new RedisStore({ client: await clientOf(kind, own), timeoutMs: 100, prefetch: true })
    const limiter = createLimiter({ rules: [rule], store, prefix: `soak${run++}`, onStoreError: 'allow' })
    const admin = await ioredis(own)
    let admitted = 0
    let stop = false
    const lane = async () => {
      while (!stop) {
        const d = await limiter.consume('k')
        if (d.reason === 'rules' || d.reason === 'prefetch') admitted++
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    const lanes = Array.from({ length: 32 }, lane)
    for (const ms of [300, 150]) {
      await sleep(200)
      await admin.call('CLIENT', 'PAUSE', String(ms), 'ALL')
      await admin.ping()
    }
    await sleep(200)
    stop = true
    await Promise.all(lanes)
    await store.close()
    const key = `sluice:${limiter.prefix}:{k}:${rule.id}`
    const count = async () => Number((await own.cli('HVALS', key)).trim())
    expect(await eventually(async () => (await count()) === admitted)).toBe(true)
  })

  it('gives back a whole batch a timed-out fetch counted under prefetch (its units were neither spent nor given back)', async () => {
    const rule = fixedWindow({ limit: 100_000, windowMs: 3_600_000 }) as Rule
    const { relay, limiter, store } = await setup(kind, [rule], true)
    let admitted = 0
    // Batches grow to 64 units: the last fetch ahead is on its way or spent.
    for (let i = 0; i < 200; i++) {
      const d = await limiter.consume('k')
      if (d.reason === 'rules' || d.reason === 'prefetch') admitted++
    }
    relay.hold()
    // Spends what is held, then the calls that need a fetch wait on it until onStoreError answers them.
    const held = await Promise.all(Array.from({ length: 200 }, () => limiter.consume('k')))
    for (const d of held) if (d.reason === 'rules' || d.reason === 'prefetch') admitted++
    expect(held.filter((d) => d.reason === 'store-error').length).toBeGreaterThan(0)
    relay.release()
    await store.close()
    const key = `sluice:${limiter.prefix}:{k}:${rule.id}`
    expect(await eventually(async () => (await fixedCount(key)) === admitted)).toBe(true)
  })
})
