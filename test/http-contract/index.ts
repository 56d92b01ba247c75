/**
 * The HTTP contract every sluice adapter keeps, as one suite: `httpContract(adapter)` registers the same
 * vitest cases for any adapter, on a memory store (manual clock) and on a RedisStore on a real redis-server.
 * Each case starts a real server of the adapter's framework, sends real requests, and stops it.
 *
 * How an adapter plugs in: its package has a test file (`packages/<adapter>/test/contract.test.ts`) calling
 * `httpContract(adapter)` with a `ContractAdapter`:
 *
 * - `name`: what the suite is called (`'express 5'`).
 * - `where`: how the adapter names its options in errors (`'rateLimit'` → `InvalidOptionError.option` is
 *   `'rateLimit.cost'`).
 * - `start(app)`: builds a server of the framework for a `ContractApp` and listens on 127.0.0.1, port 0;
 *   resolves `{ url, close }` (`close` also drops open connections). `app.limits` is a list of options
 *   objects, given to the adapter as they are (one `rateLimit(options)` built per entry, once, at start;
 *   every route passes every limit, in order, so that each limit knows the route's template); `app.routes`
 *   are `{ method, path, handle }` with `path` a template (`/items/:id`): the route's handler calls
 *   `handle(decision)` with the decision the framework exposes to handlers (`req.rateLimit`,
 *   `ctx.state.rateLimit`, …), waits for its reply and answers `reply.status` with `reply.body` as JSON. A
 *   request no route matches is answered 404. `app.trustProxy` asks the server to take the client's
 *   address from `X-Forwarded-For` sent by a loopback proxy (Express `trust proxy`, Koa `app.proxy`, the
 *   node adapter's `trustProxy: ['127.0.0.1']`). Invalid options make `start` reject with the adapter's
 *   error, before any request.
 * - Three options take framework objects, so the adapter writes them from a neutral form:
 *   `keyFromHeader(name)` a `key` function reading that request header (undefined when absent);
 *   `countWhen(when)` a `countWhen` asking `when(status of the response)`; `onLimited(answer)` an
 *   `onLimited` that calls `answer(decision)` and, when it gives a reply, answers the request with it
 *   (status, JSON body) in the framework's own way, or leaves the denial to sluice when it gives undefined.
 *
 * Every case uses the suite's own limiter, or options naming the suite's store; nothing here reads a
 * framework object. Cases that need a framework's own features (its router, its proxy setting, its error
 * path) stay in that adapter's own tests.
 *
 * @module
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import http from 'node:http'
import {
  concurrency,
  createLimiter,
  type Decision,
  ErrorCode,
  fixedWindow,
  leakyBucket,
  type RulesOption,
  slidingLog,
  tokenBucket,
} from '@sluice/core'
import type { RequestRateLimit } from '@sluice/core/http'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { closeClients } from '../harness/clients.ts'
import { stopAll } from '../harness/redis.ts'
import { limitHeaders, memoryKind, openRequest, redisKind, type StoreKind, send, turn } from './support.ts'

/** What a route's handler answers: a status and a JSON body, or a streamed text body. */
export interface ContractReply {
  readonly status: number
  readonly body: unknown
  /**
   * When given, the handler answers `status` with `content-type: text/plain` and this body, each chunk
   * written as it comes (`body` is then not sent): what an AI gateway's streamed answer looks like.
   */
  readonly stream?: AsyncIterable<string>
}

/** One route of a contract app. */
export interface ContractRoute {
  readonly method: 'GET' | 'POST'
  /** The route's template, parameters as `:name` (`/items/:id`). */
  readonly path: string
  /**
   * Called by the route's handler with what the framework exposes to it (`req.rateLimit`: the decision,
   * with `settle`); the handler answers its reply.
   */
  handle(decision: RequestRateLimit | undefined): ContractReply | Promise<ContractReply>
}

/** The app a case asks an adapter to serve. */
export interface ContractApp {
  /** Options of each limit, passed to the adapter as they are; every route passes every limit, in order. */
  readonly limits: readonly Readonly<Record<string, unknown>>[]
  readonly routes: readonly ContractRoute[]
  /** Take the client's address from `X-Forwarded-For` sent through a loopback proxy. Default false. */
  readonly trustProxy?: boolean
}

/** A listening server of the adapter's framework. */
export interface ContractServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  close(): Promise<void>
}

/** An adapter, as the contract suite drives it. See the module comment. */
export interface ContractAdapter {
  readonly name: string
  readonly where: string
  start(app: ContractApp): Promise<ContractServer>
  keyFromHeader(name: string): unknown
  countWhen(when: (status: number) => boolean): unknown
  onLimited(
    answer: (decision: Decision) => ContractReply | undefined | Promise<ContractReply | undefined>,
  ): unknown
  /**
   * Whether one route can pass several limits (`app.limits` of more than one entry). False for a framework
   * that gives a route one limit (NestJS: method, class and module options merged into one): the cases of
   * stacked limits are then not registered for it. Default true.
   */
  readonly stacksLimits?: boolean
}

/** sluice's problem details, with or without the charset a framework adds. */
const PROBLEM = /^application\/problem\+json(; ?charset=utf-8)?$/i

/** A route answering `{ ok: true, remaining }` from the decision; its calls are counted in `calls`. */
function okRoute(path = '/items/:id', method: 'GET' | 'POST' = 'GET') {
  const calls: (Decision | undefined)[] = []
  const route: ContractRoute = {
    method,
    path,
    handle: (decision) => {
      calls.push(decision)
      return { status: 200, body: { ok: true, remaining: decision?.remaining ?? null } }
    },
  }
  return { calls, route }
}

