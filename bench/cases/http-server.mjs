/**
 * @module One HTTP server for the HTTP section, in a process of its own, on a free loopback port.
 * params: { framework: 'express' | 'fastify' | 'koa' | 'node' | 'nest', variant, redisPort, platform }
 * (`platform`, for Nest: 'express' or 'fastify').
 * Variants: `bare`, `sluice-memory`, `sluice-redis` (ioredis), `sluice-redis-node` (node-redis),
 * `sluice-redis-prefetch` (ioredis, RedisStore `prefetch: true`: batches of up to 64 units spent locally
 * for up to 100 ms),
 * `peer-memory`, `peer-redis` (express-rate-limit, with rate-limit-redis for Redis; @fastify/rate-limit,
 * with its own Redis support, which takes ioredis; koa-ratelimit, memory only, on Koa; node:http has no
 * peer; Nest: @nestjs/throttler, memory). Koa, node:http and Nest serve `bare`, `sluice-memory` and (Koa,
 * Nest) `peer-memory` only, and Nest `noop` too. Every limit is so high that nothing is denied;
 * every limiter keys by client IP and sends its default headers.
 * Three floors: `noop`, a middleware (Express) or `onRequest` hook (Fastify) that only goes on, the
 * least any limiter adds; `noop-headers`, the same setting the two draft-11 headers sluice sends
 * (constant strings), the least a limiter sending them adds; `noop-ip-headers`, reading the client
 * address as an `'ip'` key must and sending the headers with a remaining count new on each response, as
 * a limiter's are: the least an IP-keyed limiter sending its headers adds.
 * `sluice-memory-observed` is `sluice-memory` with `@sluice/metrics` subscribed: OpenTelemetry metrics on a
 * real SDK meter provider, and live statistics, as an operator would run them.
 * Prints `READY <port>`, serves until SIGTERM. `sluice-redis-prefetch` counts the calls its store answered in
 * the call (units spent locally) and those it answered with a promise (a round trip, or waiting for one
 * to bring units); on SIGUSR2 it prints `STATS {"inCall","promised"}` and starts counting afresh.
 */
import { createRequire } from 'node:module'
import { params } from '../lib/child.mjs'
import { sluice } from '../lib/sluice.mjs'
import { HIGH, WINDOW_MS } from '../lib/subjects.mjs'

const require = createRequire(import.meta.url)
const p = params()
const { fixedWindow } = await sluice('core')
const rules = [fixedWindow({ limit: HIGH, windowMs: WINDOW_MS })]
const closers = []
/** What sluice's default headers look like for the bench's rule, for the `noop-headers` floor. */
const FLOOR_HEADERS = {
  'RateLimit-Policy': `"${rules[0].name}";q=${HIGH};w=${Math.ceil(WINDOW_MS / 1000)}`,
  RateLimit: `"${rules[0].name}";r=${HIGH - 1};t=${Math.ceil(WINDOW_MS / 1000)}`,
}
let floorRemaining = HIGH
/**
 * The headers a limiter must send per response, for the `noop-ip-headers` floor: the policy, and a
 * `RateLimit` item whose remaining count is new each time (a fresh string for Node to check and write).
 */
function freshHeaders() {
  floorRemaining = floorRemaining > 1 ? floorRemaining - 1 : HIGH
  return {
    'RateLimit-Policy': FLOOR_HEADERS['RateLimit-Policy'],
    RateLimit: `"${rules[0].name}";r=${floorRemaining};t=${Math.ceil(WINDOW_MS / 1000)}`,
  }
}

async function redisClient() {
  const { Redis } = require('ioredis')
  const client = new Redis({
    host: '127.0.0.1',
    port: p.redisPort,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: p.autoPipelining === true,
  })
  await new Promise((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', reject)
  })
  closers.push(() => client.disconnect())
  return client
}

/** A node-redis client, for the `sluice-redis-node` variant. */
async function nodeRedisClient() {
  const { createClient } = require('redis')
  const client = createClient({ socket: { host: '127.0.0.1', port: p.redisPort }, disableOfflineQueue: true })
  await client.connect()
  closers.push(() => client.destroy())
  return client
}

/**
 * sluice's RedisStore on ioredis (`sluice-redis`), on node-redis (`sluice-redis-node`), or on ioredis with
 * prefetch at its defaults (`sluice-redis-prefetch`).
 */
