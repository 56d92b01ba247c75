import { EventEmitter } from 'node:events'
import { createLimiter, ErrorCode, fixedWindow, leakyBucket, MemoryStore, type Store } from '@sluice/core'
import {
  type BuildOptions,
  buildRequestLimit,
  type HttpAdapter,
  type HttpLimitOptions,
  mergeHttpOptions,
  parseHttpOptions,
  RequestRecord,
  type RequestView,
} from '@sluice/core/http'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { whenResponseEnds } from '../src/http/adapter.ts'
import { hold } from '../src/limiter/hold.ts'

interface FakeRequest {
  ip?: string
  method: string
  route: string
  headers: Record<string, string | undefined>
}

const view: RequestView<FakeRequest> = {
  ip: (r) => r.ip,
  route: (r) => `${r.method} ${r.route}`,
  header: (r, name) => r.headers[name],
}

const request = (over: Partial<FakeRequest> = {}): FakeRequest => ({
  ip: '203.0.113.7',
  method: 'POST',
  route: '/pay',
  headers: {},
  ...over,
})

/** A response that ends when the test says so. */
class FakeResponse extends EventEmitter {
  destroyed = false
  writableFinished = false
}

/** An adapter for fake requests: records in a WeakMap, responses that never end unless told. */
function adapterFor(requestView: RequestView<FakeRequest>): HttpAdapter<FakeRequest, FakeResponse> {
  const records = new WeakMap<FakeRequest, RequestRecord>()
  return {
    view: requestView,
    recordOf: (req) => records.get(req),
    keepRecord: (req, record) => records.set(req, record),
    responseOf: (res) => res,
  }
}

/** Parses and builds a limit as an adapter does; `check` decides one request. */
function resolveHttpLimit<R extends FakeRequest = FakeRequest>(
  where: string,
  options: HttpLimitOptions<R>,
  requestView: RequestView<FakeRequest>,
  build?: BuildOptions,
  adapter = adapterFor(requestView),
) {
  const limit = buildRequestLimit(parseHttpOptions<FakeRequest>(where, options), adapter, build)
  return { limiter: limit.limiter, check: (req: FakeRequest) => limit.consume(req, new FakeResponse()) }
}

function clockedStore() {
  const clock = { now: 1_000_000 }
  return { clock, store: new MemoryStore({ clock: () => clock.now }) }
}

