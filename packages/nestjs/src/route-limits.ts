/**
 * @module The limits of an app, built once when it initializes: for every route handler of every
 * controller (and every provider method that says `@RateLimit`), the module's options, the class's and the
 * method's, merged in that order, built into one limit. The guard only looks its route's limit up.
 *
 * Each route counts on its own: its limiter's prefix is `<prefix>:<Controller>.<handler>` (the module's
 * prefix, default `sluice`), on the module's store (a `MemoryStore` of the module's when none is given).
 * Classes that share a name (a v1 and a v2 `ItemsController`) are told apart by what routes them, their
 * path, version and host: `<prefix>:ItemsController@v1/items.list`. Two that share all of it too fail
 * the app's start with `ERR_SLUICE_PREFIX_COLLISION`, rather than share a count.
 * Routes share a count when they are given the same explicit `prefix` (they then share one limiter, and
 * must give the same rules), or when they inherit the module's `limiter`.
 */

import {
  type ExecutionContext,
  Inject,
  Injectable,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common'
import { GUARDS_METADATA, HOST_METADATA, PATH_METADATA, VERSION_METADATA } from '@nestjs/common/constants.js'
import { DiscoveryService, HttpAdapterHost, MetadataScanner } from '@nestjs/core'
import {
  createLimiter,
  ErrorCode,
  InvalidOptionError,
  type Limiter,
  MemoryStore,
  SluiceError,
  type Store,
} from '@sluice/core'
import {
  buildRequestLimit,
  labelledPrefix,
  mergeHttpOptions,
  type ParsedHttpOptions,
  type RequestLimit,
} from '@sluice/core/http'
import { RATE_LIMIT_METADATA, type RateLimitMetadata } from './decorators.ts'
import type { OnLimited, PlatformRequest, PlatformResponse, RequestResponse } from './options.ts'
import { SLUICE_OPTIONS } from './options.ts'
import { type Platform, platformOf } from './platform.ts'

type Parsed = ParsedHttpOptions<PlatformRequest, PlatformResponse>
type Limit = RequestLimit<PlatformRequest, PlatformResponse>

/** One route's limit and the `onLimited` that answers its denials. */
export interface RouteLimit {
  readonly limit: Limit
  readonly onLimited: OnLimited | undefined
}

/** What a class or method's `@RateLimit` says, read from its metadata. */
function metadataOf(target: object): RateLimitMetadata | undefined {
  return Reflect.getMetadata(RATE_LIMIT_METADATA, target) as RateLimitMetadata | undefined
}

/** The app's route limits. Built by `SluiceModule`; the guard reads them. */
@Injectable()
export class SluiceLimits implements OnModuleInit, OnModuleDestroy {
  readonly #module: Parsed
  readonly #discovery: DiscoveryService
  readonly #scanner: MetadataScanner
  readonly #host: HttpAdapterHost
  /** Per class, per handler: its limit, or null when it is not limited. */
  readonly #routes = new Map<object, Map<object, RouteLimit | null>>()
  /** Limiters built here, by prefix: routes given one explicit prefix share one. */
  readonly #limiters = new Map<string, { limiter: Limiter<PlatformRequest>; rules: Parsed['rules'] }>()
  /** Class names more than one class of the app bears, so their labels say where each is routed. */
  readonly #sharedNames = new Set<string>()
  /** The class each label was made for: a label two classes would share is refused. */
  readonly #labels = new Map<string, object>()
  #ownStore: MemoryStore | undefined
  #store: Store | undefined
  #platform: Platform = platformOf(undefined)
  /** Registered as a global guard: every route is limited unless it skips. */
  readonly global: boolean
  readonly getRequestResponse: ((context: ExecutionContext) => RequestResponse | undefined) | undefined

  constructor(
    @Inject(SLUICE_OPTIONS) options: Parsed,
    @Inject(DiscoveryService) discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
    @Inject(HttpAdapterHost) host: HttpAdapterHost,
  ) {
    this.#module = options
    this.#discovery = discovery
    this.#scanner = scanner
    this.#host = host
    this.global = options.own.global !== false
    this.getRequestResponse = options.own.getRequestResponse as SluiceLimits['getRequestResponse']
  }

  /** The platform the app runs on, as the guard reads and answers through it. */
  get platform(): Platform {
    return this.#platform
  }

  /**
   * Builds every route's limit. Throws `InvalidOptionError` (failing the app's start) when a limited
   * route has neither rules nor a limiter from its method, class or module, or an option cannot be built.
   */
  onModuleInit(): void {
    this.#platform = platformOf(this.#host.httpAdapter?.getType())
    const module = this.#module
    this.#ownStore =
      module.store === undefined && module.limiter === undefined ? new MemoryStore() : undefined
    this.#store = module.store ?? module.limiter?.store ?? this.#ownStore
    const controllers = this.#discovery.getControllers()
    const providers = this.#discovery.getProviders()
    const byName = new Map<string, object>()
    for (const { instance } of [...controllers, ...providers]) {
      if (instance === null || typeof instance !== 'object') continue
      const type = instance.constructor
      const name = nameOf(type)
      const seen = byName.get(name)
      if (seen === undefined) byName.set(name, type)
      else if (seen !== type) this.#sharedNames.add(name)
    }
    for (const wrapper of controllers) this.#scan(wrapper.instance, true)
    for (const wrapper of providers) this.#scan(wrapper.instance, false)
  }

  onModuleDestroy(): void {
    for (const { limiter } of this.#limiters.values()) limiter.close()
    this.#limiters.clear()
    this.#ownStore?.close()
  }

  /**
   * The limit of `handler` in `type`, null when it is not limited. A handler no scan saw (a resolver of
   * a context other than HTTP, without `@RateLimit`) is limited by the module's options, built the first
   * time it is seen; it passes when the module has no rules.
   */
  limitOf(type: object, handler: object): RouteLimit | null {
    const known = this.#routes.get(type)?.get(handler)
    if (known !== undefined) return known
    const limit =
      this.#module.rules === undefined && this.#module.limiter === undefined
        ? null
        : this.#route(type, handler)
    this.#remember(type, handler, limit)
    return limit
  }

  #scan(instance: unknown, controller: boolean): void {
    if (instance === null || typeof instance !== 'object') return
    const type = instance.constructor
    const asked = metadataOf(type) !== undefined
    const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>
    for (const name of this.#scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name]
      if (typeof handler !== 'function') continue
      const route = controller && Reflect.getMetadata(PATH_METADATA, handler) !== undefined
      // A route is built when sluice guards it or a decorator speaks of it; any other method (a
      // GraphQL resolver's) only when a decorator does.
      const wanted =
        asked || metadataOf(handler) !== undefined || (route && (this.global || guarded(type, handler)))
      if (wanted) this.#remember(type, handler, this.#route(type, handler))
    }
  }

  #remember(type: object, handler: object, limit: RouteLimit | null): void {
    let handlers = this.#routes.get(type)
    if (handlers === undefined) {
      handlers = new Map()
      this.#routes.set(type, handlers)
    }
    handlers.set(handler, limit)
  }

  /** The limit of one handler: the module's options, the class's and the method's, merged; null when skipped. */
  #route(type: object, handler: object): RouteLimit | null {
    const method = metadataOf(handler)
    const cls = metadataOf(type)
    if (method === false || (method === undefined && cls === false)) return null
    let options = this.#module
    if (cls !== undefined && cls !== false) options = mergeHttpOptions(options, cls)
    if (method !== undefined) options = mergeHttpOptions(options, method)
    const onLimited = options.own.onLimited as OnLimited | undefined
    if (options.limiter !== undefined) return { limit: buildRequestLimit(options, this.#platform), onLimited }
    const label = `${this.#classLabel(type)}.${nameOf(handler)}`
    if (options.rules === undefined) {
      throw new InvalidOptionError(
        `${options.where}.rules`,
        undefined,
        `rules or a limiter for ${label} (from @RateLimit on it or its class, or from SluiceModule.forRoot)`,
      )
    }
    // A prefix the route or its class gives is the count's name, shared by whoever gives it too.
    const own =
      (method === undefined ? undefined : method.prefix) ??
      (cls === undefined || cls === false ? undefined : cls.prefix)
    if (own === undefined) this.#claim(label, type)
    const prefix = own ?? labelledPrefix(this.#module.prefix ?? 'sluice', label)
    const limiter = this.#limiter(options, prefix)
    const unbuilt = {
      rules: undefined,
      store: undefined,
      prefix: undefined,
      onStoreError: undefined,
      block: undefined,
    }
    return { limit: buildRequestLimit({ ...options, ...unbuilt, limiter }, this.#platform), onLimited }
  }

  /**
   * A class's part of its routes' labels: its name, and where it is routed (path, version, host) when
   * another class of the app bears that name too.
   */
  #classLabel(type: object): string {
    const name = nameOf(type)
    if (!this.#sharedNames.has(name)) return name
    const path = listOf(Reflect.getMetadata(PATH_METADATA, type)).join(',')
    const version = listOf(Reflect.getMetadata(VERSION_METADATA, type)).join(',')
    const host = listOf(Reflect.getMetadata(HOST_METADATA, type)).join(',')
    return `${name}@${path}${version === '' ? '' : `;v${version}`}${host === '' ? '' : `;${host}`}`
  }

  /** Takes `label` for `type`'s routes; a label another class already took would share its counts. */
  #claim(label: string, type: object): void {
    const owner = this.#labels.get(label)
    if (owner !== undefined && owner !== type) {
      throw new SluiceError(
        ErrorCode.PREFIX_COLLISION,
        `Two classes named ${nameOf(type)}, routed alike, would share the count of ${label}: rename one, ` +
          'or give each its own prefix with @RateLimit({ prefix }) on the class.',
      )
    }
    this.#labels.set(label, type)
  }

  /** The limiter of `prefix`: made once, shared by every route given that prefix (with the same rules). */
  #limiter(options: Parsed, prefix: string): Limiter<PlatformRequest> {
    const rules = options.rules!
    const known = this.#limiters.get(prefix)
    if (known !== undefined) {
      if (!sameRules(known.rules, rules)) {
        throw new InvalidOptionError(
          `${options.where}.prefix`,
          prefix,
          'a prefix no route with other rules uses',
        )
      }
      return known.limiter
    }
    const limiter = createLimiter<PlatformRequest>({
      rules,
      store: options.store ?? this.#store,
      prefix,
      onStoreError: options.onStoreError,
      block: options.block,
    })
    this.#limiters.set(prefix, { limiter, rules })
    return limiter
  }
}

function sameRules(a: Parsed['rules'], b: Parsed['rules']): boolean {
  if (a === b) return true
  if (typeof a === 'function' || typeof b === 'function') return false
  return JSON.stringify(a) === JSON.stringify(b)
}

/** Whether `@UseGuards(SluiceGuard)` is on the handler or its class (by the guard's class name, so two copies of sluice agree). */
function guarded(type: object, handler: object): boolean {
  for (const target of [handler, type]) {
    const guards = Reflect.getMetadata(GUARDS_METADATA, target) as unknown[] | undefined
    if (
      guards?.some(
        (guard) =>
          (typeof guard === 'function' ? guard : (guard as object)?.constructor)?.name === 'SluiceGuard',
      )
    ) {
      return true
    }
  }
  return false
}

/** Metadata that may be one value or a list of them, as a list of texts (none when absent). */
function listOf(value: unknown): string[] {
  if (value === undefined || value === null) return []
  return (Array.isArray(value) ? value : [value]).map((item) => String(item))
}

function nameOf(target: object): string {
  return String((target as { name?: unknown }).name ?? '')
}
