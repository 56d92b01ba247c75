/**
 * @module Names `@sluice/core/http` offered that no adapter uses, kept one release with a warning once
 * (code `SLUICE_DEP_HTTP_KIT`): the kit exports what an adapter needs and nothing else. Each says what to
 * use instead.
 */
import { deprecatedFunction, deprecatedObject } from '../deprecate.ts'
import { describe } from '../errors.ts'
import { whenResponseEnds as whenResponseEndsNow } from './adapter.ts'
import {
  DEFAULT_HEADER_DRAFT as DEFAULT_DRAFT,
  HEADER_DRAFTS as DRAFTS,
  type HeaderDraft,
  NO_HEADERS as NONE,
  retryAfterSeconds as retryAfter,
  stackedHeaders as stacked,
} from './headers.ts'
import { holdResponse as holdNow } from './hold.ts'
import { compileKey as compile } from './keys/keys.ts'
import { HTTP_OPTION_NAMES as OPTION_NAMES } from './options.ts'

const CODE = 'SLUICE_DEP_HTTP_KIT'

/**
 * The header draft sluice writes unless `headers.draft` says otherwise.
 * @deprecated No adapter needs it: `resolveHeaderOptions(undefined)` resolves the default. Removed next release.
 */
export const DEFAULT_HEADER_DRAFT: HeaderDraft = DEFAULT_DRAFT

/** @deprecated No adapter needs it; the drafts are listed in `HeaderOptions.draft`'s type. Removed next release. */
export const HEADER_DRAFTS = deprecatedObject(
  DRAFTS,
  CODE,
  'HEADER_DRAFTS (@sluice/core/http)',
  "the drafts are the values of HeaderOptions['draft'].",
)

/** @deprecated Use `LIMITER_OPTION_NAMES` and `REQUEST_OPTION_NAMES` (and `'limiter'`). Removed next release. */
export const HTTP_OPTION_NAMES = deprecatedObject(
  OPTION_NAMES,
  CODE,
  'HTTP_OPTION_NAMES (@sluice/core/http)',
  "use LIMITER_OPTION_NAMES, REQUEST_OPTION_NAMES and 'limiter'.",
)

/** @deprecated Use `resolveHeaderOptions(false)`. Removed next release. */
export const NO_HEADERS = deprecatedObject(
  NONE,
  CODE,
  'NO_HEADERS (@sluice/core/http)',
  'use resolveHeaderOptions(false).',
)

/** @deprecated `parseHttpOptions` and `buildRequestLimit` compile the `key` option. Removed next release. */
export const compileKey = deprecatedFunction(
  compile,
  CODE,
  'compileKey (@sluice/core/http)',
  'buildRequestLimit compiles the key option.',
)

/** @deprecated Errors name the value themselves. Removed next release. */
export const describeValue = deprecatedFunction(
  describe,
  CODE,
  'describeValue (@sluice/core/http)',
  "sluice's errors describe the value themselves.",
)

/** @deprecated Use `RequestLimit.hold`, which also gives the slot back. Removed next release. */
export const holdResponse = deprecatedFunction(
  holdNow,
  CODE,
  'holdResponse (@sluice/core/http)',
  'use RequestLimit.hold, which also gives the slot back.',
)

/** @deprecated The outcome's `headers` carry `Retry-After`. Removed next release. */
export const retryAfterSeconds = deprecatedFunction(
  retryAfter,
  CODE,
  'retryAfterSeconds (@sluice/core/http)',
  "the outcome's headers carry Retry-After.",
)

/** @deprecated The request's record renders stacked limits' headers (`RequestRecord.counted`). Removed next release. */
export const stackedHeaders = deprecatedFunction(
  stacked,
  CODE,
  'stackedHeaders (@sluice/core/http)',
  'RequestRecord.counted renders the headers of stacked limits.',
)

/** @deprecated Give the adapter `responseOf` (or `onEnd`); the kit listens. Removed next release. */
export const whenResponseEnds = deprecatedFunction(
  whenResponseEndsNow,
  CODE,
  'whenResponseEnds (@sluice/core/http)',
  "give the HttpAdapter responseOf (or onEnd) and the kit listens for the response's end.",
)
