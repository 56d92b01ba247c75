/**
 * @module The limits of one plugin registration: the plugin's own, and those of routes and
 * `fastify.rateLimit()` calls, each built from its options merged over the plugin's.
 *
 * Limiters and prefixes. A route that only changes how requests are counted (`key`, `cost`, `skip`,
 * `headers`, `message`, ...) shares the plugin's limiter, so a key has one counter across such routes, as
 * with an `app.use` middleware; a `'route'` part in the key separates routes. A route (or
 * `fastify.rateLimit` call) that sets `rules`, `store`, `prefix` or `onStoreError` gets a limiter of its
 * own, on the plugin's store unless it names one, under a prefix of its own: `<plugin prefix>:<METHOD> <url>`
 * for a route, `<plugin prefix>:rateLimit#<n>` for the n-th such `fastify.rateLimit` call, unless it sets
 * `prefix`.
 *
 * Counting once. Per registration, a request is counted by one limit only: the first of the
 * registration's hooks to reach it (hooks of an encapsulated context run before route hooks; a route's
 * own `onRequest: fastify.rateLimit()` runs before the route-config or global hook, which are appended).
 * Every limit of a registration counts under one owner token; registrations given the same `limiter`
 * share it, so one limiter counts a request once.
 */
import { InvalidOptionError, type Limiter, MemoryStore, type Store } from '@sluice/core'
import {
  buildRequestLimit,
  type HttpAdapter,
  LIMITER_OPTION_NAMES,
  labelledPrefix,
  mergeHttpOptions,
  type ParsedHttpOptions,
  parseHttpOptions,
  REQUEST_OPTION_NAMES,
  type RequestLimit,
} from '@sluice/core/http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { adapter } from './hook.ts'
import { type OnLimited, ROUTE_OWN_OPTIONS } from './options.ts'

type Request = FastifyRequest
type Limit = RequestLimit<Request, FastifyReply>

/** One limit and the `onLimited` that answers its denials. */
export interface BuiltLimit {
  readonly limit: Limit
  readonly onLimited: OnLimited | undefined
}

/** One owner token per limiter given as `limiter` to several registrations, so it counts a request once. */
const limiterOwners = new WeakMap<object, object>()

export class RouteLimits {
  readonly #plugin: ParsedHttpOptions<Request>
  /** The store limits of this registration share: the plugin's, its limiter's, or one made here. */
  readonly #ownStore: MemoryStore | undefined
  readonly #store: Store | undefined
  readonly #basePrefix: string
  readonly #owner: object
  /** Limiters this registration built: closing the app gives up their prefixes for a new registration. */
  readonly #built: Limiter<Request>[] = []
  readonly #prefixes = new Set<string>()
  readonly #pluginLimit: Limit | undefined

  constructor(plugin: ParsedHttpOptions<Request>) {
    this.#plugin = plugin
    this.#ownStore =
      plugin.store === undefined && plugin.limiter === undefined ? new MemoryStore() : undefined
    this.#store = plugin.store ?? plugin.limiter?.store ?? this.#ownStore
    this.#basePrefix = plugin.prefix ?? plugin.limiter?.prefix ?? 'sluice'
    this.#owner = plugin.limiter === undefined ? {} : ownerOf(plugin.limiter)
    if (plugin.rules !== undefined || plugin.limiter !== undefined) {
      const options = this.#ownStore === undefined ? plugin : { ...plugin, store: this.#ownStore }
      this.#pluginLimit = this.#build(options, adapter, plugin.limiter === undefined)
    }
  }

  /** The plugin's own limit, when it has rules or a limiter. */
  get plugin(): BuiltLimit | undefined {
    if (this.#pluginLimit === undefined) return undefined
    return { limit: this.#pluginLimit, onLimited: this.#plugin.own.onLimited as OnLimited | undefined }
  }

  /**
   * The limit of options given where `where` says (`config.rateLimit`, `rateLimit`), merged over the
   * plugin's. `label` names its prefix if it needs a limiter of its own.
   */
  limitFor(
    where: string,
    options: unknown,
    label: () => string,
    requestAdapter: HttpAdapter<Request, FastifyReply>,
  ): BuiltLimit {
    const own = parseHttpOptions<Request>(where, options ?? {}, ROUTE_OWN_OPTIONS)
    const merged = mergeHttpOptions(this.#plugin, own)
    const onLimited = merged.own.onLimited as OnLimited | undefined
    if (own.limiter !== undefined) return { limit: this.#build(merged, requestAdapter, false), onLimited }
    if (LIMITER_OPTION_NAMES.some((name) => own[name] !== undefined)) {
      const limiterOptions = {
        ...merged,
        store: merged.store ?? this.#store,
        prefix: own.prefix ?? this.#prefixFor(label()),
      }
      return { limit: this.#build(limiterOptions, requestAdapter, true), onLimited }
    }
    const pluginLimit = this.#pluginLimit
    if (pluginLimit === undefined) {
      throw new InvalidOptionError(`${where}.rules`, undefined, 'rules or a limiter (the plugin has none)')
    }
    if (!REQUEST_OPTION_NAMES.some((name) => own[name] !== undefined)) {
      return { limit: pluginLimit, onLimited }
    }
    return {
      limit: this.#build({ ...merged, limiter: pluginLimit.limiter }, requestAdapter, false),
      onLimited,
    }
  }

  /** Gives up the prefixes of the limiters built here, and closes the registration's own store. */
  close(): void {
    for (const limiter of this.#built) limiter.close()
    this.#ownStore?.close()
  }

  #build(
    options: ParsedHttpOptions<Request>,
    requestAdapter: HttpAdapter<Request, FastifyReply>,
    owns: boolean,
  ): Limit {
    const limit = buildRequestLimit(options, requestAdapter, { owner: this.#owner })
    if (owns) this.#built.push(limit.limiter)
    return limit
  }

  #prefixFor(label: string): string {
    // Routes with one method and URL but different constraints (host, version) get `#2`, `#3`, ...
    let prefix = labelledPrefix(this.#basePrefix, label)
    for (let n = 2; this.#prefixes.has(prefix); n++)
      prefix = labelledPrefix(this.#basePrefix, `${label}#${n}`)
    this.#prefixes.add(prefix)
    return prefix
  }
}

function ownerOf(limiter: object): object {
  let owner = limiterOwners.get(limiter)
  if (owner === undefined) {
    owner = {}
    limiterOwners.set(limiter, owner)
  }
  return owner
}
