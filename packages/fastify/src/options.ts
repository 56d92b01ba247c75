/**
 * @module The public options of the plugin, of a route's `config.rateLimit` and of `fastify.rateLimit()`.
 * Everything a limit decides is core's (`HttpLimitOptions`); this file adds the Fastify-only options and
 * their checks, which core's parser runs with its own.
 */
import { type Decision, InvalidOptionError } from '@sluice/core'
import type { HttpLimitOptions, OptionCheck } from '@sluice/core/http'
import { booleanOption, functionOption } from '@sluice/core/options'
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
export interface RouteRateLimitOptions extends HttpLimitOptions<FastifyRequest, FastifyReply> {
  /** Answers denied requests yourself; see `OnLimited`. Default: sluice's 429 through the error path. */
  onLimited?: OnLimited
  /**
   * The route hook the limit runs in: `'onRequest'` (default: before the body is read, the cheapest place
   * to turn a request away) or `'preHandler'` (after `preValidation` and validation, so `key`, `rules`,
   * `cost` and `skip` see what authentication set, such as `request.user`). For the plugin and a route's
   * `config.rateLimit`; `fastify.rateLimit()` returns a hook you place yourself.
   */
  hook?: RateLimitHookName
}

/** The route hooks a limit can run in. */
export type RateLimitHookName = 'onRequest' | 'preHandler'

function hookOption(option: string, value: unknown): RateLimitHookName {
  if (value === 'onRequest' || value === 'preHandler') return value
  throw new InvalidOptionError(option, value, "'onRequest' or 'preHandler'")
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

/** The Fastify-only options of a route's `config.rateLimit` and of `fastify.rateLimit()`, with their checks. */
export const ROUTE_OWN_OPTIONS: Readonly<Record<string, OptionCheck>> = Object.freeze({
  onLimited: functionOption,
  hook: hookOption,
})

/** The Fastify-only options of the plugin, with their checks. */
export const PLUGIN_OWN_OPTIONS: Readonly<Record<string, OptionCheck>> = Object.freeze({
  ...ROUTE_OWN_OPTIONS,
  global: booleanOption,
})
