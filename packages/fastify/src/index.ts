/**
 * The sluice plugin for Fastify 5, `sluice` (its former names `fastifySluice` and the default export
 * are kept one release, warning once). Re-exports only.
 * Rules, stores and `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/fastify
 */
import { defaultExport } from './deprecated.ts'

export type { Decision } from '@sluice/core'
export type { RateLimitHook } from './augmentation.ts'
export { fastifySluice } from './deprecated.ts'
export type {
  OnLimited,
  OnLimitedResult,
  RateLimitHookName,
  RouteRateLimitOptions,
  SluicePluginOptions,
} from './options.ts'
export { sluice } from './register.ts'
export { RateLimitRejection } from './rejection.ts'
/** @deprecated Use the named export `sluice`. Removed next release. */
export default defaultExport