describe('resolveHttpLimit', () => {
  it('admits up to the limit with headers, then denies with 429, Retry-After and a problem body', async () => {
    const { store } = clockedStore()
    const limit = resolveHttpLimit(
      'test',
      { rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store },
      view,
    )
    const first = await limit.check(request())
    expect(first.action).toBe('allow')
    if (first.action !== 'allow') throw new Error('unreachable')
    expect(first.decision.remaining).toBe(1)
    expect(first.headers['RateLimit-Policy']).toBeDefined()
    expect(first.headers['Retry-After']).toBeUndefined()
    await limit.check(request())
    const third = await limit.check(request())
    expect(third.action).toBe('deny')
    if (third.action !== 'deny') throw new Error('unreachable')
    expect(third.status).toBe(429)
    expect(third.headers['Retry-After']).toBe('20')
    expect(third.body).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Rate limit 2-per-60s exceeded; retry in 20 s.',
      retryAfter: 20,
    })
  })

  it('counts a request once even when it passes the same limit twice', async () => {
    const limit = resolveHttpLimit('test', { rules: [fixedWindow({ limit: 5, windowMs: 1000 })] }, view)
    const req = request()
    const a = await limit.check(req)
    const b = await limit.check(req)
    expect(a.action).toBe('allow')
    expect(b).toEqual({ action: 'pass' })
    expect((await limit.limiter.peek('203.0.113.7')).remaining).toBe(3)
  })

  it('counts a request once per owner: limits sharing an owner token count it once between them', async () => {
    const rules = [fixedWindow({ limit: 5, windowMs: 1000 })]
    const adapter = adapterFor(view)
    const owner = {}
    const first = resolveHttpLimit('test', { rules, prefix: 'a' }, view, { owner }, adapter)
    const second = resolveHttpLimit('test', { rules, prefix: 'b' }, view, { owner }, adapter)
    const apart = resolveHttpLimit('test', { rules, prefix: 'c' }, view, undefined, adapter)
    const req = request()
    expect((await first.check(req)).action).toBe('allow')
    expect(await second.check(req)).toEqual({ action: 'pass' })
    expect((await apart.check(req)).action).toBe('allow')
    // A peek says what a call would leave: 4 of 5 where nothing was counted, 3 where one was.
    expect((await second.limiter.peek('203.0.113.7')).remaining).toBe(4)
    expect((await apart.limiter.peek('203.0.113.7')).remaining).toBe(3)
  })

  it('lists every limit that counted a request in its headers, from their decisions', async () => {
    const adapter = adapterFor(view)
    const global = resolveHttpLimit(
      'test',
      { rules: [fixedWindow({ limit: 100, windowMs: 60_000, name: 'global' })], prefix: 'g' },
      view,
      undefined,
      adapter,
    )
    const pay = resolveHttpLimit(
      'test',
      { rules: [fixedWindow({ limit: 2, windowMs: 60_000, name: 'pay' })], prefix: 'p' },
      view,
      undefined,
      adapter,
    )
    const req = request()
    await global.check(req)
    const outcome = await pay.check(req)
    if (outcome.action !== 'allow') throw new Error('unreachable')
    expect(outcome.headers['RateLimit-Policy']).toBe('"global";q=100;w=60, "pay";q=2;w=60')
    expect(adapter.recordOf(req)?.decision).toBe(outcome.decision)
    expect(adapter.recordOf(req)?.headers).toBe(outcome.headers)
  })

  it('keys by header parts; a missing part is rejected with 400, skipped, or defaulted as configured', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const key = { header: ['x-biz-type', 'x-channel'] }
    const reject = resolveHttpLimit('test', { rules, key }, view)
    const missing = await reject.check(request({ headers: { 'x-biz-type': 'PAYMENT' } }))
    expect(missing).toMatchObject({
      action: 'reject',
      status: 400,
      body: { status: 400, title: 'Bad Request' },
    })
    if (missing.action !== 'reject') throw new Error('unreachable')
    expect(String(missing.body.detail)).toContain('x-channel')
    expect(String(missing.body.detail)).not.toContain('undefined')

    const skip = resolveHttpLimit('test', { rules, key, onMissingKey: 'skip' }, view)
    expect(await skip.check(request())).toEqual({ action: 'pass' })

    const fallback = resolveHttpLimit('test', { rules, key, onMissingKey: { default: 'none' } }, view)
    expect((await fallback.check(request())).action).toBe('allow')
    expect((await fallback.check(request())).action).toBe('deny')
    expect((await fallback.check(request({ headers: { 'x-biz-type': 'A', 'x-channel': 'B' } }))).action).toBe(
      'allow',
    )
  })

  it('gives each bizType + channel its own limit from a table; missing or -1 is not limited', async () => {
    const table: Record<string, number> = { 'PAYMENT:ALIPAY': 1, 'PAYMENT:WECHAT': -1 }
    const limit = resolveHttpLimit<FakeRequest>(
      'test',
      {
        key: (r) => `${r.headers['x-biz-type']}:${r.headers['x-channel']}`,
        rules: (key) => (key in table ? [fixedWindow({ limit: table[key]!, windowMs: 1000 })] : null),
      },
      view,
    )
    const pay = (channel: string) => request({ headers: { 'x-biz-type': 'PAYMENT', 'x-channel': channel } })
    expect((await limit.check(pay('ALIPAY'))).action).toBe('allow')
    expect((await limit.check(pay('ALIPAY'))).action).toBe('deny')
    for (let i = 0; i < 3; i++) {
      const wechat = await limit.check(pay('WECHAT'))
      const other = await limit.check(pay('UNIONPAY'))
      expect(wechat.action).toBe('allow')
      expect(other.action).toBe('allow')
      if (wechat.action === 'allow') expect(wechat.headers).toEqual({})
    }
  })

  it('skips what skip() says, and takes cost from a number or a function', async () => {
    const limit = resolveHttpLimit<FakeRequest>(
      'test',
      {
        rules: [fixedWindow({ limit: 10, windowMs: 1000 })],
        skip: (r) => r.route === '/health',
        cost: (r) => (r.method === 'POST' ? 4 : 1),
      },
      view,
    )
    expect(await limit.check(request({ route: '/health' }))).toEqual({ action: 'pass' })
    const post = await limit.check(request())
    const get = await limit.check(request({ method: 'GET' }))
    expect(post.action === 'allow' && post.decision.remaining).toBe(6)
    expect(get.action === 'allow' && get.decision.remaining).toBe(5)
  })

  it('uses message and statusCode for denied requests', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const text = resolveHttpLimit('test', { rules, message: 'Slow down.' }, view)
    await text.check(request())
    expect((await text.check(request())) as { body: unknown }).toMatchObject({
      body: { detail: 'Slow down.' },
    })

    const whole = resolveHttpLimit('test', { rules, message: { error: 'busy' }, statusCode: 503 }, view)
    await whole.check(request())
    expect(await whole.check(request())).toMatchObject({ status: 503, body: { error: 'busy' } })

    const built = resolveHttpLimit<FakeRequest>(
      'test',
      { rules, message: (r, d) => ({ ip: r.ip, rule: d.rule }) },
      view,
    )
    await built.check(request())
    expect(await built.check(request())).toMatchObject({ body: { ip: '203.0.113.7', rule: '1-per-1s' } })
  })

  it('follows onStoreError: a failing store is answered by policy, or its error rejects the check', async () => {
    const broken: Store = {
      apply: () => Promise.reject(new Error('connection refused')),
      reset: () => undefined,
    }
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const allow = resolveHttpLimit('test', { rules, store: broken, prefix: 'a' }, view)
    expect((await allow.check(request())).action).toBe('allow')
    const deny = resolveHttpLimit('test', { rules, store: broken, prefix: 'd', onStoreError: 'deny' }, view)
    expect(await deny.check(request())).toMatchObject({ action: 'deny', headers: { 'Retry-After': '1' } })
    const thrower = resolveHttpLimit(
      'test',
      { rules, store: broken, prefix: 't', onStoreError: 'throw' },
      view,
    )
    await expect(thrower.check(request())).rejects.toMatchObject({ code: ErrorCode.STORE_ERROR })
  })

  it('answers at once on a synchronous store, and otherwise with a native promise that never throws', async () => {
    const rules = [fixedWindow({ limit: 5, windowMs: 1000 })]
    const sync = resolveHttpLimit('test', { rules, store: clockedStore().store }, view)
    const outcome = sync.check(request())
    expect(outcome).not.toBeInstanceOf(Promise)
    expect(outcome).toMatchObject({ action: 'allow', decision: { remaining: 4 } })

    // A store (or skip) answering with a thenable that is not a native promise.
    const thenable = <T>(value: T) => ({
      // biome-ignore lint/suspicious/noThenProperty: a thenable that is not a native promise, on purpose
      then(ok: (v: T) => unknown): void {
        queueMicrotask(() => ok(value))
      },
    })
    const inner = clockedStore().store
    const lazy: Store = {
      apply: (...a) => thenable(inner.apply(...a)) as never,
      reset: () => undefined,
    }
    const viaThenables = resolveHttpLimit<FakeRequest>(
      'test',
      { rules, store: lazy, skip: () => thenable(false) as never },
      view,
    )
    const later = viaThenables.check(request())
    expect(later).toBeInstanceOf(Promise)
    expect(await later).toMatchObject({ action: 'allow', decision: { remaining: 4 } })

    const broken = resolveHttpLimit<FakeRequest>(
      'test',
      {
        rules,
        store: clockedStore().store,
        key: () => {
          throw new Error('no key here')
        },
      },
      view,
    )
    let answer: unknown
    expect(() => {
      answer = broken.check(request())
    }).not.toThrow()
    await expect(answer).rejects.toThrow('no key here')
  })

  it("decides through the limiter's consumeNow, part of its type, so a wrapper that replaces it is asked", async () => {
    const limiter = createLimiter<FakeRequest>({ rules: [fixedWindow({ limit: 5, windowMs: 1000 })] })
    const consumeNow = limiter.consumeNow
    let calls = 0
    const wrapped = {
      ...limiter,
      consumeNow: ((key, options) => {
        calls++
        return consumeNow(key, options)
      }) as typeof limiter.consumeNow,
    }
    const limit = resolveHttpLimit('test', { limiter: wrapped }, view)
    const outcome = limit.check(request())
    expect(outcome).not.toBeInstanceOf(Promise)
    expect(outcome).toMatchObject({ action: 'allow', decision: { remaining: 4 } })
    expect(calls).toBe(1)
  })

  it('hands a leaky-bucket wait to the adapter as decision.waitMs', async () => {
    const { store } = clockedStore()
    const limit = resolveHttpLimit(
      'test',
      { rules: [leakyBucket({ ratePerSecond: 10, maxQueueMs: 250 })], store },
      view,
    )
    const waits = []
    for (let i = 0; i < 4; i++) {
      const o = await limit.check(request())
      waits.push(o.action === 'allow' ? o.decision.waitMs : o.action)
    }
    expect(waits).toEqual([0, 100, 200, 'deny'])
  })

  it('rejects invalid options at construction with a coded error naming the option', () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'test.rules'],
      [{ rules, cost: 0 }, 'test.cost'],
      [{ rules, cost: 1.5 }, 'test.cost'],
      [{ rules, skip: 'yes' }, 'test.skip'],
      [{ rules, message: 42 }, 'test.message'],
      [{ rules, statusCode: 200 }, 'test.statusCode'],
      [{ rules, statusCode: 600 }, 'test.statusCode'],
      [{ limiter: createLimiter({ rules }), rules }, 'test.rules'],
      [{ rules, key: 'url' }, 'test.key'],
      [{ rules, ipv6Subnet: 129 }, 'test.ipv6Subnet'],
      [{ rules, onMissingKey: 'ignore' }, 'test.onMissingKey'],
      [{ rules, headers: { standard: 'draft-1' } }, 'test.headers.standard'],
      [{ rules, prefix: 'a{b}' }, 'test.prefix'],
      [{ rules, onStoreError: 'retry' }, 'test.onStoreError'],
      [{ rules, onStoreError: { consume: () => undefined } }, 'test.onStoreError'],
      [{ rules, message: new Date() }, 'test.message'],
      [{ rules, message: [] }, 'test.message'],
      // An unknown name is an error whatever its value, undefined included.
      [{ rules, onMissing: 'skip' }, 'test.onMissing'],
      [{ rules, keyGenerator: undefined }, 'test.keyGenerator'],
      [{ rules, windowMs: 60_000 }, 'test.windowMs'],
    ]
    for (const [options, option] of cases) {
      expect(() => resolveHttpLimit('test', options, view)).toThrowError(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option }),
      )
    }
  })
})

