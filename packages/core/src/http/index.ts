/**
 * The framework-agnostic HTTP kit, for authors of sluice adapters (Express and Fastify are built on it; a
 * third, for node:http or Hono, is about a hundred lines): parse the shared options, build a request
 * limit, decide a request into an outcome, keep the per-request record, write headers, hold queued
 * requests, and run the response-end phase. Users of the library import from `@sluice/core` instead.
 *
 * @module @sluice/core/http
 */

export { describe as describeValue } from '../errors.ts'
export { booleanOption, functionOption, isPromise } from '../options.ts'
export {
  type HttpAdapter,
  type HttpAdapterBase,
  headerValues,
  type NodeRequest,
  type NodeResponse,
  type RequestView,
  whenResponseEnds,
} from './adapter.ts'
export {
  DEFAULT_HEADER_DRAFT,
  HEADER_DRAFTS,
  type HeaderDraft,
  type HeaderOptions,
  NO_HEADERS,
  type ResolvedHeaderOptions,
  rateLimitHeaders,
  resolveHeaderOptions,
  retryAfterSeconds,
  stackedHeaders,
} from './headers.ts'
export { holdResponse } from './hold.ts'
export {
  compileKey,
  type KeyOptions,
  type KeyPart,
  type KeyResult,
  type KeySpec,
  type MissingKeyPolicy,
} from './keys/keys.ts'
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
  HTTP_OPTION_NAMES,
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
export { type CountedLimit, type EndCallback, RequestRecord } from './record.ts'
