/**
 * sluice for plain node:http servers (`withRateLimit`) and for Connect, Polka and Next.js custom servers
 * (the connect-style `rateLimit`). Re-exports only. Rules, stores and `createLimiter` are imported from
 * `@sluice/core`.
 *
 * @module @sluice/node
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export {
  type NextFunction,
  type NodeRateLimitOptions,
  type RateLimitedListener,
  type RateLimitMiddleware,
  rateLimit,
  withRateLimit,
} from './middleware.ts'
