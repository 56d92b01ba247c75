/**
 * @module Decisions as a limiter answers them: one Decision composed from the store's per-rule answers,
 * the fixed decisions of an unlimited key and of `onStoreError`, and the check that a store's answer is
 * what the Store contract says.
 */
import { describe, ErrorCode, SluiceError, StoreError } from '../errors.ts'
import type { Decision, DecisionReason, RuleDecision, StoreAnswer } from '../types.ts'

/** How long a call denied by `onStoreError: 'deny'` is told to wait. */
export const STORE_ERROR_RETRY_MS = 1000

/** The decision for a key no rule limits. */
export const UNLIMITED_DECISION: Decision = Object.freeze({
  allowed: true,
  limit: Number.POSITIVE_INFINITY,
  remaining: Number.POSITIVE_INFINITY,
  resetMs: 0,
  retryAfterMs: 0,
  waitMs: 0,
  rule: 'unlimited',
  rules: Object.freeze([]) as readonly RuleDecision[],
  reason: 'unlimited',
})

/**
 * Whether a store's answer is what the Store contract says: one RuleDecision per rule. A custom store's
 * answer is data to check like any other: a wrong one is a store failure, for `onStoreError` to decide.
 */
export function answers(answer: unknown, n: number): answer is StoreAnswer {
  if (!Array.isArray(answer) || answer.length !== n) return false
  for (let i = 0; i < n; i++) {
    const d: unknown = answer[i]
    if (d === null || typeof d !== 'object') return false
  }
  return true
}

export function malformed(answer: unknown): StoreError {
  return new StoreError(
    ErrorCode.STORE_ERROR,
    `The store answered ${describe(answer)}: expected one decision per rule of the call.`,
  )
}

/**
 * One Decision from the store's per-rule answers. Its `rules` is a list of its own, holding the same rule
 * decisions: what the store said beside them (`reason`, `countedAt`) is read here, and never shows in the
 * list a caller compares or serializes.
 */
export function compose(rules: StoreAnswer): Decision {
  if (rules.length > 1) return composeSeveral(rules)
  return composeOne(rules[0]!, rules.countedAt, rules.reason)
}

/**
 * The Decision of one rule's answer `d`, counted at `countedAt` (undefined: not counted), by `reason`
 * (undefined: the rules): for `compose`, and for a limiter on a memory store, which hands it the rule's
 * answer without a list around it (`applyOneRule`). Every one-rule Decision is made here, so both paths
 * answer field for field alike. Each shape has its own small function, so the compiler takes the one a
 * call needs whole into it.
 */
export function composeOne(
  d: RuleDecision,
  countedAt: number | undefined,
  reason: DecisionReason = 'rules',
): Decision {
  const decision = countedAt === undefined ? uncounted(d, reason) : counted(d, countedAt, reason)
  // Added, not spread into a copy: one object per call, and one shape per kind of answer.
  if (d.lease !== undefined) decision.lease = d.lease
  return decision
}

type Composed = { -readonly [F in keyof Decision]: Decision[F] }

function uncounted(d: RuleDecision, reason: DecisionReason): Composed {
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    waitMs: d.waitMs,
    rule: d.rule,
    rules: [d],
    reason,
  }
}

/**
 * A counted call's Decision, `countedAt` written in its literal: a field added to an object after it is
 * made costs a second allocation, on every admitted call.
 */
function counted(d: RuleDecision, countedAt: number, reason: DecisionReason): Composed {
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    waitMs: d.waitMs,
    rule: d.rule,
    rules: [d],
    reason,
    countedAt,
  }
}

/** The Decision of several rules: the denying one decides, else the one with least remaining. */
function composeSeveral(rules: StoreAnswer): Decision {
  let deciding = rules[0]!
  let allowed = true
  let waitMs = 0
  let lease: string | undefined
  for (const d of rules) {
    if (d.lease !== undefined) lease = d.lease
    if (d.waitMs > waitMs) waitMs = d.waitMs
    if (!d.allowed) {
      if (allowed || d.retryAfterMs > deciding.retryAfterMs) deciding = d
      allowed = false
    } else if (allowed && d.remaining < deciding.remaining) deciding = d
  }
  const decision: { -readonly [F in keyof Decision]: Decision[F] } = {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: allowed ? 0 : deciding.retryAfterMs,
    waitMs: allowed ? waitMs : 0,
    rule: deciding.rule,
    rules: copy(rules),
    reason: rules.reason ?? 'rules',
  }
  if (rules.countedAt !== undefined) decision.countedAt = rules.countedAt
  if (lease !== undefined) decision.lease = lease
  return decision
}

function copy(rules: StoreAnswer): RuleDecision[] {
  const out = new Array<RuleDecision>(rules.length)
  for (let i = 0; i < rules.length; i++) out[i] = rules[i]!
  return out
}

export const STORE_ALLOW_DECISION: Decision = Object.freeze({
  ...UNLIMITED_DECISION,
  rule: '',
  reason: 'store-error',
})
export const STORE_DENY_DECISION: Decision = Object.freeze({
  ...STORE_ALLOW_DECISION,
  allowed: false,
  limit: 0,
  remaining: 0,
  resetMs: STORE_ERROR_RETRY_MS,
  retryAfterMs: STORE_ERROR_RETRY_MS,
})

/** The insurance limiter's decision, marked as its. */
export function asInsurance(decision: Decision): Decision {
  return { ...decision, reason: 'insurance' }
}

export function asStoreError(error: unknown): SluiceError {
  if (error instanceof SluiceError) return error
  return new StoreError(ErrorCode.STORE_ERROR, `The rate-limit store failed: ${String(error)}`, {
    cause: error,
  })
}