describe('resolveHttpLimit start-up', () => {
  it('claims no prefix on the store when an option is invalid, so a corrected start succeeds', () => {
    const store = new MemoryStore()
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    expect(() => resolveHttpLimit('test', { rules, store, key: 'url' as never }, view)).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'test.key' }),
    )
    expect(() => resolveHttpLimit('test', { rules, store, key: 'ip' }, view)).not.toThrow()
  })

  it('labels sluice problem bodies application/problem+json and bodies the user built application/json', async () => {
    const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
    const problem = resolveHttpLimit('test', { rules, message: 'Slow down.' }, view)
    const own = resolveHttpLimit('test', { rules, message: { error: 'busy' } }, view)
    const missing = resolveHttpLimit('test', { rules, key: { header: 'x-channel' } }, view)
    for (const limit of [problem, own]) await limit.check(request())
    expect(await problem.check(request())).toMatchObject({ contentType: 'application/problem+json' })
    expect(await own.check(request())).toMatchObject({ contentType: 'application/json' })
    expect(await missing.check(request())).toMatchObject({
      action: 'reject',
      contentType: 'application/problem+json',
    })
  })
})

describe('hold', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('resolves true after the wait, and false at once when aborted, leaving no timer', async () => {
    vi.useFakeTimers()
    const done = hold(300, new AbortController().signal)
    await vi.advanceTimersByTimeAsync(300)
    expect(await done).toBe(true)

    const gone = new AbortController()
    const held = hold(300, gone.signal)
    expect(vi.getTimerCount()).toBe(1)
    gone.abort()
    expect(await held).toBe(false)
    expect(vi.getTimerCount()).toBe(0)
  })
})