async function sluiceStore() {
  const { RedisStore } = await sluice('redis')
  const client = p.variant === 'sluice-redis-node' ? await nodeRedisClient() : await redisClient()
  const store = new RedisStore({
    client,
    ...(p.variant === 'sluice-redis-prefetch' ? { prefetch: true } : {}),
  })
  if (p.variant === 'sluice-redis-prefetch') countAnswers(store)
  // Unspent units go back before the client disconnects (closers run in order).
  closers.unshift(() => store.close())
  return store
}

/** Counts the store's answers given in the call and by promise, printed and reset on SIGUSR2. */
function countAnswers(store) {
  let inCall = 0
  let promised = 0
  const apply = store.apply.bind(store)
  store.apply = (...args) => {
    const answer = apply(...args)
    if (typeof answer?.then === 'function') promised++
    else inCall++
    return answer
  }
  process.on('SIGUSR2', () => {
    process.stdout.write(`STATS ${JSON.stringify({ inCall, promised })}\n`)
    inCall = 0
    promised = 0
  })
}

const SLUICE_VARIANTS = new Set([
  'sluice-memory',
  'sluice-memory-observed',
  'sluice-memory-overload',
  'sluice-redis',
  'sluice-redis-node',
  'sluice-redis-prefetch',
])
const MEMORY_VARIANTS = new Set(['sluice-memory', 'sluice-memory-observed', 'sluice-memory-overload'])

/**
 * `sluice-memory-overload`: the same limiter with an `overload` guard that is never triggered, so every
 * request enters and leaves the guard and none is shed: what the guard costs a request when on. Its
 * signals are injected: the default monitor's cost is per second (a 10 ms timer), not per request, and
 * under callgrind, where a request takes fifty times longer, it would be charged to the requests.
 */
async function overloadOption() {
  if (p.variant !== 'sluice-memory-overload') return {}
  const { overload } = await sluice('core')
  const calm = { eventLoopDelayMs: 0, utilization: 0 }
  return { overload: overload({ maxEventLoopDelayMs: 100, signals: () => calm }) }
}

if (p.variant === 'sluice-memory-observed') {
  const { liveStats, openTelemetryMetrics } = await sluice('metrics')
  const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
  // A reader nobody collects from: the cost measured is recording, as between two scrapes.
  class Reader extends MetricReader {
    async onShutdown() {}
    async onForceFlush() {}
  }
  const meter = new MeterProvider({ readers: [new Reader()] }).getMeter('bench')
  const sinks = [openTelemetryMetrics({ meter }), liveStats()]
  closers.push(() => {
    for (const sink of sinks) sink.close()
  })
}

async function expressApp() {
  const express = require('express')
  const app = express()
  if (SLUICE_VARIANTS.has(p.variant)) {
    const { rateLimit } = await sluice('express')
    const store = MEMORY_VARIANTS.has(p.variant) ? undefined : await sluiceStore()
    app.use(rateLimit({ rules, ...(store === undefined ? {} : { store }), ...(await overloadOption()) }))
  } else if (p.variant === 'noop') {
    app.use((_req, _res, next) => next())
  } else if (p.variant === 'noop-headers') {
    app.use((_req, res, next) => {
      for (const name in FLOOR_HEADERS) res.setHeader(name, FLOOR_HEADERS[name])
      next()
    })
  } else if (p.variant === 'noop-ip-headers') {
    app.use((req, res, next) => {
      if (req.ip === undefined) throw new Error('no req.ip')
      const headers = freshHeaders()
      for (const name in headers) res.setHeader(name, headers[name])
      next()
    })
  } else if (p.variant === 'peer-memory' || p.variant === 'peer-redis') {
    const { rateLimit } = require('express-rate-limit')
    let store
    if (p.variant === 'peer-redis') {
      const { RedisStore } = require('rate-limit-redis')
      const client = await redisClient()
      store = new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args) })
    }
    app.use(rateLimit({ windowMs: WINDOW_MS, limit: HIGH, validate: false, ...(store ? { store } : {}) }))
  }
  app.get('/', (_req, res) => {
    res.json({ hello: 'world' })
  })
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server.address().port))
    closers.push(() => server.close())
  })
}

