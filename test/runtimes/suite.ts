/**
 * @module The Fetch and Hono suites, written once and run unchanged on Node (under vitest), Bun and Deno
 * (through run.ts), on the memory store and on a real redis-server. Each case serves real requests with
 * the runtime's own server and asserts exact statuses, headers and counts; anything that must wait for
 * the server (a released lease) polls with a margin no load reaches. The concurrency cases run on every
 * store: on a RedisStore they failed while its denied-key cache kept a concurrency rule's 429 until the
 * lease's end, so a request after a release was still refused (fixed in @sluice/redis by 742bbaf).
 */
import assert from 'node:assert/strict'
import process from 'node:process'
import {
  concurrency,
  type Decision,
  ErrorCode,
  fixedWindow,
  type Limiter,
  leakyBucket,
  type Store,
} from '@sluice/core'
import { fetchLimit } from '@sluice/fetch'
import { rateLimit } from '@sluice/hono'
import { Hono } from 'hono'
import type { Runtime, Served } from './runtime.ts'

export interface SuiteCase {
  readonly name: string
  /** `store` is the store under test; `prefix` keeps this case's keys apart from every other run's. */
  run(rt: Runtime, store: Store, prefix: string): Promise<void>
}

const MINUTE = fixedWindow({ limit: 2, windowMs: 60_000 })

/**
 * Waits, when the next minute starts within 5 s, until it has started. The cases count in fixed windows of
 * 60 s on the wall clock (they run in Bun and Deno processes, where no manual clock reaches), and a window
 * that ended between two requests of a case reset its count: a second request read `r=1`, not `r=0`. Each
 * runner calls it before each case.
 */
export async function clearOfMinuteEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 5_000) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

async function using(served: Served, body: (url: string) => Promise<void>): Promise<void> {
  try {
    await body(served.url)
  } finally {
    await served.close()
  }
}

/** Asks `again` until it answers true, 50 ms apart, for at most 10 s: a wait no load stretches that far. */
async function eventually(what: string, again: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await again()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`${what}: not within 10 s`)
}

/** A body the test ends: one chunk at once, the rest when `finish` is called. */
function controlledStream() {
  let finish!: () => void
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('first '))
      finish = () => {
        controller.enqueue(new TextEncoder().encode('last'))
        controller.close()
      }
    },
  })
  return { body, finish: () => finish() }
}

async function assertDenied(response: Response, calls: () => number, before: number): Promise<void> {
  assert.equal(response.status, 429)
  assert.equal(response.headers.get('content-type'), 'application/problem+json')
  const body = (await response.json()) as { status: number; title: string; retryAfter: number }
  assert.equal(body.status, 429)
  assert.equal(body.title, 'Too Many Requests')
  assert.equal(response.headers.get('retry-after'), String(body.retryAfter))
  assert.ok(body.retryAfter >= 1 && body.retryAfter <= 60, `retryAfter ${body.retryAfter}`)
  assert.equal(calls(), before, 'the handler is not called for a denied request')
}

/** A streamed answer holds a concurrency lease until it has been read to its end, or is cancelled. */
async function leaseLastsAsLongAsTheStream(
  url: string,
  streams: Array<{ finish(): void }>,
  path = '/',
): Promise<void> {
  const first = await fetch(`${url}${path}`)
  assert.equal(first.status, 200)
  const reader = first.body!.getReader()
  assert.equal(new TextDecoder().decode((await reader.read()).value), 'first ')
  const second = await fetch(`${url}${path}`)
  assert.equal(second.status, 429, 'the lease is held while the body streams')
  await second.body?.cancel()
  streams[0]!.finish()
  let text = ''
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    text += new TextDecoder().decode(chunk.value)
  }
  assert.equal(text, 'last')
  const third = await fetch(`${url}${path}`)
  assert.equal(third.status, 200, 'the lease was released when the body had been read')
  // A client that cancels the body mid-stream ends the request: its lease is released.
  await third.body!.cancel()
  const fourth = await eventuallyAdmitted('the lease of a cancelled body is released', url + path)
  // So does a client that goes away (its fetch aborted) mid-stream.
  const leaving = new AbortController()
  await fourth.body!.cancel()
  const fifth = await eventuallyAdmitted(
    'the lease of a cancelled body is released',
    url + path,
    leaving.signal,
  )
  leaving.abort()
  await fifth.body?.cancel().catch(() => {})
  const sixth = await eventuallyAdmitted('the lease of an aborted request is released', url + path)
  await sixth.body!.cancel()
}