describe('timers', () => {
  it('refuses a queue or a sweep longer than a Node timer can wait (it would fire at once)', () => {
    expect(() => leakyBucket({ ratePerSecond: 1, maxQueueMs: 2 ** 31 })).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'leakyBucket.maxQueueMs' }),
    )
    expect(() => new MemoryStore({ sweepIntervalMs: 2 ** 31 })).toThrowError(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'MemoryStore.sweepIntervalMs' }),
    )
    expect(leakyBucket({ ratePerSecond: 1, maxQueueMs: 2 ** 31 - 1 }).maxQueueMs).toBe(2 ** 31 - 1)
  })
})

describe('the options of a route merged over the plugin', () => {
  const rules = [fixedWindow({ limit: 1, windowMs: 1000 })]
  it('takes what the route gives and keeps the rest; a limiter drops the options it replaces, and they drop it', () => {
    const limiter = createLimiter({ rules })
    const plugin = parseHttpOptions('sluice', { rules, prefix: 'p', statusCode: 503, onMissingKey: 'skip' })
    const route = parseHttpOptions('config.rateLimit', { key: 'route', statusCode: 429 })
    expect(mergeHttpOptions(plugin, route)).toMatchObject({
      where: 'config.rateLimit',
      rules,
      prefix: 'p',
      key: 'route',
      statusCode: 429,
      onMissingKey: 'skip',
    })
    const own = mergeHttpOptions(plugin, parseHttpOptions('rateLimit', { limiter }))
    expect(own).toMatchObject({ limiter, rules: undefined, prefix: undefined, statusCode: 503 })
    const back = mergeHttpOptions(own, parseHttpOptions('rateLimit', { rules }))
    expect(back).toMatchObject({ limiter: undefined, rules })
    limiter.close()
  })
})

