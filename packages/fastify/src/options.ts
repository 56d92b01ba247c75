/**
 * @module The public options of the plugin, of a route's `config.rateLimit` and of `fastify.rateLimit()`.
 * Everything a limit decides is core's (`HttpLimitOptions`); this file adds the Fastify-only options and
 * their checks, which core's parser runs with its own.
 */
import type { Decision } from '@sluice/core'
import { booleanOption, functionOption, type HttpLimitOptions, type OptionCheck } from '@sluice/core/http'
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
})

/** The Fastify-only options of the plugin, with their checks. */
export const PLUGIN_OWN_OPTIONS: Readonly<Record<string, OptionCheck>> = Object.freeze({
  ...ROUTE_OWN_OPTIONS,
  global: booleanOption,
})
