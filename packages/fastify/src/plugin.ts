/**
 * @module The Fastify plugin. Everything is resolved at registration: the plugin's limit once, each
 * route's limit in `onRoute`, each `fastify.rateLimit()` limit when it is called. Per request a hook only
 * asks core's HTTP kit (`check`), writes the headers and goes on, holds (leaky-bucket queue), or hands a
 * `RateLimitRejection` to Fastify's error path.
 *
 * Limiters and prefixes. Routes that only change how requests are counted (`key`, `cost`, `skip`,
 * `headers`, `message`, ...) share the plugin's limiter, so a key has one counter across them, as with
 * an `app.use` middleware; a `'route'` part in the key separates routes. A route (or `fastify.rateLimit`
 * call) that sets `rules`, `store`, `prefix` or `onStoreError` gets a limiter of its own, on the plugin's
 * store unless it names one, under a prefix of its own: `<plugin prefix>:<METHOD> <url>` for a route,
 * `<plugin prefix>:rateLimit#<n>` for the n-th such `fastify.rateLimit` call, unless it sets `prefix`.
 *
 * Counting once. Per registration, a request is counted by one limit only: the first of the
 * registration's hooks to reach it (hooks of an encapsulated context run before route hooks; a route's
 * own `onRequest: fastify.rateLimit()` runs before the route-config or global hook, which are appended).
 * Registrations given the same `limiter` share that guard, so one limiter counts a request once.
 */
import { createHash } from 'node:crypto'
import {
  type CountedBy,
  combineHeaders,
  fixedWindow,
  type HttpLimit,
  type HttpLimitOptions,
  type HttpOutcome,
  holdResponse,
  InvalidOptionError,
  isPromise,
  isValidPrefix,
  LIMITER_OPTION_NAMES,
  type Limiter,
  limiterOption,
  MemoryStore,
  REQUEST_OPTION_NAMES,
  type RequestView,
  resolveHttpLimit,
  type Store,
  storeOption,
  withCounted,
} from '@sluice/core'
import type {
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
  RouteOptions,
} from 'fastify'
import fp from 'fastify-plugin'
import type { RateLimitHook } from './fastify-augmentation.ts'
import {
  checkedOptions,
  type OnLimited,
  PLUGIN_OPTION_NAMES,
  ROUTE_OPTION_NAMES,
  type RouteRateLimitOptions,
  type SluicePluginOptions,
} from './options.ts'
import { denial, missingKey, type RateLimitRejection } from './rejection.ts'

type Request = FastifyRequest
type KitOptions = HttpLimitOptions<Request>

/**
 * How sluice reads a Fastify request. `'ip'` is `request.ip`, so Fastify's `trustProxy` decides whether
 * `X-Forwarded-For` counts. `'route'` is the method and the route's URL template
 * (`request.routeOptions.url`, e.g. `GET /users/:id`), never the raw URL.
 */
const view: RequestView<Request> = {
  ip: (request) => request.ip,
  route: (request) => {
    const url = request.routeOptions.url
    return url === undefined ? '' : `${request.method} ${url}`
  },
  header: (request, name) => request.headers[name],
  countOnce,
}

/** The view for a limit resolved for one route: its URL is known, so `'route'` need not look it up. */
function routeView(url: string): RequestView<Request> {
  return { ...view, route: (request) => `${request.method} ${url}` }
}

/** The limiter that counted a request, or the limiters when several did: a slot every request is decorated with. */
const COUNTED = Symbol('sluice.countedBy')

/** The rate-limit headers sluice has written on a request's reply, for a later limit to add to: a decorated slot. */
const WRITTEN = Symbol('sluice.headers')

/** Records that `limiter` counts `request` in its decorated slot; false when that limiter already counted it. */
function countOnce(request: Request, limiter: object): boolean {
  const slot = request as unknown as Record<symbol, CountedBy>
  const counted = withCounted(slot[COUNTED], limiter)
  if (counted === false) return false
  slot[COUNTED] = counted
  return true
}

/** What a hook does next: go on (`undefined`), go to the error path, or stop (answered, or client gone). */
const STOP = Symbol('sluice.stop')
type Next = undefined | RateLimitRejection | typeof STOP

