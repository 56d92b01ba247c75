/**
 * The public types: plugin options, the route-config augmentation, `request.rateLimit` and the decorator.
 * `tsc -b` checks this file (tsconfig.tests.json), so each `@ts-expect-error` must meet an error.
 */
import { type Decision, fixedWindow, type Limiter } from '@sluice/core'
import {
  type RateLimitHook,
  RateLimitRejection,
  type RequestRateLimit,
  type RouteRateLimitOptions,
  type SluicePluginOptions,
  sluice,
} from '@sluice/fastify'
import Fastify, { type FastifyContextConfig, type FastifyRequest, type onRequestHookHandler } from 'fastify'
import { describe, expect, expectTypeOf, it } from 'vitest'

const rules = [fixedWindow({ limit: 10, windowMs: 60_000 })]

describe('types', () => {
  it('exports one plugin, sluice, typed by its options, and no other name for it', async () => {
    const surface = await import('@sluice/fastify')
    expect(Object.keys(surface).sort()).toEqual(['RateLimitRejection', 'sluice'])
    const app = Fastify()
    await app.register(sluice, { rules })
    app.get('/', async () => 'ok')
    // Not encapsulated: the limit reaches the route registered beside it.
    expect((await app.inject('/')).headers.ratelimit).toMatch(/^"10-per-60s";r=9;t=\d+$/)
    await app.close()
    expectTypeOf<SluicePluginOptions>().toHaveProperty('global').toEqualTypeOf<boolean | undefined>()
    expectTypeOf<RouteRateLimitOptions>().not.toHaveProperty('global')
    expectTypeOf<RouteRateLimitOptions['onLimited']>().parameter(2).toEqualTypeOf<Decision>()
  })

  it('types the route config, request.rateLimit and the decorator', async () => {
    expectTypeOf<FastifyContextConfig['rateLimit']>().toEqualTypeOf<
      RouteRateLimitOptions | false | undefined
    >()
    expectTypeOf<FastifyRequest['rateLimit']>().toEqualTypeOf<RequestRateLimit | undefined>()
    expectTypeOf<RateLimitHook>().toExtend<onRequestHookHandler>()
    expectTypeOf<RateLimitHook['limiter']>().toEqualTypeOf<Limiter<FastifyRequest>>()
    expectTypeOf<RateLimitRejection['decision']>().toEqualTypeOf<Decision | undefined>()

    const app = Fastify()
    await app.register(sluice, { rules, key: ['ip', { header: 'x-tenant' }], global: false })
    expectTypeOf(app.rateLimit).returns.toEqualTypeOf<RateLimitHook>()
    app.get('/a', { config: { rateLimit: { cost: 2, onLimited: (_req, reply) => reply } } }, async () => 'a')
    app.get('/b', { config: { rateLimit: false } }, async () => 'b')
    app.get<{ Params: { id: string } }>(
      '/c/:id',
      { onRequest: app.rateLimit({ rules }) },
      async (request) => {
        expectTypeOf(request.params.id).toEqualTypeOf<string>()
        return request.rateLimit?.remaining ?? null
      },
    )
    app.get('/d', { onRequest: [app.rateLimit()] }, async () => 'd')
    app.setErrorHandler((error, _request, reply) => {
      if (error instanceof RateLimitRejection) return reply.send(error)
      return reply.send(error)
    })

    // Fastify infers a route's config type from the literal, so a wrong value inline is caught where it
    // conflicts with the augmentation, and every option is checked once the config is typed.
    // @ts-expect-error cost is a number or a function of the request
    expect(() => app.get('/e', { config: { rateLimit: { cost: '2' } } }, async () => 'e')).toThrow()
    // @ts-expect-error rateLimit is options or false, never true
    const always: FastifyContextConfig = { rateLimit: true }
    // @ts-expect-error an option sluice does not know
    const unknownOption: FastifyContextConfig = { rateLimit: { max: 5 } }
    expect(() => app.get('/f', { config: always }, async () => 'f')).toThrow()
    expect(() => app.get('/g', { config: unknownOption }, async () => 'g')).toThrow()
    // @ts-expect-error global belongs to the plugin, not a route
    expect(() => app.rateLimit({ global: false })).toThrow()
    // @ts-expect-error onLimited gets the decision third
    app.rateLimit({ onLimited: (_req, _reply, _decision: string) => undefined })
    await app.ready()
  })

  it('types the plugin options at register', async () => {
    const app = Fastify()
    // @ts-expect-error windowMs belongs to rules, not the plugin
    app.register(sluice, { rules, windowMs: 1000 })
    // @ts-expect-error key parts are 'ip', 'route', headers or functions
    app.register(sluice, { rules, key: 'url' })
    await expect(app.ready()).rejects.toMatchObject({ option: 'sluice.windowMs' })
  })
})
