/**
 * The `rateLimit` middleware for Hono, on Node, Bun, Deno and the other runtimes Hono runs on. Built on
 * `@sluice/fetch`. Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/hono
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export { type HonoRateLimitOptions, type RateLimitMiddleware, rateLimit } from './middleware.ts'
