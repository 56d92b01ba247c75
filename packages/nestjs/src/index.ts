/**
 * NestJS module, guard and decorators for sluice: `SluiceModule.forRoot(options)` limits every route (a
 * global `SluiceGuard`), `@RateLimit(options)` on a controller or a handler merges its own options over
 * the module's, `@SkipRateLimit()` lets a route through, and a denial throws `RateLimitedException` for
 * the app's exception filters. Runs on `@nestjs/platform-express` and `@nestjs/platform-fastify`. Rules,
 * stores and `createLimiter` come from `@sluice/core`.
 *
 * @module @sluice/nestjs
 */

export type { RequestRateLimit } from '@sluice/core/http'
export { RATE_LIMIT_METADATA, RateLimit, type RateLimitMetadata, SkipRateLimit } from './decorators.ts'
export { RateLimitedException } from './exception.ts'
export { SluiceGuard } from './guard.ts'
export { SluiceModule } from './module.ts'
export {
  type OnLimited,
  type PlatformRequest,
  type PlatformResponse,
  type RateLimitOptions,
  type RequestResponse,
  SLUICE_OPTIONS,
  type SluiceFactoryOptions,
  type SluiceModuleAsyncOptions,
  type SluiceModuleOptions,
} from './options.ts'
export { type RouteLimit, SluiceLimits } from './route-limits.ts'
