/**
 * @module The public options of `SluiceModule.forRoot`, `forRootAsync` and `@RateLimit`, and the tokens
 * Nest's injector knows them by. Everything a limit decides is core's (`HttpLimitOptions`); this file adds
 * the Nest-only options and their checks, which core's parser runs with its own.
 */

import type { ExecutionContext } from '@nestjs/common'
import type { Decision } from '@sluice/core'
import type { HttpLimitOptions, OptionCheck } from '@sluice/core/http'
import { booleanOption, functionOption } from '@sluice/core/options'

/**
 * The platform's request, as the guard is given it: Express's `Request` on `@nestjs/platform-express`,
 * Fastify's `FastifyRequest` on `@nestjs/platform-fastify`. Cast it to your platform's type in a `key`,
 * `cost` or `skip` function when you read more than its headers.
 */
// biome-ignore lint/suspicious/noExplicitAny: the request's type depends on the platform the app runs on.
export type PlatformRequest = any

/** The platform's response: Express's `Response`, or Fastify's `FastifyReply` (`statusCode` on both). */
// biome-ignore lint/suspicious/noExplicitAny: the response's type depends on the platform the app runs on.
export type PlatformResponse = any

/**
 * Called for a denied request, with the status (`statusCode`, default 429) and the rate-limit headers
 * already set on the response. It may answer itself (`res.status(...).json(...)` on Express,
 * `reply.send(...)` on Fastify); when it has not answered by the time it returns (or its promise
 * settles), sluice throws its `RateLimitedException` as usual. A throw or a rejection goes to Nest's
 * exception filters.
 */
export type OnLimited = (
  request: PlatformRequest,
  response: PlatformResponse,
  decision: Decision,
) => void | Promise<void>

/**
 * Options of `@RateLimit`: every option core's HTTP kit knows (`rules`, `store`, `prefix`,
 * `onStoreError`, `block`, `limiter`, `key`, `onMissingKey`, `ipv6Subnet`, `cost`, `skip`, `headers`,
 * `message`, `statusCode`, `blockedStatusCode`, `countWhen`, `settle`, `queuePerClient`, `shadow`) plus
 * `onLimited`, merged over the class's and the module's.
 */
export interface RateLimitOptions extends HttpLimitOptions<PlatformRequest, PlatformResponse> {
  /** Answers denied requests yourself; see `OnLimited`. Default: sluice's `RateLimitedException`. */
  onLimited?: OnLimited
}

/** The request and response of a context other than HTTP, as `getRequestResponse` finds them. */
export interface RequestResponse {
  readonly req: PlatformRequest
  readonly res: PlatformResponse
}

/** Options of `SluiceModule.forRoot`, and what `forRootAsync`'s factory returns (less `global`). */
export interface SluiceModuleOptions extends RateLimitOptions {
  /**
   * Register `SluiceGuard` as a global guard (`APP_GUARD`), so every route is limited unless it says
   * `@SkipRateLimit()`. With `false`, only routes and controllers that say `@UseGuards(SluiceGuard)` are.
   * Default true.
   */
  global?: boolean
  /**
   * Finds the HTTP request and response behind a context that is not HTTP (a GraphQL resolver's, a
   * gateway's), or answers undefined to let it pass. Without it such contexts pass untouched. For
   * GraphQL: `(context) => { const { req, res } = GqlExecutionContext.create(context).getContext(); return { req, res } }`.
   */
  getRequestResponse?: (context: ExecutionContext) => RequestResponse | undefined
}

/** What `forRootAsync`'s factory returns: the module's options, less `global`. */
export type SluiceFactoryOptions = Omit<SluiceModuleOptions, 'global'>

// biome-ignore lint/suspicious/noExplicitAny: the factory takes whatever `inject` lists.
type FactoryArgs = any[]

/** Options of `SluiceModule.forRootAsync`: the options come from a factory Nest injects. */
export interface SluiceModuleAsyncOptions {
  /** Modules whose exported providers the factory needs (a `ConfigModule`). */
  // biome-ignore lint/suspicious/noExplicitAny: Nest's own type for `imports` (classes, dynamic modules, promises, forward references).
  imports?: any[]
  /** Providers given to `useFactory`, in order. */
  // biome-ignore lint/suspicious/noExplicitAny: Nest's own type for injection tokens.
  inject?: any[]
  /** Builds the module's options; checked when the app initializes, and a bad one fails its start. */
  useFactory: (...args: FactoryArgs) => SluiceFactoryOptions | Promise<SluiceFactoryOptions>
  /** As `SluiceModuleOptions.global`: known before the factory runs, since it decides which guards exist. Default true. */
  global?: boolean
}

/** The token of the module's parsed options. */
export const SLUICE_OPTIONS = Symbol('sluice.options')

/** The Nest-only options of `@RateLimit`, with their checks. */
export const ROUTE_OWN_OPTIONS: Readonly<Record<string, OptionCheck>> = Object.freeze({
  onLimited: functionOption,
})

/** The Nest-only options of the module, with their checks. */
export const MODULE_OWN_OPTIONS: Readonly<Record<string, OptionCheck>> = Object.freeze({
  ...ROUTE_OWN_OPTIONS,
  global: booleanOption,
  getRequestResponse: functionOption,
})
