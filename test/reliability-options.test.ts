/**
 * Misconfiguration fails at start-up, loudly and precisely: every option of every public entry point
 * (the rule factories, createLimiter, MemoryStore, RedisStore, Express's rateLimit, the Fastify plugin, a
 * route's config.rateLimit and fastify.rateLimit()) rejects each wrong value with an InvalidOptionError
 * (`ERR_SLUICE_INVALID_OPTION`) whose `.option` names it. `null`, a wrong type, NaN, a negative or an unknown
 * key never stands in for the default; only `undefined` does, and it keeps the default.
 *
 * And one store, one prefix, one count: two limiters on one store with one prefix are refused
 * (`ERR_SLUICE_PREFIX_COLLISION`), never double counted; registering the Fastify plugin twice counts each
 * request once per limiter.
 */
import {
  createLimiter,
  ErrorCode,
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  MemoryStore,
  type SlidingWindowRule,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'
import { REQUEST_OPTION_NAMES } from '@sluice/core/http'
import { rateLimit } from '@sluice/express'
import { sluice } from '@sluice/fastify'
import { RedisStore } from '@sluice/redis'
import fc from 'fast-check'
import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { describe as describeValue } from '../packages/core/src/errors.ts'
import { flavours, listen } from '../packages/express/test/support.ts'
import { agent, closeAgents, get } from './harness/http-load.ts'

const rule = slidingLog({ limit: 5, windowMs: 60_000 })
// Never connected: the stores only need a client to look at.
const client = new Redis({ lazyConnect: true, enableOfflineQueue: false })
const apps: FastifyInstance[] = []
const express = flavours[0].express

afterAll(async () => {
  closeAgents()
  client.disconnect()
  for (const app of apps) await app.close()
})

/** Runs `build` (sync or async) and returns what it threw or rejected with, or undefined. */
async function failure(build: () => unknown): Promise<unknown> {
  try {
    await build()
    return undefined
  } catch (error) {
    return error
  }
}

/** What is wrong with `build`'s failure, or undefined when it threw InvalidOptionError naming `option`. */
async function mismatch(build: () => unknown, option: string): Promise<string | undefined> {
  const error = await failure(build)
  if (!(error instanceof InvalidOptionError)) {
    return error === undefined ? 'nothing thrown' : `threw ${String(error)}`
  }
  if (error.code !== ErrorCode.INVALID_OPTION) return `code ${error.code}`
  if (error.option !== option) return `named ${error.option}`
  return undefined
}

async function expectInvalid(build: () => unknown, option: string): Promise<void> {
  expect(await mismatch(build, option), option).toBeUndefined()
}

const NOT_INTEGER = [null, Number.NaN, -2, 1.5, '10', Number.POSITIVE_INFINITY, true, {}]
const NOT_POSITIVE = [null, Number.NaN, 0, -1, '10', Number.POSITIVE_INFINITY, false, []]
const NOT_FUNCTION = [null, 5, 'f', {}]
const NOT_LABEL = [null, '', 5, 'a"b', 'a\\b', 'x'.repeat(129), 'a\nb', ' a']
const NOT_PREFIX = [...NOT_LABEL, 'a{b', 'a}b']

/** Entry point → option → wrong values; `make(options)` builds with the options merged over valid ones. */
interface Entry {
  where: string
  make: (options: Record<string, unknown>) => unknown
  options: Record<string, readonly unknown[]>
}

/** Valid rules added to `options`, unless they give a limiter (which may not come with rules). */
const withRules = (options: Record<string, unknown>) =>
  'limiter' in options ? options : { rules: [rule], ...options }

/** A fresh Fastify app with the plugin registered as `options` merged over `{ rules }`. */
async function fastifyPlugin(options: Record<string, unknown>) {
  const app = Fastify()
  apps.push(app)
  await app.register(sluice, withRules(options))
  await app.ready()
}

/**
 * The plugin's own value for every option a route or hook may override, so that a route's bad value
 * could only pass by silently falling back to the plugin's.
 */
const pluginDefaults = () => ({
  global: false,
  rules: [rule],
  store: new MemoryStore({ sweepIntervalMs: 0 }),
  prefix: 'base',
  onStoreError: 'allow' as const,
  key: 'ip' as const,
  onMissingKey: 'reject' as const,
  ipv6Subnet: 56,
  cost: 1,
  skip: () => false,
  headers: true,
  message: 'Slow down.',
  statusCode: 429,
  onLimited: () => undefined,
})

async function fastifyRoute(options: Record<string, unknown>) {
  const app = Fastify()
  apps.push(app)
  await app.register(sluice, pluginDefaults())
  app.get('/', { config: { rateLimit: withRules(options) } }, async () => 'ok')
  await app.ready()
}

async function fastifyHook(options: Record<string, unknown>) {
  const app = Fastify()
  apps.push(app)
  await app.register(sluice, pluginDefaults())
  app.rateLimit(withRules(options))
}

const ADAPTER_OPTIONS: Record<string, readonly unknown[]> = {
  // Two rules sharing a state identity are refused too, with their own code: see below.
  rules: [null, [], 'rules', [{}], 5],
  store: [null, {}, 'memory', 5],
  limiter: [null, {}, 'limiter', 5],
  prefix: NOT_PREFIX,
  onStoreError: [null, 'ignore', 5, {}],
  key: [null, 'ipx', { header: '' }, { header: 'bad name' }, { header: 'x', extra: 1 }, [], 5],
  onMissingKey: [null, 'drop', { default: '' }, { default: 5 }, 5],
  ipv6Subnet: [null, Number.NaN, 0, 129, 1.5, '56'],
  cost: [null, 0, -1, 1.5, '1', Number.NaN],
  skip: NOT_FUNCTION,
  headers: [null, 'yes', 5, { standard: 'draft-99' }, { legacy: 'yes' }, { retryAfter: 1 }, { nope: true }],
  message: [null, 5, true],
  statusCode: [null, 200, 399, 600, Number.NaN, '429'],
  onLimited: NOT_FUNCTION,
  unknownOption: [1, 'x', null],
}

const entries: Entry[] = [
  {
    where: 'fixedWindow',
    make: (o) => fixedWindow({ limit: 10, windowMs: 1000, ...o } as never),
    options: {
      limit: [...NOT_INTEGER, 0, -2],
      windowMs: [...NOT_INTEGER, 0],
      name: NOT_LABEL,
      windowMS: [1000],
    },
  },
  {
    where: 'slidingLog',
    make: (o) => slidingLog({ limit: 10, windowMs: 1000, ...o } as never),
    options: { limit: [...NOT_INTEGER, 0, -2], windowMs: [...NOT_INTEGER, 0], name: NOT_LABEL, max: [10] },
  },
  {
    where: 'slidingWindow',
    make: (o) => slidingWindow({ limit: 10, windowMs: 1000, ...o } as never),
    options: {
      limit: [...NOT_INTEGER, 0, -2],
      windowMs: [...NOT_INTEGER, 0],
      buckets: [...NOT_INTEGER, 0, 3, 2000],
      name: NOT_LABEL,
      bucket: [10],
    },
  },
  {
    where: 'tokenBucket',
    make: (o) => tokenBucket({ capacity: 10, refillPerSecond: 1, ...o } as never),
    options: { capacity: [...NOT_INTEGER, 0, -2], refillPerSecond: NOT_POSITIVE, name: NOT_LABEL, rate: [1] },
  },
  {
    where: 'leakyBucket',
    make: (o) => leakyBucket({ ratePerSecond: 1, ...o } as never),
    options: { ratePerSecond: NOT_POSITIVE, maxQueueMs: NOT_INTEGER, name: NOT_LABEL, queueMs: [10] },
  },
  {
    where: 'createLimiter',
    make: (o) => createLimiter({ rules: [rule], store: new MemoryStore(), ...o } as never),
    options: {
      rules: ADAPTER_OPTIONS.rules!,
      store: ADAPTER_OPTIONS.store!,
      prefix: NOT_PREFIX,
      onStoreError: ADAPTER_OPTIONS.onStoreError!,
      storeError: ['allow'],
    },
  },
  {
    where: 'MemoryStore',
    make: (o) => new MemoryStore({ sweepIntervalMs: 0, ...o } as never).close(),
    options: {
      clock: NOT_FUNCTION,
      maxKeys: [...NOT_INTEGER, 0, 1],
      sweepIntervalMs: NOT_INTEGER,
      max: [10],
    },
  },
  {
    where: 'RedisStore',
    make: (o) => new RedisStore({ client, ...o } as never),
    options: {
      client: [null, {}, 'redis://localhost', 5],
      prefix: NOT_PREFIX,
      timeoutMs: [...NOT_INTEGER, 0],
      maxInFlight: [...NOT_INTEGER, 0],
      clock: NOT_FUNCTION,
      deniedCache: [null, 'yes', 5],
      timeout: [100],
    },
  },
  { where: 'rateLimit', make: (o) => rateLimit(withRules(o) as never), options: ADAPTER_OPTIONS },
  { where: 'sluice', make: fastifyPlugin, options: { ...ADAPTER_OPTIONS, global: [null, 'yes', 1] } },
  { where: 'config.rateLimit', make: fastifyRoute, options: ADAPTER_OPTIONS },
  { where: 'rateLimit', make: fastifyHook, options: ADAPTER_OPTIONS },
]

/** Where a bad value of `option` is reported: nested options keep their path. */
function optionPath(where: string, option: string, value: unknown): string {
  if (option === 'headers' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return `${where}.headers.${Object.keys(value)[0]}`
  }
  return `${where}.${option}`
}

describe('every invalid option throws ERR_SLUICE_INVALID_OPTION naming it, at start-up', () => {
  for (const [index, { where, make, options }] of entries.entries()) {
    const label = index === entries.length - 1 ? 'fastify.rateLimit()' : where
    it(`${label}: null, wrong types, NaN, negatives and unknown keys throw; undefined keeps the default`, async () => {
      const wrong: string[] = []
      for (const [option, values] of Object.entries(options)) {
        for (const value of values) {
          const path = optionPath(where, option, value)
          const problem = await mismatch(() => make({ [option]: value }), path)
          if (problem !== undefined) wrong.push(`${path} = ${describeValue(value)}: ${problem}`)
        }
        // `undefined` is as good as leaving the option out.
        if (option in defaults && (await failure(() => make({ [option]: undefined }))) !== undefined) {
          wrong.push(`${where}.${option} = undefined: threw`)
        }
      }
      expect(wrong).toEqual([])
    })
  }

  it('two rules sharing a state identity throw ERR_SLUICE_DUPLICATE_RULE naming where they came from, at start-up', async () => {
    const twice = [rule, rule]
    for (const [build, where] of [
      [() => createLimiter({ rules: twice }), 'createLimiter.rules'],
      [() => rateLimit({ rules: twice }), 'rateLimit.rules'],
      [() => fastifyPlugin({ rules: twice }), 'sluice.rules'],
      [() => fastifyRoute({ rules: twice }), 'config.rateLimit.rules'],
    ] as const) {
      expect(await failure(build)).toMatchObject({ code: ErrorCode.DUPLICATE_RULE, where })
    }
  })

  it('RedisStore: deniedCache.maxKeys and unknown deniedCache keys throw naming the nested option', async () => {
    for (const maxKeys of [...NOT_INTEGER, 0]) {
      await expectInvalid(
        () => new RedisStore({ client, deniedCache: { maxKeys } } as never),
        'RedisStore.deniedCache.maxKeys',
      )
    }
    await expectInvalid(
      () => new RedisStore({ client, deniedCache: { size: 5 } } as never),
      'RedisStore.deniedCache.size',
    )
    expect(
      await failure(() => new RedisStore({ client, deniedCache: { maxKeys: undefined } })),
    ).toBeUndefined()
  })

  it('undefined keeps the default, observably: rule names, limiter prefix, headers, status', async () => {
    expect(fixedWindow({ limit: 10, windowMs: 1000, name: undefined }).name).toBe('10-per-1s')
    expect(leakyBucket({ ratePerSecond: 2, maxQueueMs: undefined }).maxQueueMs).toBe(0)
    expect(
      (slidingWindow({ limit: 10, windowMs: 1000, buckets: undefined }) as SlidingWindowRule).buckets,
    ).toBe(10)
    expect(createLimiter({ rules: [rule], prefix: undefined, onStoreError: undefined }).prefix).toBe('sluice')
    const app = express()
    app.use(
      rateLimit({
        rules: [slidingLog({ limit: 1, windowMs: 60_000 })],
        key: undefined,
        statusCode: undefined,
        headers: undefined,
      }),
    )
    app.get('/', (_req, res) => res.send('ok'))
    const { url, close } = await listen(app)
    const via = agent(1)
    try {
      expect((await get(url, '/', 'a', via)).status).toBe(200)
      const denied = await get(url, '/', 'b', via)
      // Keyed by ip (the default, not the x-user header), so a second request is denied: 429, default headers.
      expect(denied.status).toBe(429)
      expect(denied.headers['retry-after']).toBe('60')
      expect(denied.headers.ratelimit).toBeDefined()
    } finally {
      await close()
    }
  })
})

describe('regressions: null was taken for the default', () => {
  it('RedisStore took a null prefix, timeoutMs, maxInFlight or deniedCache.maxKeys for its default', async () => {
    for (const option of ['prefix', 'timeoutMs', 'maxInFlight']) {
      await expectInvalid(() => new RedisStore({ client, [option]: null } as never), `RedisStore.${option}`)
    }
    await expectInvalid(
      () => new RedisStore({ client, deniedCache: { maxKeys: null } } as never),
      'RedisStore.deniedCache.maxKeys',
    )
  })

  it('an HTTP limit took key: null for the default ip key (Express, Fastify plugin, route, hook)', async () => {
    await expectInvalid(() => rateLimit({ rules: [rule], key: null } as never), 'rateLimit.key')
    await expectInvalid(() => fastifyPlugin({ key: null }), 'sluice.key')
    await expectInvalid(() => fastifyRoute({ key: null }), 'config.rateLimit.key')
    await expectInvalid(() => fastifyHook({ key: null }), 'rateLimit.key')
  })

  it("a Fastify route or hook took a null option for the plugin's value", async () => {
    for (const option of ['rules', 'store', 'prefix', 'onStoreError', 'cost', 'skip', 'headers', 'message']) {
      await expectInvalid(() => fastifyRoute({ [option]: null }), `config.rateLimit.${option}`)
      await expectInvalid(() => fastifyHook({ [option]: null }), `rateLimit.${option}`)
    }
  })
})

describe('regressions: nonsense that was accepted', () => {
  it("a rule factory took name: '' when the limit was -1 (unlimited), unchecked", async () => {
    await expectInvalid(() => fixedWindow({ limit: -1, windowMs: 1000, name: '' }), 'fixedWindow.name')
    await expectInvalid(() => slidingLog({ limit: -1, windowMs: 1000, name: 'a"b' }), 'slidingLog.name')
    await expectInvalid(() => slidingWindow({ limit: -1, windowMs: 1000, name: '' }), 'slidingWindow.name')
    await expectInvalid(() => tokenBucket({ capacity: -1, refillPerSecond: 1, name: '' }), 'tokenBucket.name')
  })

  it('a limit of -5 is refused with a message that says -1 means not limited', async () => {
    const error = await failure(() => fixedWindow({ limit: -5, windowMs: 1000 }))
    expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'fixedWindow.limit' })
    expect((error as Error).message).toContain('-1 for not limited')
  })

  it('onStoreError took any object with a consume method; message took a Date; MemoryStore took an array', async () => {
    const onStoreError = { consume: async () => ({}) }
    await expectInvalid(
      () => createLimiter({ rules: [rule], onStoreError } as never),
      'createLimiter.onStoreError',
    )
    await expectInvalid(() => rateLimit({ rules: [rule], message: new Date() } as never), 'rateLimit.message')
    await expectInvalid(() => new MemoryStore([] as never), 'MemoryStore')
  })
})

