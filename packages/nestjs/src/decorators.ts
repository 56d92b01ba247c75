/**
 * @module `@RateLimit` and `@SkipRateLimit`: options parsed where they are written (an invalid one throws
 * as the class is defined, naming `RateLimit.<option>`), kept as metadata on the class or the method, and
 * merged over the module's when the app initializes (route-limits.ts).
 */

import { SetMetadata } from '@nestjs/common'
import { type ParsedHttpOptions, parseHttpOptions } from '@sluice/core/http'
import {
  type PlatformRequest,
  type PlatformResponse,
  type RateLimitOptions,
  ROUTE_OWN_OPTIONS,
} from './options.ts'

/** The metadata key of `@RateLimit`: parsed options, or `false` for a skipped class or method. */
export const RATE_LIMIT_METADATA = 'sluice:rateLimit'

/** What `@RateLimit` keeps: parsed options, or false (not limited). */
export type RateLimitMetadata = ParsedHttpOptions<PlatformRequest, PlatformResponse> | false

/**
 * Limits a controller (every route in it) or one route handler, with options merged over those of the
 * class and the module: method over class over module, each option given replacing the inherited one
 * (`rules` given replace the inherited rules). `@RateLimit(false)` is `@SkipRateLimit()`. Throws
 * `InvalidOptionError` at once for an invalid or unknown option.
 *
 * @example
 * ```ts
 * @Post() @RateLimit({ rules: [slidingLog({ limit: 10, windowMs: 60_000 })] }) pay() {}
 * ```
 */
export function RateLimit(options: RateLimitOptions | false): ClassDecorator & MethodDecorator {
  const metadata: RateLimitMetadata =
    options === false ? false : parseHttpOptions('RateLimit', options, ROUTE_OWN_OPTIONS)
  return SetMetadata(RATE_LIMIT_METADATA, metadata)
}

/** The controller or route is not limited: it counts nothing and sends no rate-limit headers. */
export function SkipRateLimit(): ClassDecorator & MethodDecorator {
  return SetMetadata(RATE_LIMIT_METADATA, false)
}
