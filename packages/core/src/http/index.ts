/**
 * The framework-agnostic HTTP kit, for authors of sluice adapters (Express, Fastify, Koa, node:http, Fetch,
 * Hono and NestJS are built on it): parse the shared options, build a request limit, decide a request into
 * an outcome, keep the per-request record, write headers and the outcome to a Node response, hold queued
 * requests, and run the response-end phase. What no adapter imports is not exported here, but for what a
 * server that answers a limiter's decisions itself writes with (sluice's headers and 429 body:
 * `rateLimitHeaders`, `resolveHeaderOptions`, `limitedBody`, `JSON_TYPE`, `PROBLEM_JSON`; such a server is an
 * adapter of its own, as examples/payment-gateway is). An adapter checks its own options with
 * `@sluice/core/options`. Users of the library import from `@sluice/core` instead.
 *
 * @module @sluice/core/http
 */

export {
  type HttpAdapter,
  type HttpAdapterBase,
  headerValues,
  type NodeRequest,
  type NodeResponse,
  type RequestView,
} from './adapter.ts'
export {
  type HeaderDraft,
  type HeaderOptions,
  type ResolvedHeaderOptions,
  rateLimitHeaders,
  resolveHeaderOptions,
} from './headers.ts'
export type { KeyOptions, KeyPart, KeyResult, KeySpec, MissingKeyPolicy } from './keys/keys.ts'
export {
  type BuildOptions,
  buildRequestLimit,
  type HttpOutcome,
  JSON_TYPE,
  limitedBody,
  limitedDetail,
  PROBLEM_JSON,
  type RequestLimit,
} from './limit.ts'
export {
  type HttpLimitOptions,
  LIMITER_OPTION_NAMES,
  mergeHttpOptions,
  type OptionCheck,
  type ParsedHttpOptions,
  parseHttpOptions,
  REQUEST_OPTION_NAMES,
  type ResponseBody,
} from './options.ts'
export { labelledPrefix } from './prefix.ts'
export { type CountedLimit, type EndCallback, type RequestRateLimit, RequestRecord } from './record.ts'
export { type Next, type OnDenied, respondOnNode, type WritableResponse } from './respond.ts'