/** The first response to `url` that is admitted, asking again while the lease is held (10 s at most). */
async function eventuallyAdmitted(what: string, url: string, signal?: AbortSignal): Promise<Response> {
  let admitted: Response | undefined
  await eventually(what, async () => {
    const response = await fetch(url, { signal })
    if (response.status === 200) admitted = response
    else await response.body?.cancel()
    return admitted !== undefined
  })
  return admitted!
}

export const fetchCases: SuiteCase[] = [
  {
    name: 'fetchLimit admits up to the limit with rate-limit headers, then answers 429 with Retry-After and problem details',
    async run(rt, store, prefix) {
      const limit = fetchLimit({ rules: [MINUTE], store, prefix })
      let calls = 0
      const remaining: Array<number | undefined> = []
      const served = await rt.serveFetch((request, ip) =>
        limit.handle(request, { ip }, (_request, decision) => {
          calls++
          remaining.push(decision?.remaining)
          return new Response('ok')
        }),
      )
      await using(served, async (url) => {
        for (const left of [1, 0]) {
          const response = await fetch(url)
          assert.equal(response.status, 200)
          assert.equal(await response.text(), 'ok')
          assert.equal(response.headers.get('ratelimit-policy'), '"2-per-60s";q=2;w=60')
          assert.match(response.headers.get('ratelimit') ?? '', new RegExp(`^"2-per-60s";r=${left};t=\\d+$`))
        }
        const denied = await fetch(url)
        assert.equal(denied.headers.get('ratelimit-policy'), '"2-per-60s";q=2;w=60')
        await assertDenied(denied, () => calls, 2)
        assert.deepEqual(remaining, [1, 0])
      })
    },
  },
  {
    name: 'fetchLimit adds the headers to an immutable Response (Response.redirect), keeping its status and Location',
    async run(rt, store, prefix) {
      const limit = fetchLimit({ rules: [MINUTE], store, prefix })
      const served = await rt.serveFetch((request, ip) =>
        limit.handle(request, { ip }, () => Response.redirect('http://example.test/elsewhere', 302)),
      )
      await using(served, async (url) => {
        const response = await fetch(url, { redirect: 'manual' })
        assert.equal(response.status, 302)
        assert.equal(response.headers.get('location'), 'http://example.test/elsewhere')
        assert.equal(response.headers.get('ratelimit-policy'), '"2-per-60s";q=2;w=60')
        await response.body?.cancel()
      })
    },
  },
  {
    name: 'fetchLimit holds a concurrency lease as long as a streamed body, and releases it when the body is cancelled',
    async run(rt, store, prefix) {
      const limit = fetchLimit({ rules: [concurrency({ limit: 1 })], store, prefix })
      const streams: Array<{ finish(): void }> = []
      const served = await rt.serveFetch((request, ip) =>
        limit.handle(request, { ip }, () => {
          const stream = controlledStream()
          streams.push(stream)
          return new Response(stream.body)
        }),
      )
      await using(served, (url) => leaseLastsAsLongAsTheStream(url, streams))
    },
  },
  {
    name: 'fetchLimit holds a queued request, then runs it; one whose client leaves stops waiting and gives its slot back',
    async run(rt, store, prefix) {
      // One request per 20 s: a slot given back is told from one kept by 20 s of wait.
      const limit = fetchLimit({
        rules: [leakyBucket({ ratePerSecond: 0.05, maxQueueMs: 120_000 })],
        store,
        prefix,
        key: () => 'k',
      })
      const quick = fetchLimit({
        rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 60_000 })],
        store,
        prefix: `${prefix}q`,
        key: () => 'k',
      })
      let calls = 0
      const handled: Array<Promise<Response>> = []
      let seen!: () => void
      const arrived = new Promise<void>((resolve) => {
        seen = resolve
      })
      const served = await rt.serveFetch((request, ip) => {
        if (new URL(request.url).pathname === '/quick') {
          return quick.handle(request, { ip }, (_r, decision) => Response.json({ waitMs: decision?.waitMs }))
        }
        const answer = limit.handle(request, { ip }, () => {
          calls++
          return new Response('ran')
        })
        handled.push(answer)
        if (handled.length === 2) seen()
        return answer
      })
      await using(served, async (url) => {
        const waits: number[] = []
        for (let i = 0; i < 2; i++) {
          waits.push(((await (await fetch(`${url}/quick`)).json()) as { waitMs: number }).waitMs)
        }
        assert.equal(waits[0], 0)
        assert.ok(waits[1]! > 0, `the second, a second behind, was held and then ran (${waits})`)
        assert.equal(await (await fetch(url)).text(), 'ran')
        const leaving = new AbortController()
        const left = fetch(url, { signal: leaving.signal }).catch((error: unknown) => error)
        await arrived
        leaving.abort()
        await left
        assert.equal((await handled[1]!).status, 499)
        assert.equal(calls, 1, 'the handler of a request that left is never called')
        const next = await limit.limiter.peek('k')
        assert.ok(next.waitMs > 0 && next.waitMs <= 20_000, `one slot ahead, not two: waitMs ${next.waitMs}`)
      })
    },
  },
  {
    name: "fetchLimit asks countWhen about the handler's Response once its body has been read: false refunds",
    async run(rt, store, prefix) {
      const limit = fetchLimit({
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store,
        prefix,
        countWhen: (_request, response) => response.status >= 500,
      })
      const served = await rt.serveFetch((request, ip) =>
        limit.handle(request, { ip }, (r) =>
          new URL(r.url).pathname === '/fail' ? new Response('no', { status: 500 }) : new Response('yes'),
        ),
      )
      await using(served, async (url) => {
        for (let i = 0; i < 3; i++) {
          const ok = await fetch(url)
          assert.equal(ok.status, 200, `request ${i + 1} was refunded`)
          assert.equal(await ok.text(), 'yes')
        }
        const failed = await fetch(`${url}/fail`)
        assert.equal(failed.status, 500)
        await failed.text()
        const after = await fetch(url)
        assert.equal(after.status, 429, 'a failure counts')
        await after.body?.cancel()
      })
    },
  },
  {
    name: "fetchLimit: a rules function's undefined rejects handle with ERR_SLUICE_INVALID_RULES and one warning, never 'not limited'; its rule text is read as static text is",
    async run(rt, store, prefix) {
      const warnings: unknown[][] = []
      const emitWarning = process.emitWarning
      process.emitWarning = ((...args: unknown[]) => {
        warnings.push(args)
      }) as typeof process.emitWarning
      try {
        const forgot = fetchLimit({ rules: () => undefined as never, store, prefix })
        const text = fetchLimit({ rules: () => 'fixedWindow:2/1m', store, prefix: `${prefix}t` })
        let calls = 0
        const served = await rt.serveFetch(async (request, ip) => {
          const limit = new URL(request.url).pathname === '/text' ? text : forgot
          try {
            return await limit.handle(request, { ip }, () => {
              calls++
              return new Response('ok')
            })
          } catch (error) {
            return Response.json({ code: (error as { code?: string }).code }, { status: 500 })
          }
        })
        await using(served, async (url) => {
          for (let i = 0; i < 2; i++) {
            const failed = await fetch(url)
            assert.equal(failed.status, 500)
            assert.deepEqual(await failed.json(), { code: ErrorCode.INVALID_RULES })
          }
          assert.equal(calls, 0, 'a request under a rules function that answered undefined is never handled')
          const ours = warnings.filter(
            ([, options]) => (options as { code?: string } | undefined)?.code === ErrorCode.INVALID_RULES,
          )
          assert.equal(ours.length, 1)
          assert.match(String(ours[0]![0]), /Invalid rules from the rules function: undefined; expected/)
          const statuses: number[] = []
          for (let i = 0; i < 3; i++) {
            const response = await fetch(`${url}/text`)
            statuses.push(response.status)
            if (i === 0) assert.equal(response.headers.get('ratelimit-policy'), '"2-per-60s";q=2;w=60')
            await response.body?.cancel()
          }
          assert.deepEqual(statuses, [200, 200, 429])
          assert.equal(calls, 2)
        })
      } finally {
        process.emitWarning = emitWarning
      }
    },
  },
]