/** One guard per limiter given as `limiter` to several registrations, so it counts a request once. */
const limiterGuards = new WeakMap<object, symbol>()

async function sluicePlugin(fastify: FastifyInstance, rawOptions: SluicePluginOptions): Promise<void> {
  const options = checkedOptions<SluicePluginOptions>('sluice', rawOptions, PLUGIN_OPTION_NAMES)
  const { global = true, onLimited: baseOnLimited, ...base } = options
  if (base.limiter !== undefined) limiterOption('sluice.limiter', base.limiter)

  // Limiters of this registration share one store: the plugin's, its limiter's, or one made here.
  const ownStore = base.store === undefined && base.limiter === undefined ? new MemoryStore() : undefined
  /** Limiters this registration built: closing the app releases their prefixes for a new registration. */
  const built: Limiter[] = []
  const own = (limit: HttpLimit<Request>): HttpLimit<Request> => {
    built.push(limit.limiter)
    return limit
  }
  fastify.addHook('onClose', async () => {
    for (const limiter of built) limiter.close()
    ownStore?.close()
  })
  const store: Store | undefined = base.store ?? base.limiter?.store ?? ownStore
  const basePrefix = base.prefix ?? base.limiter?.prefix ?? 'sluice'

  let pluginLimit: HttpLimit<Request> | undefined
  if (base.rules !== undefined || base.limiter !== undefined) {
    const shared = ownStore === undefined ? base : { ...base, store: ownStore }
    pluginLimit = resolveHttpLimit<Request>('sluice', shared, view)
    if (base.limiter === undefined) own(pluginLimit)
  } else if (global) {
    throw new InvalidOptionError(
      'sluice.rules',
      undefined,
      'rules or a limiter (or global: false, with rules given per route)',
    )
  } else {
    checkDefaults(base)
  }
  const pluginLimiter = pluginLimit?.limiter

  const guard = base.limiter === undefined ? Symbol('sluice.counted') : guardOf(base.limiter)
  if (!fastify.hasRequestDecorator(guard)) fastify.decorateRequest(guard, false)
  if (!fastify.hasRequestDecorator(COUNTED)) fastify.decorateRequest(COUNTED, null)
  if (!fastify.hasRequestDecorator(WRITTEN)) fastify.decorateRequest(WRITTEN, null)
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)

  const usedPrefixes = new Set<string>()
  function prefixFor(label: string): string {
    // Routes with one method and URL but different constraints (host, version) get `#2`, `#3`, ...
    let prefix = labelled(basePrefix, label)
    for (let n = 2; usedPrefixes.has(prefix); n++) prefix = labelled(basePrefix, `${label}#${n}`)
    usedPrefixes.add(prefix)
    return prefix
  }

  /** One limit from options merged over the plugin's; `label` names its prefix if it needs its own. */
  function limitFrom(
    where: string,
    override: Partial<RouteRateLimitOptions>,
    label: () => string,
    requestView: RequestView<Request>,
  ): HttpLimit<Request> {
    if (override.limiter !== undefined) limiterOption(`${where}.limiter`, override.limiter)
    const common: KitOptions = {}
    for (const name of REQUEST_OPTION_NAMES) {
      const value = inherited(override[name], base[name])
      if (value !== undefined) (common as Record<string, unknown>)[name] = value
    }
    if (override.limiter !== undefined) {
      // The route's own limiter; the kit rejects rules, store, prefix or onStoreError next to it.
      const own: KitOptions = { limiter: override.limiter }
      for (const name of LIMITER_OPTION_NAMES) {
        if (override[name] !== undefined) (own as Record<string, unknown>)[name] = override[name]
      }
      return resolveHttpLimit(where, { ...common, ...own }, requestView)
    }
    if (LIMITER_OPTION_NAMES.some((name) => override[name] !== undefined)) {
      const rules = inherited(override.rules, base.rules)
      const onStoreError = inherited(override.onStoreError, base.onStoreError)
      const routeStore = inherited(override.store, store)
      const limit = resolveHttpLimit(
        where,
        {
          ...common,
          ...(rules === undefined ? {} : { rules }),
          ...(routeStore === undefined ? {} : { store: routeStore }),
          prefix: override.prefix === undefined ? prefixFor(label()) : override.prefix,
          ...(onStoreError === undefined ? {} : { onStoreError }),
        },
        requestView,
      )
      return own(limit)
    }
    if (pluginLimit === undefined || pluginLimiter === undefined) {
      throw new InvalidOptionError(`${where}.rules`, undefined, 'rules or a limiter (the plugin has none)')
    }
    if (!REQUEST_OPTION_NAMES.some((name) => override[name] !== undefined)) return pluginLimit
    return resolveHttpLimit(where, { ...common, limiter: pluginLimiter }, requestView)
  }

  const globalHook = global ? hookFor(pluginLimit!, guard, baseOnLimited) : undefined

  /** Route limits by their options object and `METHOD url`, so Fastify's HEAD twin of a GET shares its limit. */
  const routeHooks = new WeakMap<object, Map<string, onRequestHookHandler>>()

  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit
    if (config === false) return
    let hook: onRequestHookHandler
    if (config === undefined) {
      if (globalHook === undefined) return
      hook = globalHook
    } else {
      if (config === null || typeof config !== 'object' || Array.isArray(config)) {
        throw new InvalidOptionError('config.rateLimit', config, 'an options object, or false')
      }
      const methods = Array.isArray(route.method) ? route.method.join(',') : route.method
      const url = route.url
      let byRoute = routeHooks.get(config)
      const shared = byRoute?.get(`${methods === 'HEAD' ? 'GET' : methods} ${url}`)
      if (shared !== undefined) {
        hook = shared
      } else {
        const override = checkedOptions<RouteRateLimitOptions>('config.rateLimit', config, ROUTE_OPTION_NAMES)
        const limit = limitFrom('config.rateLimit', override, () => `${methods} ${url}`, routeView(url))
        hook = hookFor(limit, guard, override.onLimited ?? baseOnLimited)
        if (byRoute === undefined) {
          byRoute = new Map()
          routeHooks.set(config, byRoute)
        }
        byRoute.set(`${methods} ${url}`, hook)
      }
    }
    route.onRequest = appended(route.onRequest, hook)
  })

  let hookCount = 0
  function rateLimit(options?: RouteRateLimitOptions): RateLimitHook {
    const override = checkedOptions<RouteRateLimitOptions>('rateLimit', options, ROUTE_OPTION_NAMES)
    const limit = limitFrom('rateLimit', override, () => `rateLimit#${++hookCount}`, view)
    const hook = hookFor(limit, guard, override.onLimited ?? baseOnLimited)
    return Object.defineProperty(hook, 'limiter', { value: limit.limiter, enumerable: true }) as RateLimitHook
  }
  // Own property, not `hasDecorator`: a registration in a child context gets a `rateLimit` of its own.
  if (!Object.hasOwn(fastify, 'rateLimit')) fastify.decorate('rateLimit', rateLimit)
}

