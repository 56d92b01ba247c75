/**
 * @module The public options of the plugin, of a route's `config.rateLimit` and of `fastify.rateLimit()`,
 * and the checks that run on them once, at registration. Everything a limit decides is core's
 * (`HttpLimitOptions`); this file adds the Fastify-only options and rejects names nobody knows.
 */
import {
  type Decision,
  HTTP_OPTION_NAMES,
  type HttpLimitOptions,
  InvalidOptionError,
  knownOptions,
} from '@sluice/core'
import type { FastifyReply, FastifyRequest } from 'fastify'

/**
 * Answers a denied request instead of sluice. Called with the status (`statusCode`, default 429) and the
 * rate-limit headers already set on `reply`. To answer yourself, `reply.send(...)` and return `reply`
 * (Fastify's idiom for hooks). Return nothing to let sluice deny as usual after you have looked (logging,
 * metrics). A throw or a rejection goes to Fastify's error handler.
 */
export type OnLimited = (
  request: FastifyRequest,
  reply: FastifyReply,
  decision: Decision,
) => OnLimitedResult | Promise<OnLimitedResult>

/** The reply when `onLimited` answered, nothing when sluice should deny as usual. */
// biome-ignore lint/suspicious/noConfusingVoidType: `void` lets a callback that only logs return nothing.
export type OnLimitedResult = void | FastifyReply

/**
 * Options of one limit: everything core's HTTP kit knows (`rules`, `store`, `prefix`, `onStoreError`,
 * `limiter`, `key`, `onMissingKey`, `ipv6Subnet`, `cost`, `skip`, `headers`, `message`, `statusCode`)
 * plus `onLimited`. A route's `config.rateLimit` and `fastify.rateLimit(options)` take these, merged over
 * the plugin's options.
 */
export interface RouteRateLimitOptions extends HttpLimitOptions<FastifyRequest> {
  /** Answers denied requests yourself; see `OnLimited`. Default: sluice's 429 through the error path. */
  onLimited?: OnLimited
}

/** Options of `app.register(sluice, options)`. */
export interface SluicePluginOptions extends RouteRateLimitOptions {
  /**
   * Limit every route registered after the plugin (in its scope and below), except those with
   * `config: { rateLimit: false }`. With `false`, only routes that ask are limited: a
   * `config.rateLimit` object, or an `onRequest: fastify.rateLimit(...)` hook. Default true.
   */
  global?: boolean
}

/** The names `config.rateLimit` and `fastify.rateLimit()` accept. */
export const ROUTE_OPTION_NAMES: readonly string[] = Object.freeze([...HTTP_OPTION_NAMES, 'onLimited'])

/** The names the plugin accepts. */
export const PLUGIN_OPTION_NAMES: readonly string[] = Object.freeze([...ROUTE_OPTION_NAMES, 'global'])

/**
 * Checks an options object's shape and names, and returns it without `undefined` values (an explicit
 * `undefined` never wipes what the plugin set). `where` names it in errors: `sluice`,
 * `config.rateLimit` or `rateLimit`.
 */
export function checkedOptions<T extends object>(
  where: string,
  options: unknown,
  known: readonly string[],
): Partial<T> {
  if (options === undefined) return {}
  const out = knownOptions<Record<string, unknown>>(where, options, known)
  if (out.onLimited !== undefined && typeof out.onLimited !== 'function') {
    throw new InvalidOptionError(`${where}.onLimited`, out.onLimited, 'a function')
  }
  if (out.global !== undefined && typeof out.global !== 'boolean') {
    throw new InvalidOptionError(`${where}.global`, out.global, 'true or false')
  }
  return out as Partial<T>
}
