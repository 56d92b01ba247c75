/**
 * The sluice plugin for Fastify 5. Re-exports only.
 * Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/fastify
 */
import { sluice } from './register.ts'

export type { Decision } from '@sluice/core'
export type { RateLimitHook } from './augmentation.ts'
export type {
  OnLimited,
  OnLimitedResult,
  RateLimitHookName,
  RouteRateLimitOptions,
  SluicePluginOptions,
} from './options.ts'
export { RateLimitRejection } from './rejection.ts'
export { sluice, sluice as fastifySluice }
export default sluice