/** The `onRequest` hook of one limit. Callback style: it stops the chain by not calling `done`. */
function hookFor(
  limit: HttpLimit<Request>,
  guard: symbol,
  onLimited: OnLimited | undefined,
): onRequestHookHandler {
  return function sluiceRateLimit(
    request: Request,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
  ): void {
    const marks = request as unknown as Record<symbol, boolean>
    if (marks[guard] === true) {
      done()
      return
    }
    marks[guard] = true
    const go = done as (next?: unknown) => void
    // On a memory store the outcome is there at once, and the request goes on in the same tick.
    const outcome = limit.check(request)
    if (outcome instanceof Promise) outcome.then((o) => proceed(o, request, reply, onLimited, go), go)
    else proceed(outcome, request, reply, onLimited, go)
  }
}

/** Writes out an outcome, then goes on (`go()`), to the error path (`go(error)`), or stops. */
function proceed(
  outcome: HttpOutcome,
  request: Request,
  reply: FastifyReply,
  onLimited: OnLimited | undefined,
  go: (next?: unknown) => void,
): void {
  let next: Next | Promise<Next>
  try {
    next = respond(outcome, request, reply, onLimited)
  } catch (error) {
    go(error)
    return
  }
  if (isPromise(next)) next.then((n) => n !== STOP && go(n), go)
  else if (next !== STOP) go(next)
}