describe('RequestRecord and the response-end phase', () => {
  it('runs every end callback once, in order, with whether the response finished', () => {
    const record = new RequestRecord()
    const seen: string[] = []
    expect(record.onEnd((finished) => seen.push(`a:${finished}`))).toBe(true)
    expect(record.onEnd((finished) => seen.push(`b:${finished}`))).toBe(false)
    record.end(false)
    record.end(true)
    expect(seen).toEqual(['a:false', 'b:false'])
  })

  it('sees finish, or close before finish, once; and a response that has already ended at once', () => {
    const seen: boolean[] = []
    const finished = new FakeResponse()
    whenResponseEnds(finished, (f) => seen.push(f))
    finished.writableFinished = true
    finished.emit('finish')
    finished.emit('close')
    const left = new FakeResponse()
    whenResponseEnds(left, (f) => seen.push(f))
    left.emit('close')
    const over = new FakeResponse()
    over.writableFinished = true
    whenResponseEnds(over, (f) => seen.push(f))
    expect(seen).toEqual([true, false, true])
    expect(finished.listenerCount('close') + left.listenerCount('finish')).toBe(0)
  })

  it("a limit's onResponseEnd watches the response once per request however many callbacks there are", () => {
    const adapter = adapterFor(view)
    const limit = buildRequestLimit(
      parseHttpOptions<FakeRequest>('t', { rules: [fixedWindow({ limit: 1, windowMs: 1 })] }),
      adapter,
    )
    const req = request()
    const res = new FakeResponse()
    const seen: number[] = []
    limit.onResponseEnd(req, res, () => seen.push(1))
    limit.onResponseEnd(req, res, () => seen.push(2))
    expect(res.listenerCount('finish')).toBe(1)
    res.emit('close')
    expect(seen).toEqual([1, 2])
  })

  it('an end callback added after the response ended runs at once, with how it ended', () => {
    const record = new RequestRecord()
    record.onEnd(() => {})
    record.end(false)
    const seen: boolean[] = []
    expect(record.onEnd((finished) => seen.push(finished))).toBe(false)
    expect(seen).toEqual([false])
  })

  /** An adapter with its own end signal (as a Fetch adapter's), and no Node response behind it. */
  function signalledAdapter() {
    const records = new WeakMap<FakeRequest, RequestRecord>()
    const watching: Array<(finished: boolean) => void> = []
    const adapter: HttpAdapter<FakeRequest, object> = {
      view,
      recordOf: (req) => records.get(req),
      keepRecord: (req, record) => records.set(req, record),
      onEnd: (_res, ended) => watching.push(ended),
    }
    return { adapter, watching }
  }

  it("reaches the response-end phase through the adapter's onEnd, asked once per request", () => {
    const { adapter, watching } = signalledAdapter()
    const limit = buildRequestLimit(
      parseHttpOptions<FakeRequest, object>('t', { rules: [fixedWindow({ limit: 1, windowMs: 1 })] }),
      adapter,
    )
    const req = request()
    const res = {}
    const seen: string[] = []
    limit.onResponseEnd(req, res, (finished) => seen.push(`a:${finished}`))
    limit.onResponseEnd(req, res, (finished) => seen.push(`b:${finished}`))
    expect(watching).toHaveLength(1)
    watching[0]!(true)
    watching[0]!(false)
    expect(seen).toEqual(['a:true', 'b:true'])
  })

  it("a held request stops waiting when the adapter's end signal says its client left, and its slot is given back", async () => {
    const { adapter, watching } = signalledAdapter()
    // The clock stands still, so the second request's slot is exactly one interval out.
    const store = new MemoryStore({ clock: () => 1_000_000 })
    const limit = buildRequestLimit(
      parseHttpOptions<FakeRequest, object>('t', {
        rules: [leakyBucket({ ratePerSecond: 1, maxQueueMs: 600_000 })],
        store,
      }),
      adapter,
    )
    const res = {}
    const first = await limit.consume(request(), res)
    const req = request()
    const second = await limit.consume(req, res)
    expect(first.action).toBe('allow')
    if (second.action !== 'allow') throw new Error(`expected a queued request, got ${second.action}`)
    expect(second.decision.waitMs).toBe(1000)
    const waited = limit.hold(req, res, second)
    expect(watching).toHaveLength(1)
    watching[0]!(false)
    expect(await waited).toBe(false)
    // The slot went back: the next request waits as long as the second did.
    const third = await limit.consume(request(), res)
    expect(third.action === 'allow' && third.decision.waitMs).toBe(1000)
    limit.limiter.close()
  })
})

