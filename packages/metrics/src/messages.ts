/**
 * @module What core publishes on `node:diagnostics_channel`, as this package reads it. The message types
 * are core's (`DecisionMessage`, `HttpMessage`, `StoreErrorMessage` from `@sluice/core`). The result of a
 * decision (`allowed | queued | denied`) is worked out in one place, {@link resultOf}, so every sink agrees.
 */
import type { Decision, DecisionMessage } from '@sluice/core'

/** The channel names core publishes on. */
export const CHANNELS = {
  /** Every consume and peek: {@link DecisionMessage}. */
  decision: 'sluice:decision',
  /** Once per limit per HTTP request: {@link @sluice/core!HttpMessage}. */
  http: 'sluice:http',
  /** A store failed or timed out, before `onStoreError` decides: {@link @sluice/core!StoreErrorMessage}. */
  storeError: 'sluice:store-error',
} as const

/** A decision's outcome as the metrics name it. */
export type DecisionResult = 'allowed' | 'queued' | 'denied'

/** `allowed && waitMs === 0` → allowed; `allowed && waitMs > 0` → queued (held, then runs); else denied. */
export function resultOf(decision: Decision): DecisionResult {
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