async function fastifyApp() {
  const Fastify = require('fastify')
  const app = Fastify({ logger: false })
  if (SLUICE_VARIANTS.has(p.variant)) {
    const { sluice: plugin } = await sluice('fastify')
    const store = MEMORY_VARIANTS.has(p.variant) ? undefined : await sluiceStore()
    await app.register(plugin, {
      rules,
      ...(store === undefined ? {} : { store }),
      ...(await overloadOption()),
    })
  } else if (p.variant === 'noop') {
    app.addHook('onRequest', (_request, _reply, done) => done())
  } else if (p.variant === 'noop-headers') {
    app.addHook('onRequest', (_request, reply, done) => {
      for (const name in FLOOR_HEADERS) reply.header(name, FLOOR_HEADERS[name])
      done()
    })
  } else if (p.variant === 'noop-ip-headers') {
    app.addHook('onRequest', (request, reply, done) => {
      if (request.ip === undefined) throw new Error('no request.ip')
      const headers = freshHeaders()
      for (const name in headers) reply.header(name, headers[name])
      done()
    })
  } else if (p.variant === 'peer-memory' || p.variant === 'peer-redis') {
    const redis = p.variant === 'peer-redis' ? await redisClient() : undefined
    await app.register(require('@fastify/rate-limit'), {
      max: HIGH,
      timeWindow: WINDOW_MS,
      ...(redis ? { redis } : {}),
    })
  }
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  closers.push(() => app.close())
  return app.server.address().port
}

async function koaApp() {
  const Koa = require('koa')
  const app = new Koa()
  if (p.variant === 'sluice-memory') {
    const { rateLimit } = await sluice('koa')
    app.use(rateLimit({ rules }))
  } else if (p.variant === 'peer-memory') {
    const ratelimit = require('koa-ratelimit')
    app.use(ratelimit({ driver: 'memory', db: new Map(), duration: WINDOW_MS, max: HIGH }))
  }
  app.use((ctx) => {
    ctx.body = { hello: 'world' }
  })
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server.address().port))
    closers.push(() => server.close())
  })
}

async function nodeApp() {
  const { createServer } = require('node:http')
  const handler = (_req, res) => {
    res.setHeader('content-type', 'application/json; charset=utf-8')
    res.end('{"hello":"world"}')
  }
  const listener =
    p.variant === 'sluice-memory' ? (await sluice('node')).withRateLimit({ rules }, handler) : handler
  const server = createServer(listener)
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server.address().port))
    closers.push(() => server.close())
  })
}

/**
 * A Nest app on `p.platform` (`express` or `fastify`) with one controller, `GET /`: `bare`, `noop` (a
 * global guard answering true: the floor of any guard), `sluice-memory` (`SluiceModule.forRoot`, its global guard) or `peer-memory` (@nestjs/throttler's
 * `ThrottlerModule.forRoot` and a global `ThrottlerGuard`, its in-memory storage). Plain JavaScript has no
 * decorator syntax: they are applied as functions, as TypeScript's compiled output does.
 */
async function nestApp() {
  require('reflect-metadata')
  const { Controller, Get, Module } = require('@nestjs/common')
  const { APP_GUARD, NestFactory } = require('@nestjs/core')
  class HelloController {
    hello() {
      return { hello: 'world' }
    }
  }
  const proto = HelloController.prototype
  Reflect.decorate([Get()], proto, 'hello', Object.getOwnPropertyDescriptor(proto, 'hello'))
  Reflect.decorate([Controller()], HelloController)
  const imports = []
  const providers = []
  if (p.variant === 'sluice-memory') {
    const { SluiceModule } = await sluice('nestjs')
    imports.push(SluiceModule.forRoot({ rules }))
  } else if (p.variant === 'noop') {
    // The floor: a global guard that only lets the request through, the least any guard adds.
    class PassGuard {
      canActivate() {
        return true
      }
    }
    providers.push({ provide: APP_GUARD, useClass: PassGuard })
  } else if (p.variant === 'peer-memory') {
    const { ThrottlerGuard, ThrottlerModule } = require('@nestjs/throttler')
    imports.push(ThrottlerModule.forRoot([{ ttl: WINDOW_MS, limit: HIGH }]))
    providers.push({ provide: APP_GUARD, useClass: ThrottlerGuard })
  }
  class AppModule {}
  Reflect.decorate([Module({ imports, controllers: [HelloController], providers })], AppModule)
  const adapter =
    p.platform === 'fastify'
      ? new (require('@nestjs/platform-fastify').FastifyAdapter)()
      : new (require('@nestjs/platform-express').ExpressAdapter)()
  const app = await NestFactory.create(AppModule, adapter, { logger: false })
  await app.listen(0, '127.0.0.1')
  closers.push(() => app.close())
  return app.getHttpServer().address().port
}

const APPS = { express: expressApp, fastify: fastifyApp, koa: koaApp, node: nodeApp, nest: nestApp }
const port = await APPS[p.framework]()
process.stdout.write(`READY ${port}\n`)
process.once('SIGTERM', () => {
  for (const close of closers) close()
  process.exit(0)
})