/** Registers the contract cases for `adapter`, once per store kind. */
export function httpContract(adapter: ContractAdapter): void {
  describe.each([memoryKind(), redisKind()])(`${adapter.name}: the HTTP contract on $name`, (kind) => {
    contractCases(adapter, kind)
  })
  afterAll(async () => {
    await closeClients()
    await stopAll()
  })
}

function contractCases(adapter: ContractAdapter, kind: StoreKind): void {
  /** A case about stacked limits: registered only for adapters that stack them (a Nest route has one limit). */
  const stacked: typeof it = adapter.stacksLimits === false ? ((() => {}) as unknown as typeof it) : it
  const servers: { close(): Promise<void> }[] = []

  beforeAll(() => kind.setUp())
  beforeEach(() => kind.clear())
  afterEach(async () => {
    vi.restoreAllMocks()
    for (const server of servers.splice(0)) await server.close()
  })

  /** Starts the adapter's server for `app`; it is closed after the test. */
  async function serve(app: ContractApp): Promise<string> {
    const server = await adapter.start(app)
    servers.push(server)
    return server.url
  }

  let limits = 0

  /**
   * One limit on one route, its limiter built here so the case can peek at it; each on a prefix of its own,
   * so that the limits of one case never share state (the Redis kind's store is one server).
   */
  async function limited(
    rules: RulesOption<unknown>,
    options: Record<string, unknown> = {},
    route = okRoute(),
  ) {
    const limiter = createLimiter({ rules, store: kind.store(), prefix: `limit-${++limits}` })
    const url = await serve({ limits: [{ limiter, ...options }], routes: [route.route] })
    return { limiter, url, calls: route.calls }
  }

  /** Units of a `limit`-unit rule a key has used: `peek` answers as if it counted one more. */
  const usedOf = (limiter: { peek(key: string): Promise<Decision> }, of: number) => async (key: string) =>
    of - 1 - (await limiter.peek(key)).remaining

  describe('headers, denials and bodies', () => {
    it('admits up to the limit with the draft headers, then answers 429 with Retry-After and a problem body', async () => {
      const { url, calls } = await limited([slidingLog({ limit: 2, windowMs: 60_000 })])
      const first = await send(`${url}/items/1`)
      expect(first.status).toBe(200)
      expect(first.headers.get('ratelimit-policy')).toBe('"2-per-60s";q=2;w=60')
      expect(first.headers.get('ratelimit')).toBe('"2-per-60s";r=1;t=60')
      expect(first.headers.get('retry-after')).toBeNull()
      expect(JSON.parse(first.text)).toEqual({ ok: true, remaining: 1 })

      kind.advance(15_000)
      const second = await send(`${url}/items/2`)
      expect(second.status).toBe(200)
      expect(second.headers.get('ratelimit')).toBe('"2-per-60s";r=0;t=60')

      const third = await send(`${url}/items/3`)
      expect(third.status).toBe(429)
      expect(third.headers.get('content-type')).toMatch(PROBLEM)
      expect(third.headers.get('retry-after')).toBe('45')
      expect(third.headers.get('ratelimit-policy')).toBe('"2-per-60s";q=2;w=60')
      expect(third.headers.get('ratelimit')).toBe('"2-per-60s";r=0;t=60')
      expect(JSON.parse(third.text)).toEqual({
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        detail: 'Rate limit 2-per-60s exceeded; retry in 45 s.',
        retryAfter: 45,
      })
      expect(third.headers.get('content-length')).toBe(String(Buffer.byteLength(third.text)))
      expect(calls).toHaveLength(2)
    })

    it('lists one policy item per rule; Retry-After follows the rule that frees up last', async () => {
      const { url } = await limited([
        slidingLog({ limit: 3, windowMs: 10_000 }),
        slidingLog({ limit: 3, windowMs: 60_000 }),
      ])
      for (let i = 0; i < 3; i++) expect((await send(`${url}/items/${i}`)).status).toBe(200)
      kind.advance(1)
      const denied = await send(`${url}/items/4`)
      expect(denied.status).toBe(429)
      expect(denied.headers.get('retry-after')).toBe('60')
      expect(denied.headers.get('ratelimit-policy')).toBe('"3-per-10s";q=3;w=10, "3-per-60s";q=3;w=60')
      expect(denied.headers.get('ratelimit')).toBe('"3-per-10s";r=0;t=10, "3-per-60s";r=0;t=60')
      expect(JSON.parse(denied.text).detail).toMatch(/^Rate limit 3-per-60s exceeded; retry in \d+ s\.$/)
    })

    stacked(
      "lists every stacked limit that counted a request, in order; a denial carries both and the denier's Retry-After",
      async () => {
        const store = kind.store()
        const route = okRoute()
        const url = await serve({
          limits: [
            { rules: [slidingLog({ limit: 100, windowMs: 60_000, name: 'global' })], store, prefix: 'g' },
            { rules: [slidingLog({ limit: 1, windowMs: 30_000, name: 'item' })], store, prefix: 'i' },
          ],
          routes: [route.route],
        })
        const first = await send(`${url}/items/1`)
        expect(first.status).toBe(200)
        expect(first.headers.get('ratelimit-policy')).toBe('"global";q=100;w=60, "item";q=1;w=30')
        expect(first.headers.get('ratelimit')).toBe('"global";r=99;t=60, "item";r=0;t=30')
        const denied = await send(`${url}/items/1`)
        expect(denied.status).toBe(429)
        expect(denied.headers.get('ratelimit-policy')).toBe('"global";q=100;w=60, "item";q=1;w=30')
        expect(denied.headers.get('ratelimit')).toBe('"global";r=98;t=60, "item";r=0;t=30')
        expect(denied.headers.get('retry-after')).toBe('30')
        expect(route.calls).toHaveLength(1)
      },
    )

    it('writes draft-7, draft-6, legacy X-RateLimit-* headers, or none, as the headers option asks', async () => {
      const get = async (headers: unknown) => {
        const { url } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], { headers })
        return [await send(`${url}/items/1`), await send(`${url}/items/1`)] as const
      }
      const [draft7, draft7Denied] = await get({ standard: 'draft-7' })
      expect(draft7.headers.get('ratelimit-policy')).toBe('1;w=60')
      expect(draft7.headers.get('ratelimit')).toBe('limit=1, remaining=0, reset=60')
      expect(draft7Denied.headers.get('retry-after')).toBe('60')

      const [draft6] = await get({ standard: 'draft-6' })
      expect(draft6.headers.get('ratelimit-policy')).toBe('1;w=60')
      expect(draft6.headers.get('ratelimit-limit')).toBe('1')
      expect(draft6.headers.get('ratelimit-remaining')).toBe('0')
      expect(draft6.headers.get('ratelimit-reset')).toBe('60')
      expect(draft6.headers.get('ratelimit')).toBeNull()

      const [legacy, legacyDenied] = await get({ standard: false, legacy: true })
      expect(legacy.headers.get('x-ratelimit-limit')).toBe('1')
      expect(legacy.headers.get('x-ratelimit-remaining')).toBe('0')
      expect(legacy.headers.get('ratelimit')).toBeNull()
      expect(legacyDenied.headers.get('x-ratelimit-remaining')).toBe('0')
      expect(legacyDenied.headers.get('retry-after')).toBe('60')

      const [none, noneDenied] = await get(false)
      expect(limitHeaders(none)).toEqual([])
      expect(noneDenied.status).toBe(429)
      expect(limitHeaders(noneDenied)).toEqual([])
    })

    it('answers statusCode with a message as the problem detail, and a message object as plain JSON', async () => {
      const busy = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        statusCode: 503,
        message: 'Payments are busy.',
      })
      await send(`${busy.url}/items/1`)
      const denied = await send(`${busy.url}/items/1`)
      expect(denied.status).toBe(503)
      expect(denied.headers.get('content-type')).toMatch(PROBLEM)
      expect(JSON.parse(denied.text)).toMatchObject({
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'Payments are busy.',
      })

      const own = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], { message: { error: 'busy' } })
      await send(`${own.url}/items/1`)
      const plain = await send(`${own.url}/items/1`)
      expect(plain.status).toBe(429)
      expect(plain.headers.get('content-type')).toMatch(/^application\/json(;|$)/)
      expect(plain.text).toBe('{"error":"busy"}')
    })

    it('exposes the decision to the handler; undefined when no limit counted the request', async () => {
      const route = okRoute()
      const limiter = createLimiter({
        rules: [tokenBucket({ capacity: 5, refillPerSecond: 1 })],
        store: kind.store(),
      })
      const url = await serve({
        limits: [{ limiter, key: { header: 'x-client' }, onMissingKey: 'skip' }],
        routes: [route.route],
      })
      const client = { headers: { 'x-client': 'c1' } }
      expect((await send(`${url}/items/1`, client)).status).toBe(200)
      expect(route.calls[0]).toMatchObject({
        allowed: true,
        limit: 5,
        remaining: 4,
        retryAfterMs: 0,
        waitMs: 0,
        rule: '5-burst-1-per-s',
        reason: 'rules',
      })
      expect(route.calls[0]!.resetMs).toBe(1000)
      const skipped = await send(`${url}/items/1`)
      expect(skipped.status).toBe(200)
      expect(limitHeaders(skipped)).toEqual([])
      expect(route.calls).toHaveLength(2)
      expect(route.calls[1]).toBeUndefined()
      expect((await limiter.peek('c1')).remaining).toBe(3)
    })
  })

  describe('keys', () => {
    it("keys by the client's address by default; X-Forwarded-For changes nothing unless the proxy is trusted", async () => {
      const { url, limiter } = await limited([fixedWindow({ limit: 10, windowMs: 3_600_000 })])
      const used = usedOf(limiter, 10)
      await send(`${url}/items/1`, { headers: { 'x-forwarded-for': '203.0.113.9' } })
      await send(`${url}/items/1`, { headers: { 'x-forwarded-for': '198.51.100.4' } })
      expect(await used('127.0.0.1')).toBe(2)
      expect(await used('203.0.113.9')).toBe(0)
    })

    stacked(
      'behind a trusted proxy keys by X-Forwarded-For, IPv6 clients grouped by /56 or by ipv6Subnet',
      async () => {
        const store = kind.store()
        const wide = createLimiter({
          rules: [fixedWindow({ limit: 10, windowMs: 3_600_000 })],
          store,
          prefix: 'w',
        })
        const narrow = createLimiter({
          rules: [fixedWindow({ limit: 10, windowMs: 3_600_000 })],
          store,
          prefix: 'n',
        })
        const url = await serve({
          limits: [{ limiter: wide }, { limiter: narrow, ipv6Subnet: 64 }],
          routes: [okRoute().route],
          trustProxy: true,
        })
        await send(`${url}/items/1`, { headers: { 'x-forwarded-for': '2001:db8:0:1::1' } })
        await send(`${url}/items/1`, { headers: { 'x-forwarded-for': '2001:DB8:0:2:ffff::7' } })
        await send(`${url}/items/1`, { headers: { 'x-forwarded-for': '203.0.113.9' } })
        expect(await usedOf(wide, 10)('2001:db8::/56')).toBe(2)
        expect(await usedOf(narrow, 10)('2001:db8:0:1::/64')).toBe(1)
        expect(await usedOf(narrow, 10)('2001:db8:0:2::/64')).toBe(1)
        expect(await usedOf(wide, 10)('203.0.113.9')).toBe(1)
        expect(await usedOf(wide, 10)('127.0.0.1')).toBe(0)
      },
    )

    it("keys 'route' by method and route template, never by the ids in the URL", async () => {
      const limiter = createLimiter({
        rules: [fixedWindow({ limit: 10, windowMs: 3_600_000 })],
        store: kind.store(),
      })
      const url = await serve({
        limits: [{ limiter, key: 'route' }],
        routes: [okRoute('/pay/:orderId', 'POST').route, okRoute('/items/:id').route],
      })
      await send(`${url}/pay/1001`, { method: 'POST' })
      await send(`${url}/pay/1002?retry=1`, { method: 'POST' })
      await send(`${url}/items/7`)
      const used = usedOf(limiter, 10)
      expect(await used('POST /pay/:orderId')).toBe(2)
      expect(await used('GET /items/:id')).toBe(1)
    })

    it("counts a HEAD request on its route's GET key, so HEAD never doubles a per-route budget", async () => {
      const route = okRoute('/items/:id')
      const limiter = createLimiter({
        rules: [fixedWindow({ limit: 3, windowMs: 3_600_000 })],
        store: kind.store(),
      })
      const url = await serve({ limits: [{ limiter, key: 'route' }], routes: [route.route] })
      const statuses: number[] = []
      for (const [i, method] of ['GET', 'HEAD', 'GET', 'HEAD', 'GET'].entries()) {
        statuses.push((await send(`${url}/items/${i}`, { method })).status)
      }
      // The framework answers HEAD with the GET route's handler: three runs of it in all, then 429 for both.
      expect(statuses).toEqual([200, 200, 200, 429, 429])
      expect(route.calls).toHaveLength(3)
      expect((await limiter.peek('GET /items/:id')).allowed).toBe(false)
      expect((await limiter.peek('HEAD /items/:id')).remaining).toBe(2)
    })

    it('joins header parts into one key, such as x-biz-type + x-channel, escaping ":" in values', async () => {
      const { url, limiter } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        key: { header: ['x-biz-type', 'x-channel'] },
      })
      const pay = async (bizType: string, channel: string) =>
        (await send(`${url}/items/1`, { headers: { 'x-biz-type': bizType, 'x-channel': channel } })).status
      expect(await pay('PAYMENT', 'ALIPAY')).toBe(200)
      expect(await pay('PAYMENT', 'ALIPAY')).toBe(429)
      expect(await pay('PAYMENT', 'WECHAT')).toBe(200)
      expect(await pay('REFUND', 'ALIPAY')).toBe(200)
      expect(await pay('A:B', 'C')).toBe(200)
      expect(await pay('A', 'B:C')).toBe(200)
      expect((await limiter.peek('PAYMENT:ALIPAY')).allowed).toBe(false)
      expect((await limiter.peek('A\\:B:C')).allowed).toBe(false)
    })

    it('keys by a function of the request', async () => {
      const { url, limiter } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        key: adapter.keyFromHeader('x-api-key'),
      })
      expect((await send(`${url}/items/1`, { headers: { 'x-api-key': 'k1' } })).status).toBe(200)
      expect((await send(`${url}/items/1`, { headers: { 'x-api-key': 'k1' } })).status).toBe(429)
      expect((await send(`${url}/items/1`, { headers: { 'x-api-key': 'k2' } })).status).toBe(200)
      expect((await limiter.peek('k1')).allowed).toBe(false)
      const unknown = await send(`${url}/items/1`)
      expect(unknown.status).toBe(400)
      expect(unknown.headers.get('content-type')).toMatch(PROBLEM)
    })

    it('answers 400 with a problem body for a missing key header, never keying it as "undefined"', async () => {
      const { url, calls, limiter } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        key: { header: ['x-biz-type', 'x-channel'] },
      })
      const missing = await send(`${url}/items/1`, { headers: { 'x-biz-type': 'PAYMENT' } })
      expect(missing.status).toBe(400)
      expect(missing.headers.get('content-type')).toMatch(PROBLEM)
      expect(limitHeaders(missing)).toEqual([])
      expect(JSON.parse(missing.text)).toEqual({
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: 'This request needs the x-channel header.',
      })
      const empty = await send(`${url}/items/1`, { headers: { 'x-biz-type': 'PAYMENT', 'x-channel': '' } })
      expect(empty.status).toBe(400)
      expect(calls).toHaveLength(0)
      expect((await limiter.peek('PAYMENT:undefined')).remaining).toBe(0)
      expect((await limiter.peek('PAYMENT:undefined')).allowed).toBe(true)
    })

    it('lets a request with a missing key part through under skip, or counts it under a default', async () => {
      const skipping = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        key: { header: 'x-channel' },
        onMissingKey: 'skip',
      })
      for (let i = 0; i < 3; i++) {
        const res = await send(`${skipping.url}/items/1`)
        expect(res.status).toBe(200)
        expect(limitHeaders(res)).toEqual([])
      }
      expect(skipping.calls).toEqual([undefined, undefined, undefined])

      const defaulting = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], {
        key: { header: 'x-channel' },
        onMissingKey: { default: 'none' },
      })
      expect((await send(`${defaulting.url}/items/1`)).status).toBe(200)
      expect((await send(`${defaulting.url}/items/1`)).status).toBe(429)
      expect((await send(`${defaulting.url}/items/1`, { headers: { 'x-channel': 'ALIPAY' } })).status).toBe(
        200,
      )
      expect((await defaulting.limiter.peek('none')).allowed).toBe(false)
    })
  })

  describe('queue-and-wait', () => {
    it('holds queued requests their waitMs, in order, and answers 429 past maxQueueMs', async () => {
      // One slot a second, two seconds of queue: the fourth of four requests sent at once has no place.
      const route = okRoute()
      const { url } = await limited([leakyBucket({ ratePerSecond: 1, maxQueueMs: 2000 })], {}, route)
      const answers = await Promise.all([1, 2, 3, 4].map((id) => send(`${url}/items/${id}`)))
      const denied = answers.filter((a) => a.status === 429)
      expect(answers.filter((a) => a.status === 200)).toHaveLength(3)
      expect(denied).toHaveLength(1)
      expect(JSON.parse(denied[0]!.text).detail).toMatch(
        /^Rate limit 1-per-s-queue-2000ms exceeded; retry in 1 s\.$/,
      )
      const waits = route.calls.map((d) => d!.waitMs)
      expect(waits).toEqual([0, 1000, 2000])
    })

    it('stops holding a request whose client leaves: its handler never runs and its slot goes back', async () => {
      // One slot every 10 s: the held request waits long enough to be abandoned however loaded the machine.
      const { url, limiter, calls } = await limited([leakyBucket({ ratePerSecond: 0.1, maxQueueMs: 60_000 })])
      await limiter.consume('127.0.0.1') // the slot that needs no wait
      const nextWait = async () => (await limiter.peek('127.0.0.1')).waitMs
      const client = openRequest(`${url}/items/1`)
      await vi.waitFor(async () => expect(await nextWait()).toBe(20_000))
      client.destroy()
      // Nobody queued behind it, so its slot went back: the next caller waits one interval, not two.
      await vi.waitFor(async () => expect(await nextWait()).toBe(10_000))
      await turn()
      expect(calls).toHaveLength(0)
    })
  })

  describe('the response-end phase', () => {
    it('refunds what countWhen answers false for, at the response end: only failures count', async () => {
      const limiter = createLimiter({
        rules: [slidingLog({ limit: 2, windowMs: 60_000 })],
        store: kind.store(),
      })
      const fail: ContractRoute = {
        method: 'GET',
        path: '/fail',
        handle: () => ({ status: 401, body: { ok: false } }),
      }
      const url = await serve({
        limits: [{ limiter, countWhen: adapter.countWhen((status) => status >= 400) }],
        routes: [okRoute('/ok').route, fail],
      })
      const remaining = async () => (await limiter.peek('127.0.0.1')).remaining
      for (let i = 0; i < 4; i++) {
        expect((await send(`${url}/ok`)).status).toBe(200)
        await vi.waitFor(async () => expect(await remaining()).toBe(1))
      }
      expect((await send(`${url}/fail`)).status).toBe(401)
      expect((await send(`${url}/fail`)).status).toBe(401)
      expect((await send(`${url}/fail`)).status).toBe(429)
      expect((await send(`${url}/ok`)).status).toBe(429)
    })

    it('counts a request whose client left before the response was sent, without asking countWhen', async () => {
      const asked: number[] = []
      let arrived = 0
      const hang: ContractRoute = {
        method: 'GET',
        path: '/hang',
        handle: () => {
          arrived++
          return new Promise<ContractReply>(() => {})
        },
      }
      const limiter = createLimiter({
        rules: [slidingLog({ limit: 5, windowMs: 60_000 })],
        store: kind.store(),
      })
      const countWhen = adapter.countWhen(() => {
        asked.push(1)
        return false
      })
      const url = await serve({ limits: [{ limiter, countWhen }], routes: [hang] })
      const client = openRequest(`${url}/hang`)
      await vi.waitFor(() => expect(arrived).toBe(1))
      client.destroy()
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(asked).toEqual([])
      expect((await limiter.peek('127.0.0.1')).remaining).toBe(3)
    })

    it('holds a concurrency lease while the response runs; it is released when it ends or the client leaves', async () => {
      const finish: (() => void)[] = []
      const slow: ContractRoute = {
        method: 'GET',
        path: '/slow',
        handle: () =>
          new Promise<ContractReply>((resolve) => finish.push(() => resolve({ status: 200, body: {} }))),
      }
      const hang: ContractRoute = { method: 'GET', path: '/hang', handle: () => new Promise(() => {}) }
      const limiter = createLimiter({
        rules: [concurrency({ limit: 2, leaseMs: 60_000 })],
        store: kind.store(),
      })
      const url = await serve({ limits: [{ limiter }], routes: [slow, hang] })
      const held = async () => {
        const d = await limiter.peek('127.0.0.1')
        return 2 - d.remaining - (d.allowed ? 1 : 0)
      }
      const running = [send(`${url}/slow`), send(`${url}/slow`)]
      await vi.waitFor(() => expect(finish).toHaveLength(2))
      const third = await send(`${url}/slow`)
      expect(third.status).toBe(429)
      expect(third.headers.get('ratelimit-policy')).toBe('"2-concurrent";q=2;qu="concurrent-requests";w=60')
      finish.shift()!()
      expect((await running[0]!).status).toBe(200)
      await vi.waitFor(async () => expect(await held()).toBe(1))
      const hanging = openRequest(`${url}/hang`)
      await vi.waitFor(async () => expect(await held()).toBe(2))
      hanging.destroy()
      await vi.waitFor(async () => expect(await held()).toBe(1))
      finish.shift()!()
      await running[1]
      await vi.waitFor(async () => expect(await held()).toBe(0))
    })
  })

  describe('shadow, onLimited, blocks and channels', () => {
    it('in shadow mode counts as usual but lets every request through, with no rate-limit headers', async () => {
      const actions: string[] = []
      const listener = (m: unknown) => actions.push((m as { action: string }).action)
      subscribe('sluice:http', listener)
      try {
        const { url, limiter } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], { shadow: true })
        const answers = [await send(`${url}/items/1`), await send(`${url}/items/1`)]
        expect(answers.map((a) => a.status)).toEqual([200, 200])
        for (const a of answers) expect(limitHeaders(a)).toEqual([])
        expect(JSON.parse(answers[1]!.text)).toEqual({ ok: true, remaining: 0 })
        expect((await limiter.peek('127.0.0.1')).allowed).toBe(false)
        expect(actions).toEqual(['allow', 'shadow'])
      } finally {
        unsubscribe('sluice:http', listener)
      }
    })

    it('sends its 429 when onLimited only looks (sync and async), so the request never hangs', async () => {
      for (const later of [false, true]) {
        const seen: number[] = []
        const onLimited = adapter.onLimited((decision) => {
          seen.push(decision.limit)
          return later ? Promise.resolve(undefined) : undefined
        })
        const { url } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], { onLimited })
        await send(`${url}/items/1`)
        const denied = await send(`${url}/items/1`)
        expect(denied.status).toBe(429)
        expect(denied.headers.get('content-type')).toMatch(PROBLEM)
        expect(JSON.parse(denied.text)).toMatchObject({ status: 429, title: 'Too Many Requests' })
        expect(seen).toEqual([1])
      }
    })

    it('lets onLimited answer the denial itself, the rate-limit headers already set', async () => {
      const seen: Decision[] = []
      const onLimited = adapter.onLimited(async (decision) => {
        seen.push(decision)
        await Promise.resolve()
        return { status: 503, body: { slowDown: decision.rule } }
      })
      const { url } = await limited([slidingLog({ limit: 1, windowMs: 60_000 })], { onLimited })
      await send(`${url}/items/1`)
      const denied = await send(`${url}/items/1`)
      expect(denied.status).toBe(503)
      expect(JSON.parse(denied.text)).toEqual({ slowDown: '1-per-60s' })
      expect(denied.headers.get('retry-after')).toBe('60')
      expect(denied.headers.get('ratelimit')).toBe('"1-per-60s";r=0;t=60')
      expect(seen).toHaveLength(1)
      expect(seen[0]).toMatchObject({ allowed: false, rule: '1-per-60s' })
    })

    it('answers the denial that begins a block and every blocked request with blockedStatusCode', async () => {
      const limiter = createLimiter({
        rules: [slidingLog({ limit: 2, windowMs: 1000 })],
        store: kind.store(),
        block: { ms: 30_000, factor: 2, maxMs: 120_000, forgetMs: 3_600_000 },
      })
      const url = await serve({ limits: [{ limiter, blockedStatusCode: 403 }], routes: [okRoute().route] })
      expect((await send(`${url}/items/1`)).status).toBe(200)
      expect((await send(`${url}/items/1`)).status).toBe(200)
      // The window would free a place within a second, but the block lasts 30.
      const began = await send(`${url}/items/1`)
      expect(began.status).toBe(403)
      expect(began.headers.get('retry-after')).toBe('30')
      expect(JSON.parse(began.text)).toMatchObject({ title: 'Forbidden', status: 403 })
      expect(JSON.parse(began.text).detail).toMatch(/^Rate limit 2-per-1s exceeded; retry in \d+ s\.$/)
      kind.advance(15_000)
      const blocked = await send(`${url}/items/1`)
      expect(blocked.status).toBe(403)
      expect(blocked.headers.get('retry-after')).toBe('15')
      expect(JSON.parse(blocked.text).detail).toMatch(
        /^Blocked after exceeding rate limit 2-per-1s; retry in \d+ s\.$/,
      )
      await limiter.reset('127.0.0.1')
      expect((await send(`${url}/items/1`)).status).toBe(200)
    })

    it('publishes each decision on sluice:http with the route template, never the raw URL', async () => {
      const messages: { action: string; route?: string; key: string; limiter: string }[] = []
      const listener = (m: unknown) => messages.push(m as (typeof messages)[number])
      subscribe('sluice:http', listener)
      try {
        const limiter = createLimiter({
          rules: [slidingLog({ limit: 1, windowMs: 60_000 })],
          store: kind.store(),
          prefix: 'channel',
        })
        const url = await serve({
          limits: [{ limiter, key: 'route' }],
          routes: [okRoute('/items/:id').route],
        })
        await send(`${url}/items/41`)
        await send(`${url}/items/42?x=1`)
        expect(messages.map(({ action, route, key, limiter }) => ({ action, route, key, limiter }))).toEqual([
          { action: 'allow', route: 'GET /items/:id', key: 'GET /items/:id', limiter: 'channel' },
          { action: 'deny', route: 'GET /items/:id', key: 'GET /items/:id', limiter: 'channel' },
        ])
      } finally {
        unsubscribe('sluice:http', listener)
      }
    })
  })

  describe('token budgets: per-rule costs, settling, OpenAI headers', () => {
    /** Two rules a request reserves against: one request, and its tokens (`x-tokens`). */
    const budget = () => [
      fixedWindow({ limit: 5, windowMs: 60_000, name: 'requests' }),
      fixedWindow({ limit: 100, windowMs: 60_000, name: 'tokens' }),
    ]
    const client = { headers: { 'x-client': 'c1', 'x-tokens': '40' } }

    // Each case begins at the start of a minute: its one-minute windows reset in exactly 60 s.
    beforeEach(() => kind.advance((60_000 - (kind.now() % 60_000)) % 60_000))

    /** A limit over `budget()` keyed by `x-client`, reserving `{ tokens: x-tokens }` per request. */
    function budgetOptions(more: Record<string, unknown> = {}) {
      const tokens = adapter.keyFromHeader('x-tokens') as (request: unknown) => string | undefined
      const limiter = createLimiter({ rules: budget(), store: kind.store(), prefix: `budget-${++limits}` })
      const options = {
        limiter,
        key: adapter.keyFromHeader('x-client'),
        cost: (request: unknown) => ({ tokens: Number(tokens(request)) }),
        ...more,
      }
      return { limiter, options }
    }

    /** Units each rule of `c1` has used: a peek answers as if it counted one more. */
    const used = async (limiter: { peek(key: string): Promise<Decision> }) => {
      const peeked = await limiter.peek('c1')
      return Object.fromEntries(peeked.rules.map((rule) => [rule.rule, rule.limit - 1 - rule.remaining]))
    }

    /** The next settle published on `sluice:http`. */
    function nextSettle(): Promise<Record<string, unknown>> {
      return new Promise((resolve) => {
        const listener = (message: unknown) => {
          const m = message as Record<string, unknown>
          if (m.action !== 'settle') return
          unsubscribe('sluice:http', listener)
          resolve(m)
        }
        subscribe('sluice:http', listener)
      })
    }

    /** A route streaming `first`, then, once `release()` is called, `rest`. */
    function streamRoute() {
      let release!: () => void
      const gate = new Promise<void>((resolve) => {
        release = resolve
      })
      const route: ContractRoute = {
        method: 'GET',
        path: '/v1/chat',
        handle: () => ({
          status: 200,
          body: null,
          stream: (async function* () {
            yield 'first;'
            await gate
            yield 'rest'
          })(),
        }),
      }
      return { route, release }
    }

    it("reserves the request's cost per rule, all or none, and sends OpenAI's headers exactly", async () => {
      const { limiter, options } = budgetOptions({ headers: 'openai' })
      const url = await serve({ limits: [options], routes: [okRoute('/v1/chat').route] })
      const first = await send(`${url}/v1/chat`, { headers: { 'x-client': 'c1', 'x-tokens': '30' } })
      expect(first.status).toBe(200)
      expect(limitHeaders(first).sort()).toEqual([
        'x-ratelimit-limit-requests',
        'x-ratelimit-limit-tokens',
        'x-ratelimit-remaining-requests',
        'x-ratelimit-remaining-tokens',
        'x-ratelimit-reset-requests',
        'x-ratelimit-reset-tokens',
      ])
      expect(first.headers.get('x-ratelimit-limit-requests')).toBe('5')
      expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('4')
      expect(first.headers.get('x-ratelimit-reset-requests')).toBe('1m0s')
      expect(first.headers.get('x-ratelimit-limit-tokens')).toBe('100')
      expect(first.headers.get('x-ratelimit-remaining-tokens')).toBe('70')
      expect(first.headers.get('x-ratelimit-reset-tokens')).toBe('1m0s')
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 30 })

      kind.advance(59_880)
      // 80 tokens do not fit in 70: denied, and the requests rule counts nothing either.
      const denied = await send(`${url}/v1/chat`, { headers: { 'x-client': 'c1', 'x-tokens': '80' } })
      expect(denied.status).toBe(429)
      expect(denied.headers.get('retry-after')).toBe('1')
      expect(denied.headers.get('x-ratelimit-remaining-tokens')).toBe('70')
      expect(denied.headers.get('x-ratelimit-reset-tokens')).toBe('120ms')
      expect(denied.headers.get('x-ratelimit-remaining-requests')).toBe('4')
      expect(denied.headers.get('ratelimit')).toBeNull()
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 30 })

      // A cost no rule can take is the request's error (the framework's error path), and counts nothing.
      vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
      const unknown = await send(`${url}/v1/chat`, { headers: { 'x-client': 'c1', 'x-tokens': '-1' } })
      expect(unknown.status).toBe(500)
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 30 })
    })

    it('settles a streamed answer once its body has ended, at what the settle option answers', async () => {
      const asked: boolean[] = []
      const { limiter, options } = budgetOptions({
        settle: (_request: unknown, _response: unknown, finished: boolean) => {
          asked.push(finished)
          return { tokens: 12 }
        },
      })
      const { route, release } = streamRoute()
      const url = await serve({ limits: [options], routes: [route] })
      const settled = nextSettle()
      const res = await fetch(`${url}/v1/chat`, client)
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      expect(new TextDecoder().decode((await reader.read()).value)).toBe('first;')
      // Mid-stream, the reservation stands and nobody was asked.
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 40 })
      expect(asked).toEqual([])
      release()
      let rest = ''
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        rest += new TextDecoder().decode(chunk.value)
      }
      expect(rest).toBe('rest')
      const message = await settled
      expect(message).toMatchObject({
        key: 'c1',
        reserved: { requests: 1, tokens: 40 },
        cost: { requests: 1, tokens: 12 },
      })
      expect(asked).toEqual([true])
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 12 })
    })

    it('settles when the client leaves mid-stream, the settle option told the response did not finish', async () => {
      const asked: boolean[] = []
      const { limiter, options } = budgetOptions({
        settle: (_request: unknown, _response: unknown, finished: boolean) => {
          asked.push(finished)
          return finished ? undefined : { tokens: 5 }
        },
      })
      const { route, release } = streamRoute()
      const url = await serve({ limits: [options], routes: [route] })
      const settled = nextSettle()
      const request = http.get(`${url}/v1/chat`, { agent: false, headers: client.headers })
      request.on('error', () => {})
      const firstChunk = await new Promise<string>((resolve) => {
        request.on('response', (res) => res.once('data', (chunk: Buffer) => resolve(chunk.toString())))
      })
      expect(firstChunk).toBe('first;')
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 40 })
      request.destroy()
      const message = await settled
      release()
      expect(message).toMatchObject({ key: 'c1', cost: { requests: 1, tokens: 5 } })
      expect(asked).toEqual([false])
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 5 })
    })

    it('lets the handler settle at once: the settle option is then not asked, and a second settle is refused', async () => {
      const asked: boolean[] = []
      const { limiter, options } = budgetOptions({
        headers: { standard: 'draft-8', openai: true },
        settle: (_request: unknown, _response: unknown, finished: boolean) => {
          asked.push(finished)
          return 99
        },
      })
      const route: ContractRoute = {
        method: 'POST',
        path: '/v1/chat',
        handle: async (shown) => {
          const after = await shown!.settle({ tokens: 7 })
          const again = await shown!.settle(1).then(
            () => 'settled twice',
            (error: { code?: string }) => error.code,
          )
          return {
            status: 200,
            body: {
              before: shown!.rules.map((r) => r.remaining),
              after: after.rules.map((r) => r.remaining),
              again,
            },
          }
        },
      }
      const url = await serve({ limits: [options], routes: [route] })
      const settled = nextSettle()
      const answer = await send(`${url}/v1/chat`, { method: 'POST', headers: client.headers })
      expect(answer.status).toBe(200)
      // What the response was admitted with (its headers, `before`), and what a peek answered after the settle.
      expect(answer.headers.get('ratelimit')).toBe('"requests";r=4;t=60, "tokens";r=60;t=60')
      expect(answer.headers.get('x-ratelimit-remaining-tokens')).toBe('60')
      expect(JSON.parse(answer.text)).toEqual({
        before: [4, 60],
        after: [3, 92],
        again: ErrorCode.INVALID_SETTLE,
      })
      expect(await settled).toMatchObject({
        reserved: { requests: 1, tokens: 40 },
        cost: { requests: 1, tokens: 7 },
      })
      await turn()
      expect(asked).toEqual([])
      expect(await used(limiter)).toEqual({ requests: 1, tokens: 7 })
    })

    stacked('a handler settle reaches every stacked limit, each only under the rules it has', async () => {
      const store = kind.store()
      const tokens = adapter.keyFromHeader('x-tokens') as (request: unknown) => string | undefined
      const global = createLimiter({
        rules: [fixedWindow({ limit: 10, windowMs: 60_000, name: 'requests' })],
        store,
        prefix: `global-${++limits}`,
      })
      const model = createLimiter({
        rules: [fixedWindow({ limit: 100, windowMs: 60_000, name: 'tokens' })],
        store,
        prefix: `model-${++limits}`,
      })
      const route: ContractRoute = {
        method: 'GET',
        path: '/v1/chat',
        handle: async (shown) => {
          const after = await shown!.settle({ tokens: 9 })
          return { status: 200, body: { remaining: after.remaining } }
        },
      }
      const url = await serve({
        limits: [
          { limiter: global, key: adapter.keyFromHeader('x-client') },
          {
            limiter: model,
            key: adapter.keyFromHeader('x-client'),
            cost: (request: unknown) => Number(tokens(request)),
          },
        ],
        routes: [route],
      })
      const answer = await send(`${url}/v1/chat`, client)
      expect(answer.status).toBe(200)
      expect(JSON.parse(answer.text)).toEqual({ remaining: 90 })
      expect(await used(global)).toEqual({ requests: 1 })
      expect(await used(model)).toEqual({ tokens: 9 })
    })
  })

  describe('options', () => {
    it('answers a rules function that forgot its return (undefined) on the error path with ERR_SLUICE_INVALID_RULES and one warning, never as not limited', async () => {
      const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
      const forgot = await limited(() => undefined as never)
      const statuses = [await send(`${forgot.url}/items/1`), await send(`${forgot.url}/items/2`)].map(
        (a) => a.status,
      )
      expect(statuses).toEqual([500, 500])
      expect(forgot.calls).toHaveLength(0)
      const ours = warnings.mock.calls.filter(
        ([, options]) => (options as { code?: string } | undefined)?.code === ErrorCode.INVALID_RULES,
      )
      expect(ours).toHaveLength(1)
      expect(String(ours[0]![0])).toContain('Invalid rules from the rules function: undefined; expected')
      expect(ours[0]![1]).toMatchObject({ type: 'SluiceWarning' })

      // null, and only null, means not limited.
      const open = await limited(() => null)
      for (let i = 0; i < 3; i++) {
        const answer = await send(`${open.url}/items/1`)
        expect(answer.status).toBe(200)
        expect(limitHeaders(answer)).toEqual([])
      }
    })

    it('takes rule text from a rules function, one text or a list of texts and rules, as it takes static text', async () => {
      const one = await limited(() => 'slidingLog:1/1m')
      expect((await send(`${one.url}/items/1`)).status).toBe(200)
      const denied = await send(`${one.url}/items/1`)
      expect(denied.status).toBe(429)
      expect(denied.headers.get('ratelimit-policy')).toBe('"1-per-60s";q=1;w=60')

      const list = await limited(async () => [
        'slidingLog:2/1m',
        fixedWindow({ limit: 10, windowMs: 3_600_000 }),
      ])
      const answers = [await send(`${list.url}/items/1`), await send(`${list.url}/items/1`)]
      expect(answers.map((a) => a.status)).toEqual([200, 200])
      expect(answers[1]!.headers.get('ratelimit-policy')).toBe(
        '"2-per-60s";q=2;w=60, "10-per-3600s";q=10;w=3600',
      )
      expect((await send(`${list.url}/items/1`)).status).toBe(429)
      expect(list.calls).toHaveLength(2)
    })

    it('throws coded errors naming the option for invalid options, at construction, before any request', async () => {
      const rules = [slidingLog({ limit: 1, windowMs: 60_000 })]
      const cases: [Record<string, unknown>, string][] = [
        [{ rules, windowMs: 60_000 }, `${adapter.where}.windowMs`],
        [{ rules, cost: 0 }, `${adapter.where}.cost`],
        [{ rules, statusCode: 200 }, `${adapter.where}.statusCode`],
        [{ rules, key: 'url' }, `${adapter.where}.key`],
        [{ rules, onLimited: 'send 429' }, `${adapter.where}.onLimited`],
        [{ limiter: createLimiter({ rules }), prefix: 'x' }, `${adapter.where}.prefix`],
        [{}, `${adapter.where}.rules`],
      ]
      const route = okRoute()
      for (const [options, option] of cases) {
        await expect(
          adapter.start({ limits: [options], routes: [route.route] }),
          option,
        ).rejects.toMatchObject({
          code: ErrorCode.INVALID_OPTION,
          option,
        })
      }
      expect(route.calls).toEqual([])
    })
  })
}
