/**
 * @module Error classes with stable `code`s. Users branch on `code`, never on message text.
 */
import type { Decision } from './types.ts'

/** Every sluice error code. Stable across releases. */
export const ErrorCode = {
  /** An option has the wrong type or value; `option` and `value` name it. */
  INVALID_OPTION: 'ERR_SLUICE_INVALID_OPTION',
  /** A call's `cost` is not a positive integer, or no rule could ever admit it. */
  INVALID_COST: 'ERR_SLUICE_INVALID_COST',
  /** A rule function returned something that is not a list of rules or null. */
  INVALID_RULES: 'ERR_SLUICE_INVALID_RULES',
  /** A key was not a non-empty string, or a key builder could not build one. */
  INVALID_KEY: 'ERR_SLUICE_INVALID_KEY',
  /** `acquire` was denied; the error carries the decision. */
  RATE_LIMITED: 'ERR_SLUICE_RATE_LIMITED',
  /** The store failed or timed out and the limiter's `onStoreError` is `'throw'`. */
  STORE_ERROR: 'ERR_SLUICE_STORE',
  /** The store took longer than its timeout. */
  STORE_TIMEOUT: 'ERR_SLUICE_STORE_TIMEOUT',
  /** Two limiters on one store would share counts (same prefix). */
  PREFIX_COLLISION: 'ERR_SLUICE_PREFIX_COLLISION',
  /** The store cannot do what was asked (a store without `adjust` asked to refund or penalize). */
  UNSUPPORTED: 'ERR_SLUICE_UNSUPPORTED',
} as const

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]

/** The base class of every error sluice throws. */
export class SluiceError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** An invalid option, thrown at construction. */
export class InvalidOptionError extends SluiceError {
  /** The option's path, e.g. `"slidingWindow.buckets"`. */
  readonly option: string
  readonly value: unknown
  /** What the option accepts, in words. */
  readonly expected: string
  constructor(option: string, value: unknown, expected: string) {
    super(ErrorCode.INVALID_OPTION, `Invalid option ${option}: ${describe(value)}; expected ${expected}.`)
    this.option = option
    this.value = value
    this.expected = expected
  }
}

/** A cost that is not a positive integer, or that a rule can never admit. */
export class InvalidCostError extends SluiceError {
  readonly cost: unknown
  constructor(cost: unknown, reason: string) {
    super(ErrorCode.INVALID_COST, `Invalid cost ${describe(cost)}: ${reason}.`)
    this.cost = cost
  }
}

/** Thrown by `acquire` when the call is denied. */
export class RateLimitedError extends SluiceError {
  readonly decision: Decision
  constructor(decision: Decision) {
    super(
      ErrorCode.RATE_LIMITED,
      `Rate limited by ${decision.rule}; retry after ${decision.retryAfterMs} ms.`,
    )
    this.decision = decision
  }
}

/** A store failure surfaced because `onStoreError` is `'throw'`, or a store timeout. */
export class StoreError extends SluiceError {}

/** Renders a value for an error message without throwing and without flooding the message. */
export function describe(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 64 ? `${value.slice(0, 64)}…` : value
    return JSON.stringify(shown)
  }
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'function') return 'a function'
  if (value === null || typeof value !== 'object') return String(value)
  if (Array.isArray(value)) return `an array of ${value.length}`
  return 'an object'
}