function respond(
  outcome: HttpOutcome,
  request: Request,
  reply: FastifyReply,
  onLimited: OnLimited | undefined,
): Next | Promise<Next> {
  if (outcome.action === 'pass') return undefined
  if (outcome.action === 'reject') return missingKey(outcome.body, outcome.contentType)
  const decision = outcome.decision
  request.rateLimit = decision
  // When a limit of another registration counted this request first, the reply lists both limits.
  const slot = request as unknown as Record<symbol, Readonly<Record<string, string>> | null | undefined>
  const earlier = slot[WRITTEN]
  const headers =
    earlier === null || earlier === undefined ? outcome.headers : combineHeaders(earlier, outcome.headers)
  slot[WRITTEN] = headers
  for (const name in headers) reply.header(name, headers[name])
  if (outcome.action === 'allow') return decision.waitMs > 0 ? held(reply, decision.waitMs) : undefined
  reply.code(outcome.status)
  const rejection = denial(decision, outcome.status, headers, outcome.body, outcome.contentType)
  if (onLimited === undefined) return rejection
  // A failing onLimited is an error like any other: sluice's status is withdrawn, so Fastify's error
  // handling picks the status (the error's `statusCode`, else 500).
  const failed = (error: unknown): never => {
    reply.code(200)
    throw error
  }
  let result: ReturnType<OnLimited>
  try {
    result = onLimited(request, reply, decision)
  } catch (error) {
    return failed(error)
  }
  if (isPromise(result)) return result.then((r) => (r === reply || reply.sent ? STOP : rejection), failed)
  return result === reply || reply.sent ? STOP : rejection
}

/**
 * Holds a queued request `ms`, then lets it go on. When the client goes away first (the response's
 * `close` before it was sent) the wait ends at once, its timer cleared, and the request stops there:
 * the handler never runs.
 */
function held(reply: FastifyReply, ms: number): Promise<Next> {
  return holdResponse(reply.raw, ms).then((waited) => (waited ? undefined : STOP))
}

/**
 * A route's own option, else the plugin's. Only `undefined` inherits: a route's `null` or other bad value
 * goes on to be rejected, never replaced by the plugin's.
 */
function inherited<T>(own: T | undefined, plugin: T): T {
  return own === undefined ? plugin : own
}

function appended(existing: unknown, hook: onRequestHookHandler): RouteOptions['onRequest'] {
  if (existing === undefined || existing === null) return [hook]
  if (Array.isArray(existing)) return [...existing, hook]
  return [existing as onRequestHookHandler, hook]
}

function guardOf(limiter: object): symbol {
  let guard = limiterGuards.get(limiter)
  if (guard === undefined) {
    guard = Symbol('sluice.counted')
    limiterGuards.set(limiter, guard)
  }
  return guard
}

/**
 * Checks the plugin's options when it has no rules of its own (`global: false`, rules per route): the
 * same checks as a limit, on a throwaway store, so a bad default fails at registration, not at a route.
 */
function checkDefaults(base: Partial<SluicePluginOptions>): void {
  const scratch = new MemoryStore({ sweepIntervalMs: 0 })
  const { store, ...rest } = base
  if (store !== undefined) storeOption('sluice.store', store)
  try {
    resolveHttpLimit<Request>(
      'sluice',
      { ...rest, rules: [fixedWindow({ limit: 1, windowMs: 1000 })], store: scratch },
      view,
    )
  } finally {
    scratch.close()
  }
}

/** `<prefix>:<label>` when that is a valid prefix (printable ASCII, no `"` `\` `{` `}`, at most 128), else a digest. */
function labelled(prefix: string, label: string): string {
  const candidate = `${prefix}:${label}`
  if (isValidPrefix(candidate)) return candidate
  const digest = createHash('sha256').update(candidate).digest('base64url').slice(0, 22)
  const short = `${prefix}:#${digest}`
  return short.length <= 128 ? short : `#${digest}`
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