function honoApp(): Hono {
  return new Hono()
}

export const honoCases: SuiteCase[] = [
  {
    name: "Hono: app.use counts every request, per route limits key on the route's template, c.get('rateLimit') holds the decision",
    async run(rt, store, prefix) {
      const app = honoApp()
      app.use(
        rateLimit({
          rules: [fixedWindow({ limit: 3, windowMs: 60_000 })],
          store,
          prefix,
          getConnInfo: rt.getConnInfo,
        }),
      )
      let calls = 0
      app.get(
        '/users/:id',
        rateLimit({
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store,
          prefix: `${prefix}r`,
          key: 'route',
        }),
        (c) => {
          calls++
          return c.json({ remaining: c.get('rateLimit')?.remaining, id: c.req.param('id') })
        },
      )
      app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))
      await using(await rt.serveHono(app), async (url) => {
        const first = await fetch(`${url}/`)
        assert.deepEqual(await first.json(), { remaining: 2 })
        assert.equal(first.headers.get('ratelimit-policy'), '"3-per-60s";q=3;w=60')
        const user = await fetch(`${url}/users/1`)
        assert.deepEqual(await user.json(), { remaining: 0, id: '1' })
        // Both limits counted it: both policies, in order.
        assert.equal(user.headers.get('ratelimit-policy'), '"3-per-60s";q=3;w=60, "1-per-60s";q=1;w=60')
        const other = await fetch(`${url}/users/2`)
        await assertDenied(other, () => calls, 1)
        const over = await fetch(`${url}/`)
        await assertDenied(over, () => calls, 1)
      })
    },
  },
  {
    name: "Hono: key 'route' in app.use is the matched route's template (routePath(c, -1)), not the URL nor '/*'",
    async run(rt, store, prefix) {
      const app = honoApp()
      const limit = rateLimit({
        rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
        store,
        prefix,
        key: 'route',
      })
      app.use(limit)
      app.get('/users/:id', (c) => c.text(`user ${c.req.param('id')}`))
      app.get('/items/:id', (c) => c.text(`item ${c.req.param('id')}`))
      await using(await rt.serveHono(app), async (url) => {
        assert.equal(await (await fetch(`${url}/users/1`)).text(), 'user 1')
        const again = await fetch(`${url}/users/2`)
        assert.equal(again.status, 429, 'two ids, one template: one count')
        await again.body?.cancel()
        assert.equal(await (await fetch(`${url}/items/1`)).text(), 'item 1', 'another route counts apart')
      })
      // The count is on the template: what a next call there would be told, against an unused '/*'.
      assert.equal((await limit.limiter.peek('GET /users/:id')).allowed, false)
      assert.equal((await limit.limiter.peek('GET /*')).allowed, true)
    },
  },
  {
    name: "Hono: key 'ip' reads the runtime's getConnInfo, and without one rateLimit refuses to build, naming it",
    async run(rt, store, prefix) {
      assert.throws(
        () => rateLimit({ rules: [MINUTE], store }),
        (error: { code?: string; option?: string }) =>
          error.code === ErrorCode.INVALID_OPTION && error.option === 'rateLimit.getConnInfo',
      )
      assert.throws(
        () => rateLimit({ rules: [MINUTE], store, key: ['ip', { header: 'x-api-key' }] }),
        (error: { option?: string }) => error.option === 'rateLimit.getConnInfo',
      )
      rateLimit({ rules: [MINUTE], store, key: { header: 'x-api-key' } })
      const addresses: Array<string | undefined> = []
      const limit = rateLimit({
        rules: [MINUTE],
        store,
        prefix,
        getConnInfo: (c) => {
          const info = rt.getConnInfo(c)
          addresses.push(info.remote.address)
          return info
        },
      })
      const app = honoApp()
      app.use(limit)
      app.get('/', (c) => c.text('ok'))
      await using(await rt.serveHono(app), async (url) => {
        assert.equal(await (await fetch(url)).text(), 'ok')
      })
      assert.equal(addresses.length, 1)
      assert.match(addresses[0] ?? '', /^(::ffff:)?127\.0\.0\.1$/)
      // The address getConnInfo gave is the key counted: one unit less left there than at an unused one.
      const limiter = limit.limiter as Limiter<unknown>
      const counted = await limiter.peek(addresses[0]!.replace(/^::ffff:/, ''))
      const unused = await limiter.peek('203.0.113.250')
      assert.equal(counted.remaining, unused.remaining - 1)
    },
  },
  {
    name: 'Hono: an immutable Response from a handler (Response.redirect) gets the headers; a denial can be answered by onLimited',
    async run(rt, store, prefix) {
      const app = honoApp()
      const limited: Decision[] = []
      app.use(
        rateLimit({
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store,
          prefix,
          getConnInfo: rt.getConnInfo,
          onLimited: (c, decision) => {
            limited.push(decision)
            return c.text('slow down', 429)
          },
        }),
      )
      app.get('/', () => Response.redirect('http://example.test/elsewhere', 301))
      await using(await rt.serveHono(app), async (url) => {
        const moved = await fetch(url, { redirect: 'manual' })
        assert.equal(moved.status, 301)
        assert.equal(moved.headers.get('location'), 'http://example.test/elsewhere')
        assert.equal(moved.headers.get('ratelimit-policy'), '"1-per-60s";q=1;w=60')
        await moved.body?.cancel()
        const denied = await fetch(url, { redirect: 'manual' })
        assert.equal(denied.status, 429)
        assert.equal(await denied.text(), 'slow down')
        assert.ok(Number(denied.headers.get('retry-after')) >= 1)
        assert.equal(limited.length, 1)
      })
    },
  },
  {
    name: 'Hono: a streamed body holds its concurrency lease until read to its end or cancelled; countWhen sees c.res',
    async run(rt, store, prefix) {
      const app = honoApp()
      const streams: Array<{ finish(): void }> = []
      app.get(
        '/stream',
        rateLimit({ rules: [concurrency({ limit: 1 })], store, prefix, key: 'route' }),
        () => {
          const stream = controlledStream()
          streams.push(stream)
          return new Response(stream.body)
        },
      )
      app.get(
        '/counted',
        rateLimit({
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store,
          prefix: `${prefix}c`,
          key: 'route',
          countWhen: (_c, response) => response.status >= 500,
        }),
        (c) => (c.req.query('fail') === undefined ? c.text('yes') : c.text('no', 500)),
      )
      await using(await rt.serveHono(app), async (url) => {
        await leaseLastsAsLongAsTheStream(url, streams, '/stream')
        for (let i = 0; i < 2; i++) assert.equal((await fetch(`${url}/counted`)).status, 200)
        const failed = await fetch(`${url}/counted?fail`)
        assert.equal(failed.status, 500)
        await failed.text()
        const after = await fetch(`${url}/counted`)
        assert.equal(after.status, 429)
        await after.body?.cancel()
      })
    },
  },
  {
    name: 'Hono: a held request whose client leaves stops waiting, and the handler never runs',
    async run(rt, store, prefix) {
      const app = honoApp()
      let calls = 0
      let seen!: () => void
      const arrived = new Promise<void>((resolve) => {
        seen = resolve
      })
      let n = 0
      const limit = rateLimit({
        rules: [leakyBucket({ ratePerSecond: 0.05, maxQueueMs: 120_000 })],
        store,
        prefix,
        key: () => {
          if (++n === 2) seen()
          return 'k'
        },
      })
      app.get('/', limit, (c) => {
        calls++
        return c.text('ran')
      })
      await using(await rt.serveHono(app), async (url) => {
        assert.equal(await (await fetch(url)).text(), 'ran')
        const leaving = new AbortController()
        const left = fetch(url, { signal: leaving.signal }).catch((error: unknown) => error)
        await arrived
        leaving.abort()
        await left
        await eventually('the slot of the request that left is given back', async () => {
          const next = await limit.limiter.peek('k')
          return next.waitMs > 0 && next.waitMs <= 20_000
        })
        assert.equal(calls, 1)
      })
    },
  },
]
