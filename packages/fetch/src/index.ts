/**
 * sluice for `Request → Response` runtimes: `fetchLimit` for Bun.serve, Deno.serve and Next.js route
 * handlers; `FetchExchange`, `fetchAdapter`, `exchangeLimit`, `withHeaders`, `jsonResponse` and
 * `departedResponse` for adapters of frameworks built on the Fetch API (`@sluice/hono`). Rules, stores and
 * `createLimiter` are imported from `@sluice/core`.
 *
 * @module @sluice/fetch
 */
export type { Decision } from '@sluice/core'
export type { RequestRateLimit } from '@sluice/core/http'
export {
  departedResponse,
  exchangeLimit,
  FetchExchange,
  type FetchSettle,
  fetchAdapter,
  jsonResponse,
  withHeaders,
} from './exchange.ts'
export {
  type FetchHandler,
  type FetchLimit,
  type FetchLimitOptions,
  type FetchRequestInfo,
  fetchLimit,
} from './fetch-limit.ts'