describe('one store, one prefix, one count', () => {
  const limit = () => [slidingLog({ limit: 5, windowMs: 60_000 })]

  it('two Express limiters on one store with one prefix: the second is refused at start-up (ERR_SLUICE_PREFIX_COLLISION); with two prefixes each counts every request exactly once', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const first = rateLimit({ rules: limit(), store })
    await expect(failure(() => rateLimit({ rules: limit(), store }))).resolves.toMatchObject({
      code: ErrorCode.PREFIX_COLLISION,
    })
    await expect(failure(() => createLimiter({ rules: limit(), store }))).resolves.toMatchObject({
      code: ErrorCode.PREFIX_COLLISION,
    })
    const second = rateLimit({ rules: limit(), store, prefix: 'second' })
    // The first also mounted on a router on the same path: one limit on a request's way twice counts once.
    const app = express()
    const router = express.Router()
    router.use(first)
    app.use(first, second, router)
    app.get('/', (_req, res) => res.send('ok'))
    const { url, close } = await listen(app)
    const via = agent(1)
    try {
      for (let i = 0; i < 3; i++) expect((await get(url, '/', 'k', via)).status).toBe(200)
      // A peek answers as the next call would: 5 - 3 counted - 1 = 1 left (counted twice, it would be denied).
      expect((await first.limiter.peek('127.0.0.1')).remaining).toBe(1)
      expect((await second.limiter.peek('127.0.0.1')).remaining).toBe(1)
    } finally {
      await close()
    }
  })

  it('regression: two Express middlewares given one limiter counted a request twice on its one counter', async () => {
    const limiter = createLimiter({ rules: limit(), store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const app = express()
    app.use(rateLimit({ limiter }), rateLimit({ limiter, headers: false }))
    app.get('/', (_req, res) => res.send('ok'))
    const { url, close } = await listen(app)
    const via = agent(1)
    try {
      for (let i = 0; i < 3; i++) expect((await get(url, '/', 'k', via)).status).toBe(200)
      // 5 - 3 counted - 1 = 1 left; counted twice, six units would have been taken.
      expect((await limiter.peek('127.0.0.1')).remaining).toBe(1)
    } finally {
      await close()
    }
  })

  it('the Fastify plugin registered twice: on one store with one prefix it is refused (ERR_SLUICE_PREFIX_COLLISION); with two limiters, or one shared limiter, each limiter counts every request exactly once', async () => {
    const store = new MemoryStore({ sweepIntervalMs: 0 })
    const collides = Fastify()
    apps.push(collides)
    collides.register(sluice, { rules: limit(), store })
    collides.register(sluice, { rules: limit(), store })
    await expect(collides.ready()).rejects.toMatchObject({ code: ErrorCode.PREFIX_COLLISION })

    const a = createLimiter({ rules: limit(), store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: 'a' })
    const b = createLimiter({ rules: limit(), store: new MemoryStore({ sweepIntervalMs: 0 }), prefix: 'b' })
    const shared = createLimiter({ rules: limit(), store: new MemoryStore({ sweepIntervalMs: 0 }) })
    const app = Fastify()
    apps.push(app)
    await app.register(sluice, { limiter: a })
    await app.register(sluice, { limiter: b })
    await app.register(sluice, { limiter: shared })
    await app.register(sluice, { limiter: shared })
    app.get('/', async () => 'ok')
    await app.ready()
    for (let i = 0; i < 3; i++) expect((await app.inject({ method: 'GET', url: '/' })).statusCode).toBe(200)
    // A peek answers as the next call would: 5 - 3 counted - 1 = 1 left (counted twice, it would be denied).
    for (const limiter of [a, b, shared]) expect((await limiter.peek('127.0.0.1')).remaining).toBe(1)
  })
})

/** The options each entry has a default for (the others are required). */
const defaults: Record<string, true> = Object.fromEntries(
  [
    'name',
    'buckets',
    'maxQueueMs',
    'store',
    'prefix',
    'onStoreError',
    'clock',
    'maxKeys',
    'sweepIntervalMs',
    'timeoutMs',
    'maxInFlight',
    'deniedCache',
    'key',
    'onMissingKey',
    'ipv6Subnet',
    'cost',
    'skip',
    'headers',
    'message',
    'statusCode',
    'onLimited',
    'global',
  ].map((name) => [name, true]),
)

describe('a fuzz of option objects', () => {
  /** Values a careless or hostile configuration might hold. */
  const value = fc.oneof(
    fc.constantFrom(
      undefined,
      null,
      -1,
      0,
      1,
      -5,
      0.5,
      1e-13,
      1e16,
      2 ** 53,
      Number.NaN,
      Infinity,
      '',
      '10',
      [],
      {},
    ),
    fc.integer({ min: -10, max: 100_000 }),
    fc.double({ noNaN: false }),
    fc.string({ maxLength: 8 }),
    fc.boolean(),
  )
  const optionsOf = (names: readonly string[]) =>
    fc.dictionary(fc.constantFrom(...names, '__proto__', 'windowMS'), value, { maxKeys: names.length + 1 })
  const factories: [string, (o: never) => unknown, readonly string[]][] = [
    ['fixedWindow', fixedWindow, ['limit', 'windowMs', 'name']],
    ['slidingLog', slidingLog, ['limit', 'windowMs', 'name']],
    ['slidingWindow', slidingWindow, ['limit', 'windowMs', 'buckets', 'name']],
    ['tokenBucket', tokenBucket, ['capacity', 'refillPerSecond', 'name']],
    ['leakyBucket', leakyBucket, ['ratePerSecond', 'maxQueueMs', 'name']],
  ]

  it('every rule factory builds a rule that decides, or throws a coded InvalidOptionError; never hangs', () => {
    for (const [where, factory, names] of factories) {
      fc.assert(
        fc.property(optionsOf(names), (raw) => {
          // Built as JSON would build it, so `__proto__` is an own key as a parsed config would have it.
          const options = JSON.parse(JSON.stringify(raw, (_k, v) => (v === undefined ? null : v)))
          let built: unknown
          try {
            built = factory(options as never)
          } catch (error) {
            expect(error, where).toBeInstanceOf(InvalidOptionError)
            expect((error as InvalidOptionError).option.startsWith(`${where}`)).toBe(true)
            return
          }
          const limiter = createLimiter({
            rules: [built as never],
            store: new MemoryStore({ sweepIntervalMs: 0 }),
          })
          for (let i = 0; i < 3; i++) {
            const d = limiter.consumeNow('k') as { retryAfterMs: number; remaining: number }
            expect(
              (Number.isFinite(d.retryAfterMs) && Number.isFinite(d.remaining)) || d.remaining === Infinity,
            ).toBe(true)
          }
        }),
        { numRuns: 400 },
      )
    }
  })

  it('createLimiter, MemoryStore, RedisStore and rateLimit take valid options or throw coded errors', () => {
    const entry = (name: string, build: (o: never) => unknown, names: readonly string[]) =>
      fc.assert(
        fc.property(optionsOf(names), (options) => {
          try {
            const built = build(options as never)
            ;(built as { limiter?: { close(): void } }).limiter?.close()
            ;(built as { close?(): void }).close?.()
          } catch (error) {
            expect(error, name).toBeInstanceOf(InvalidOptionError)
          }
        }),
        { numRuns: 300 },
      )
    entry('createLimiter', (o) => createLimiter({ rules: [rule], ...(o as object) }), [
      'store',
      'prefix',
      'onStoreError',
    ])
    entry('MemoryStore', (o) => new MemoryStore(o), ['clock', 'maxKeys', 'sweepIntervalMs'])
    entry('RedisStore', (o) => new RedisStore({ client, ...(o as object) }), [
      'prefix',
      'timeoutMs',
      'clock',
      'deniedCache',
      'maxInFlight',
    ])
    entry('rateLimit', (o) => rateLimit({ rules: [rule], ...(o as object) }), [
      ...REQUEST_OPTION_NAMES,
      'prefix',
      'onStoreError',
      'onLimited',
    ])
  })
})
