/**
 * @module What core publishes on `node:diagnostics_channel`, as this package reads it. The message types
 * are core's (`DecisionMessage`, `HttpMessage`, `StoreErrorMessage` from `@sluice/core`). The result of a
 * decision (`allowed | queued | denied`) is worked out in one place, {@link resultOf}, so every sink agrees.
 */
import type { Decision, DecisionMessage, HttpMessage } from '@sluice/core'

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
 * Whether this decision has a store time worth recording: an asynchronous store (Redis) answered or failed,
 * which always takes some time. A synchronous store (the memory store, `storeMs` 0) and decisions that never
 * reached a store (the denied-key cache, prefetched units, an unlimited key) would only pile up at zero.
 */
export function storeWasAsked(message: DecisionMessage): boolean {
  return message.storeMs > 0
}

/** The `code` of a store error, or `'unknown'` when it has none. */
export function errorCodeOf(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const code = (error as { code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
  }
  return 'unknown'
}

/** Which way a settle moved a rule's count: units given back (true cost below the reservation) or charged. */
export type SettleChange = 'given_back' | 'charged'

/**
 * Calls `each` for every rule a settle (`action: 'settle'`) changed, with the units it gave back or charged:
 * the difference between what the request reserved and its true cost. Rules it left alone are not named.
 */
export function settledUnits(
  message: HttpMessage,
  each: (rule: string, change: SettleChange, units: number) => void,
): void {
  const { reserved, cost } = message
  if (message.action !== 'settle' || reserved === undefined || cost === undefined) return
  for (const rule of Object.keys(reserved)) {
    const held = reserved[rule]!
    const used = cost[rule] ?? held
    if (used < held) each(rule, 'given_back', held - used)
    else if (used > held) each(rule, 'charged', used - held)
  }
}

/**
 * Whether an `overload` guard shed this request (`action: 'deny'`, or `'shadow'` under a shadowed limit).
 * A shed request asks no rule, so no `sluice:decision` is published for it: the sinks count its decision
 * from `sluice:http` instead (result `denied`, reason `overload`), as a shadowed denial is counted denied.
 */
export function wasShed(message: HttpMessage): boolean {
  return message.decision?.reason === 'overload'
}
