/**
 * The `rateLimit` middleware for Koa, for `app.use` and for `@koa/router` routes. Re-exports only.
 * Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/koa
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export { type KoaRateLimitOptions, type RateLimitMiddleware, rateLimit } from './middleware.ts'
