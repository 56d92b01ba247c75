/**
 * @module The diagnostics channels: each message's exact shape, and that an unobserved limiter builds none.
 */
import { channel, subscribe, unsubscribe } from 'node:diagnostics_channel'
import {
  createLimiter,
  type DecisionMessage,
  fixedWindow,
  type HttpMessage,
  leakyBucket,
  MemoryStore,
  type StoreErrorMessage,
} from '@sluice/core'
import { buildRequestLimit, type HttpAdapter, parseHttpOptions, type RequestRecord } from '@sluice/core/http'
import { afterEach, describe, expect, it } from 'vitest'

const listeners: [string, (message: unknown) => void][] = []
function listen<M>(name: string): M[] {
  const seen: M[] = []
  const listener = (message: unknown) => seen.push(message as M)
  subscribe(name, listener)
  listeners.push([name, listener])
  return seen
}

afterEach(() => {
  for (const [name, listener] of listeners.splice(0)) unsubscribe(name, listener)
})

function clocked() {
  const clock = { now: 1_000_020_000 }
  return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
}

describe('sluice:decision', () => {
  it('publishes every consume and peek with its limiter, key, cost, mode, decision and store time', async () => {
    const seen = listen<DecisionMessage>('sluice:decision')
    const { store } = clocked()
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
      store,
      prefix: 'api',
    })
    const first = await limiter.consume('ann', { cost: 1 })
    const second = await limiter.consume('ann')
    const peeked = await limiter.peek('bob')
    expect(seen).toEqual([
      { limiter: 'api', key: 'ann', cost: 1, mode: 'consume', decision: first, storeMs: 0 },
      { limiter: 'api', key: 'ann', cost: 1, mode: 'consume', decision: second, storeMs: 0 },
      { limiter: 'api', key: 'bob', cost: 1, mode: 'peek', decision: peeked, storeMs: 0 },
    ])
    expect(second).toMatchObject({ allowed: false, reason: 'rules' })
  })

  it('times an asynchronous store, and publishes the policy decision when the store fails', async () => {
    const decisions = listen<DecisionMessage>('sluice:decision')
    const failures = listen<StoreErrorMessage>('sluice:store-error')
    const { store } = clocked()
    const slow = {
      apply: (...args: Parameters<MemoryStore['apply']>) =>
        new Promise<ReturnType<MemoryStore['apply']>>((resolve) =>
          setTimeout(() => resolve(store.apply(...args)), 5),
        ),
      reset: () => undefined,
    }
    const failure = new Error('down')
    const broken = { apply: () => Promise.reject(failure), reset: () => undefined }
    const rules = [fixedWindow({ limit: 5, windowMs: 60_000 })]
    await createLimiter({ rules, store: slow, prefix: 'slow' }).consume('k')
    const denied = await createLimiter({
      rules,
      store: broken,
      prefix: 'down',
      onStoreError: 'deny',
    }).consume('k')
    expect(decisions[0]!.storeMs).toBeGreaterThan(0)
    expect(decisions[1]).toMatchObject({ limiter: 'down', key: 'k', mode: 'consume', decision: denied })
    expect(denied).toMatchObject({ allowed: false, reason: 'store-error', rule: '' })
    expect(failures).toHaveLength(1)
    expect(failures[0]).toMatchObject({
      limiter: 'down',
      key: 'k',
      error: { code: 'ERR_SLUICE_STORE', cause: failure },
    })
  })
})

describe('sluice:decision store time', () => {
  it('times every round trip of a store that answers some calls in the tick and others by promise', async () => {
    const decisions = listen<DecisionMessage>('sluice:decision')
    const { store } = clocked()
    // As a RedisStore that prefetches: a round trip fetches units, the next call spends one here, and so on.
    let call = 0
    const mixed = {
      apply: (...args: Parameters<MemoryStore['apply']>) =>
        call++ % 2 === 1
          ? store.apply(...args)
          : new Promise<ReturnType<MemoryStore['apply']>>((resolve) =>
              setTimeout(() => resolve(store.apply(...args)), 5),
            ),
      reset: () => undefined,
    }
    const limiter = createLimiter({
      rules: [fixedWindow({ limit: 9, windowMs: 60_000 })],
      store: mixed,
      prefix: 'mixed',
    })
    for (let i = 0; i < 4; i++) await limiter.consume('k')
    expect(decisions.map((d) => d.storeMs > 0)).toEqual([true, false, true, false])
  })
})

describe('sluice:http', () => {
  interface Req {
    ip: string
    route: string | undefined
  }
  const records = new WeakMap<Req, RequestRecord>()
  const adapter: HttpAdapter<Req, { destroyed: boolean; once(): void; removeListener(): void }> = {
    view: {
      ip: (r) => r.ip,
      route: (r) => r.route ?? '',
      routeTemplate: (r) => r.route,
      header: () => undefined,
    },
    recordOf: (r) => records.get(r),
    keepRecord: (r, record) => records.set(r, record),
    responseOf: (res) => res,
  }
  const res = { destroyed: false, once() {}, removeListener() {} }

  it("publishes once per limit per request: allow, queue, deny, reject, and shadow for a shadowed limit's denial", async () => {
    const seen = listen<HttpMessage>('sluice:http')
    const { store } = clocked()
    const limit = (options: Record<string, unknown>) =>
      buildRequestLimit(parseHttpOptions<Req>('t', { store, ...options }), adapter)
    const plain = limit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], prefix: 'plain' })
    const queued = limit({ rules: [leakyBucket({ ratePerSecond: 10, maxQueueMs: 1000 })], prefix: 'queue' })
    const shadow = limit({
      rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
      prefix: 'shadow',
      shadow: true,
    })
    const byHeader = limit({
      rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
      prefix: 'h',
      key: { header: 'x' },
    })
    const req = (route?: string): Req => ({ ip: '203.0.113.7', route })
    const requests = [req('GET /a'), req(), req(), req(), req(), req(), req()]
    plain.consume(requests[0]!, res)
    plain.consume(requests[1]!, res)
    queued.consume(requests[2]!, res)
    queued.consume(requests[3]!, res)
    shadow.consume(requests[4]!, res)
    expect(shadow.consume(requests[5]!, res)).toEqual({ action: 'pass' })
    byHeader.consume(requests[6]!, res)
    expect(
      seen.map((m) => [m.limiter, m.action, m.route, m.key, m.decision?.allowed, m.request === undefined]),
    ).toEqual([
      ['plain', 'allow', 'GET /a', '203.0.113.7', true, false],
      ['plain', 'deny', undefined, '203.0.113.7', false, false],
      ['queue', 'allow', undefined, '203.0.113.7', true, false],
      ['queue', 'queue', undefined, '203.0.113.7', true, false],
      ['shadow', 'allow', undefined, '203.0.113.7', true, false],
      ['shadow', 'shadow', undefined, '203.0.113.7', false, false],
      ['h', 'reject', undefined, '', undefined, false],
    ])
    expect(seen[1]!.request).toBe(requests[1])
    // The shadowed limit's decision is kept for the request, but it sends no headers.
    expect(records.get(requests[5]!)?.decision).toMatchObject({ allowed: false })
    expect(records.get(requests[5]!)?.headers).toEqual({})
  })
})

describe('unobserved', () => {
  it('has no subscribers unless someone listens', () => {
    for (const name of ['sluice:decision', 'sluice:http', 'sluice:store-error']) {
      expect(channel(name).hasSubscribers).toBe(false)
    }
  })
})
