/**
 * @module The Fastify plugin's registration. Everything is resolved here, once: the plugin's limit, each
 * route's limit in `onRoute`, each `fastify.rateLimit()` limit when it is called (route-limits.ts). Per
 * request only a limit's hook runs (hook.ts).
 */
import { InvalidOptionError } from '@sluice/core'
import { parseHttpOptions, type RequestRecord } from '@sluice/core/http'
import type { FastifyInstance, FastifyPluginAsync, onRequestHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { RateLimitHook } from './augmentation.ts'
import { adapter, hookFor, RECORD, routeAdapter } from './hook.ts'
import {
  PLUGIN_OWN_OPTIONS,
  type RateLimitHookName,
  type RouteRateLimitOptions,
  type SluicePluginOptions,
} from './options.ts'
import { type BuiltLimit, RouteLimits } from './route-limits.ts'

async function sluicePlugin(fastify: FastifyInstance, options: SluicePluginOptions): Promise<void> {
  const plugin = parseHttpOptions<Parameters<RateLimitHook>[0]>('sluice', options ?? {}, PLUGIN_OWN_OPTIONS)
  const global = (plugin.own.global as boolean | undefined) ?? true
  if (global && plugin.rules === undefined && plugin.limiter === undefined) {
    throw new InvalidOptionError(
      'sluice.rules',
      undefined,
      'rules or a limiter (or global: false, with rules given per route)',
    )
  }
  const limits = new RouteLimits(plugin)
  fastify.addHook('onClose', async () => limits.close())

  // The record slot is shared by every registration (so stacked limits see one record); `rateLimit`
  // reads the decision from it.
  if (!fastify.hasRequestDecorator(RECORD)) fastify.decorateRequest(RECORD, null)
  if (!fastify.hasRequestDecorator('rateLimit')) {
    fastify.decorateRequest('rateLimit', {
      getter(this: object) {
        return (this as Record<typeof RECORD, RequestRecord | null>)[RECORD]?.shown
      },
    })
  }

  const hookOf = ({ limit, onLimited }: BuiltLimit) => hookFor(limit, onLimited)
  const pluginPhase = (plugin.own.hook as RateLimitHookName | undefined) ?? 'onRequest'
  const pluginLimit = limits.plugin
  const globalHook = global && pluginLimit !== undefined ? hookOf(pluginLimit) : undefined

  /**
   * Route hooks by their options object and `METHOD url`, one entry per method of a route, so Fastify's
   * HEAD twin of a route that serves GET (alone or among other methods) shares its limit.
   */
  const routeHooks = new WeakMap<object, Map<string, onRequestHookHandler>>()

  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit
    if (config === false) return
    let hook: onRequestHookHandler
    let phase = pluginPhase
    if (config === undefined) {
      if (globalHook === undefined) return
      hook = globalHook
    } else {
      if (config === null || typeof config !== 'object' || Array.isArray(config)) {
        throw new InvalidOptionError('config.rateLimit', config, 'an options object, or false')
      }
      const methods: readonly string[] = Array.isArray(route.method) ? route.method : [route.method]
      const url = route.url
      let byRoute = routeHooks.get(config)
      const shared = methods.length === 1 && methods[0] === 'HEAD' ? byRoute?.get(`GET ${url}`) : undefined
      if (shared !== undefined) {
        hook = shared
      } else {
        hook = hookOf(
          limits.limitFor('config.rateLimit', config, () => `${methods.join(',')} ${url}`, routeAdapter(url)),
        )
        if (byRoute === undefined) {
          byRoute = new Map()
          routeHooks.set(config, byRoute)
        }
        for (const method of methods) byRoute.set(`${method} ${url}`, hook)
      }
      phase = ((config as { hook?: RateLimitHookName }).hook ?? pluginPhase) as RateLimitHookName
    }
    // preHandler runs after authentication's hooks, so the limit can key on what they set.
    if (phase === 'preHandler')
      route.preHandler = appended(route.preHandler, hook) as RouteOptions['preHandler']
    else route.onRequest = appended(route.onRequest, hook)
  })

  let hookCount = 0
  function rateLimit(options?: RouteRateLimitOptions): RateLimitHook {
    const hook = (options as { hook?: unknown } | undefined)?.hook
    if (hook !== undefined) {
      throw new InvalidOptionError(
        'rateLimit.hook',
        hook,
        'no hook: place the returned hook yourself, as { onRequest: ... } or { preHandler: ... }',
      )
    }
    const built = limits.limitFor('rateLimit', options, () => `rateLimit#${++hookCount}`, adapter)
    return Object.defineProperty(hookOf(built), 'limiter', {
      value: built.limit.limiter,
      enumerable: true,
    }) as RateLimitHook
  }
  // Own property, not `hasDecorator`: a registration in a child context gets a `rateLimit` of its own.
  if (!Object.hasOwn(fastify, 'rateLimit')) fastify.decorate('rateLimit', rateLimit)
}

function appended(existing: unknown, hook: onRequestHookHandler): RouteOptions['onRequest'] {
  if (existing === undefined || existing === null) return [hook]
  if (Array.isArray(existing)) return [...existing, hook]
  return [existing as onRequestHookHandler, hook]
}

/**
 * The sluice plugin: `await app.register(sluice, { rules: [...] })`. Limits every route by default
 * (`global: false` for only the routes that ask); per route `{ config: { rateLimit: options | false } }`;
 * per hook `{ onRequest: app.rateLimit(options) }`. Every option is checked at registration; an unknown
 * or invalid one throws `InvalidOptionError` naming it (`sluice.<name>`, `config.rateLimit.<name>`,
 * `rateLimit.<name>`).
 */
export const sluice: FastifyPluginAsync<SluicePluginOptions> = fp(sluicePlugin, {
  fastify: '5.x',
  name: '@sluice/fastify',
})