describe('settling a request: the settle option, req.rateLimit.settle', () => {
  const budget = () => [
    fixedWindow({ limit: 5, windowMs: 60_000, name: 'requests' }),
    fixedWindow({ limit: 100, windowMs: 60_000, name: 'tokens' }),
  ]

  /** A limit over `budget()` on a manual clock, each request reserving 40 tokens; `send` admits one. */
  function budgetLimit(options: Partial<HttpLimitOptions<FakeRequest, FakeResponse>> = {}) {
    const { store } = clockedStore()
    const adapter = adapterFor(view)
    const limit = buildRequestLimit(
      parseHttpOptions<FakeRequest, FakeResponse>('t', {
        rules: budget(),
        store,
        cost: () => ({ tokens: 40 }),
        ...options,
      }),
      adapter,
    )
    const used = async () => {
      const peeked = await limit.limiter.peek('203.0.113.7')
      return Object.fromEntries(peeked.rules.map((r) => [r.rule, r.limit - 1 - r.remaining]))
    }
    const send = async () => {
      const req = request()
      const res = new FakeResponse()
      const outcome = await limit.consume(req, res)
      expect(outcome.action).toBe('allow')
      return { req, res, record: adapter.recordOf(req)! }
    }
    return { limit, used, send }
  }

  const finish = (res: FakeResponse) => {
    res.writableFinished = true
    res.emit('finish')
  }

  /** Lets the end phase's promises settle. */
  const settled = async () => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  }

  afterEach(() => {
    vi.restoreAllMocks()
  })

  it('rejects a settle option that is not a function, naming it', () => {
    expect(() => parseHttpOptions('t', { rules: budget(), settle: 12 })).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 't.settle' }),
    )
  })

  it('shows the decision with a settle that neither spreads nor serializes', async () => {
    const { send } = budgetLimit()
    const { record } = await send()
    const shown = record.shown!
    expect(shown).toEqual(record.decision)
    expect(JSON.stringify(shown)).toBe(JSON.stringify(record.decision))
    expect(Object.keys(shown)).not.toContain('settle')
    expect(typeof shown.settle).toBe('function')
    // Read again, the same object.
    expect(record.shown).toBe(shown)
  })

  it('a settle option that throws or rejects keeps the reservation, with one warning per limit', async () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const { send, used } = budgetLimit({
      settle: () => {
        throw new Error('no usage')
      },
    })
    const first = await send()
    finish(first.res)
    const second = await send()
    finish(second.res)
    await settled()
    expect(await used()).toEqual({ requests: 2, tokens: 80 })
    expect(warnings).toHaveBeenCalledTimes(1)
    expect(String(warnings.mock.calls[0]![0])).toBe(
      'sluice (sluice): settle threw (the reservation stays): Error: no usage. Further such failures of this limit are not reported.',
    )
  })

  it('a settle the limiter refuses (a bad cost) keeps the reservation, with a warning', async () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const { send, used } = budgetLimit({ settle: async () => ({ tokens: -3 }) })
    finish((await send()).res)
    await settled()
    expect(await used()).toEqual({ requests: 1, tokens: 40 })
    expect(warnings).toHaveBeenCalledTimes(1)
    expect(String(warnings.mock.calls[0]![0])).toBe(
      'sluice (sluice): settling a reservation failed, so it stays: InvalidCostError: Invalid cost -3: expected an integer from 0 to 2^50 for rule tokens.. Further such failures of this limit are not reported.',
    )
  })

  it('a settle naming none of the rules leaves the reservation; undefined keeps it', async () => {
    const answers: unknown[] = [{ images: 2 }, undefined]
    const { send, used } = budgetLimit({ settle: () => answers.shift() as undefined })
    finish((await send()).res)
    finish((await send()).res)
    await settled()
    expect(await used()).toEqual({ requests: 2, tokens: 80 })
  })

  it('countWhen answering false gives per-rule units back (a settle at 0); the settle option is not asked', async () => {
    const asked: boolean[] = []
    const { send, used } = budgetLimit({
      countWhen: () => false,
      settle: (_req, _res, finished) => {
        asked.push(finished)
        return 1
      },
    })
    finish((await send()).res)
    await settled()
    expect(await used()).toEqual({ requests: 0, tokens: 0 })
    expect(asked).toEqual([])
  })

  it("the handler's settle on a request no reservation was made for answers the shown decision", async () => {
    const adapter = adapterFor(view)
    const limit = buildRequestLimit(
      parseHttpOptions<FakeRequest, FakeResponse>('t', { rules: () => null }),
      adapter,
    )
    const req = request()
    expect((await limit.consume(req, new FakeResponse())).action).toBe('allow')
    const record = adapter.recordOf(req)!
    expect(await record.shown!.settle({ tokens: 3 })).toBe(record.decision)
  })
})
