/**
 * The `rateLimit` middleware for Express 4 and 5. Re-exports only.
 * Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/express
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export { type ExpressRateLimitOptions, type RateLimitMiddleware, rateLimit } from './middleware.ts'
