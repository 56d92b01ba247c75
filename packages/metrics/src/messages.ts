/**
 * @module What core publishes on `node:diagnostics_channel`, as this package reads it.
 *
 * The shapes are declared here structurally, field by field, so the package depends on no core type that
 * carries them. Only the fields the subscribers read are required to be exact; the rest are documented so
 * the messages stay recognisable. The result of a decision (`allowed | queued | denied`) is worked out in
 * one place, {@link resultOf}, so every sink agrees on it.
 */

/** The channel names core publishes on. */
export const CHANNELS = {
  /** Every consume and peek: {@link DecisionMessage}. */
  decision: 'sluice:decision',
  /** Once per limit per HTTP request: {@link HttpMessage}. */
  http: 'sluice:http',
  /** A store failed or timed out, before `onStoreError` decides: {@link StoreErrorMessage}. */
  storeError: 'sluice:store-error',
} as const

/** Who decided: the rules in the store, no rule applied, the denied-key cache, a block, and so on. */
export type DecisionReason =
  | 'rules'
  | 'unlimited'
  | 'cache'
  | 'blocked'
  | 'store-error'
  | 'insurance'
  | 'prefetch'

/** The part of a decision the subscribers read; core's `Decision` has this shape and more. */
export interface DecisionView {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  readonly resetMs: number
  readonly retryAfterMs: number
  /** leakyBucket: how long the caller holds before proceeding; 0 otherwise. */
  readonly waitMs: number
  /** The deciding rule's name. */
  readonly rule: string
  readonly rules: readonly unknown[]
  readonly reason: DecisionReason
}

/** `sluice:decision`: one consume or peek. */
export interface DecisionMessage {
  /** The limiter's prefix. */
  readonly limiter: string
  /** The key the rules counted against. Never recorded as a metric attribute. */
  readonly key: string
  readonly cost: number
  readonly mode: 'consume' | 'peek'
  readonly decision: DecisionView
  /** Time the store took, in ms (fractional); 0 for a synchronous store or when the store was not asked. */
  readonly storeMs: number
}

/** What an HTTP adapter did with a request for one limit. */
export type HttpAction = 'allow' | 'queue' | 'deny' | 'shadow' | 'reject'

/** `sluice:http`: what one limit did to one request. */
export interface HttpMessage {
  readonly limiter: string
  readonly key: string | undefined
  /** The framework's request object. Never read here. */
  readonly request: unknown
  /** Undefined for `'reject'` (no key could be built, so nothing was decided). */
  readonly decision: DecisionView | undefined
  readonly action: HttpAction
  /** The route template (`/users/:id`) when the adapter knows it. */
  readonly route: string | undefined
}

/** `sluice:store-error`: a store call failed or timed out. */
export interface StoreErrorMessage {
  readonly limiter: string
  readonly key: string
  /** Usually a `SluiceError`; its `code` (e.g. `ERR_SLUICE_STORE_TIMEOUT`) is what gets recorded. */
  readonly error: unknown
}

/** A decision's outcome as the metrics name it. */
export type DecisionResult = 'allowed' | 'queued' | 'denied'

/** `allowed && waitMs === 0` → allowed; `allowed && waitMs > 0` → queued (held, then runs); else denied. */
export function resultOf(decision: DecisionView): DecisionResult {
  if (!decision.allowed) return 'denied'
  return decision.waitMs > 0 ? 'queued' : 'allowed'
}

/**
 * Whether the store was asked for this decision, so its `storeMs` is a store latency: the rules in the store
 * decided (`reason: 'rules'`, 0 ms for a synchronous store), or the store took measurable time (a call that
 * failed or timed out before `onStoreError` or an insurance limiter answered). Decisions from the denied-key
 * cache, prefetched units or an unlimited key never reached the store, and would only pile up at zero.
 */
export function storeWasAsked(message: DecisionMessage): boolean {
  return message.storeMs > 0 || message.decision.reason === 'rules'
}

/** The `code` of a store error, or `'unknown'` when it has none. */
export function errorCodeOf(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const code = (error as { code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
  }
  return 'unknown'
}
