/**
 * The sluice plugin for Fastify 5, `sluice`. Re-exports only.
 * Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/fastify
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export type { RateLimitHook } from './augmentation.ts'
export type {
  OnLimited,
  OnLimitedResult,
  RateLimitHookName,
  RouteRateLimitOptions,
  SluicePluginOptions,
} from './options.ts'
export { sluice } from './register.ts'
export { RateLimitRejection } from './rejection.ts'
