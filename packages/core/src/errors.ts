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
  /** `settle` was given a decision it cannot settle: denied, not from `consume`, or settled already. */
  INVALID_SETTLE: 'ERR_SLUICE_INVALID_SETTLE',
  /** A rule function returned something that is not a list of rules or null. */
  INVALID_RULES: 'ERR_SLUICE_INVALID_RULES',
  /** A key was not a non-empty string, or a key builder could not build one. */
  INVALID_KEY: 'ERR_SLUICE_INVALID_KEY',
  /** `acquire` was denied; the error carries the decision. */
  RATE_LIMITED: 'ERR_SLUICE_RATE_LIMITED',
  /** An `overload()` guard shed the request: the server itself is overloaded. */
  OVERLOADED: 'ERR_SLUICE_OVERLOADED',
  /** The store failed or timed out and the limiter's `onStoreError` is `'throw'`. */
  STORE_ERROR: 'ERR_SLUICE_STORE',
  /** The store took longer than its timeout. */
  STORE_TIMEOUT: 'ERR_SLUICE_STORE_TIMEOUT',
  /** Two limiters on one store would share counts (same prefix). */
  PREFIX_COLLISION: 'ERR_SLUICE_PREFIX_COLLISION',
  /** The store cannot do what was asked (a store without `adjust` asked to refund or penalize). */
  UNSUPPORTED: 'ERR_SLUICE_UNSUPPORTED',
  /** Two rules of one call share a state identity (kind, shape and name): give them different names. */
  DUPLICATE_RULE: 'ERR_SLUICE_DUPLICATE_RULE',
  /** A rule spec is not `{ kind, ...options }` with a known kind, or a spec's text does not parse. */
  INVALID_SPEC: 'ERR_SLUICE_INVALID_SPEC',
  /** A limit table entry name is empty, too long, or holds control characters. */
  INVALID_ENTRY: 'ERR_SLUICE_INVALID_ENTRY',
  /** A limit table change would pass a bound: rules per entry, entries per table, or an entry's size. */
  TABLE_TOO_LARGE: 'ERR_SLUICE_TABLE_TOO_LARGE',
  /** A closed limit table was asked to change. */
  TABLE_CLOSED: 'ERR_SLUICE_TABLE_CLOSED',
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

/**
 * Two rules of one call that would share their state: same kind, same shape (`windowMs`, `buckets`) and
 * the same name or none. A limit is not part of a rule's state identity (so an edit keeps the counts),
 * so two rules that differ only in their limits must be told apart by their names.
 */
export class DuplicateRuleError extends SluiceError {
  /** Where the rules came from, e.g. `"createLimiter.rules"` or `"the rules function"`. */
  readonly where: string
  /** The state identity both rules have, e.g. `"fixedWindow:60000"`. */
  readonly identity: string
  /** The names of the two rules. */
  readonly rules: readonly [string, string]
  constructor(where: string, identity: string, first: string, second: string) {
    super(
      ErrorCode.DUPLICATE_RULE,
      `Rules ${describe(first)} and ${describe(second)} of ${where} would share their state ` +
        `(${identity}): give them different names.`,
    )
    this.where = where
    this.identity = identity
    this.rules = [first, second]
  }
}

/** A rule spec that names no known kind or is not an object; or a spec's text that does not parse. */
export class InvalidSpecError extends SluiceError {
  readonly spec: unknown
  /** What was expected instead, e.g. `slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s`. */
  readonly expected: string
  constructor(spec: unknown, expected: string) {
    super(ErrorCode.INVALID_SPEC, `Invalid rule spec ${describe(spec)}: expected ${expected}.`)
    this.spec = spec
    this.expected = expected
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
