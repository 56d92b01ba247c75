/**
 * @module The messages core publishes, built and published by hand (so each sink is checked on exact
 * figures without a store), and the one trace the metric sinks are checked against. test/metrics-end-to-end.test.ts
 * checks the same sinks on what core itself publishes.
 */
import diagnostics from 'node:diagnostics_channel'
import type {
  Decision,
  DecisionMessage,
  DecisionReason,
  HttpAction,
  HttpMessage,
  StoreErrorMessage,
} from '@sluice/core'

export interface DecisionSpec {
  allowed?: boolean
  waitMs?: number
  rule?: string
  reason?: DecisionReason
}

export function decisionOf(spec: DecisionSpec = {}): Decision {
  const allowed = spec.allowed ?? true
  return {
    allowed,
    limit: 10,
    remaining: allowed ? 5 : 0,
    resetMs: 1000,
    retryAfterMs: allowed ? 0 : 400,
    waitMs: spec.waitMs ?? 0,
    rule: spec.rule ?? '10-per-1s',
    rules: [],
    reason: spec.reason ?? 'rules',
  }
}

export function publishDecision(
  limiter: string,
  key: string,
  spec: DecisionSpec & { mode?: 'consume' | 'peek'; storeMs?: number } = {},
): void {
  const message: DecisionMessage = {
    limiter,
    key,
    cost: 1,
    mode: spec.mode ?? 'consume',
    decision: decisionOf(spec),
    storeMs: spec.storeMs ?? 0,
  }
  diagnostics.channel('sluice:decision').publish(message)
}

export function publishHttp(
  limiter: string,
  key: string | undefined,
  action: HttpAction,
  route: string | undefined,
  spec: DecisionSpec = {},
): void {
  const message: HttpMessage = {
    limiter,
    key: key ?? '',
    request: { url: `/users/${key}` },
    decision: action === 'reject' ? undefined : decisionOf(spec),
    action,
    route,
  }
  diagnostics.channel('sluice:http').publish(message)
}

/**
 * Publishes a settle (`action: 'settle'`) of a request that reserved `reserved` per rule and cost `cost`
 * (rules `cost` leaves out kept their reservation).
 */
export function publishSettle(
  limiter: string,
  route: string | undefined,
  reserved: Record<string, number>,
  cost: Record<string, number>,
): void {
  const message: HttpMessage = {
    limiter,
    key: 'key-settled',
    request: { url: '/v1/chat' },
    decision: decisionOf(),
    action: 'settle',
    route,
    reserved,
    cost,
  }
  diagnostics.channel('sluice:http').publish(message)
}

/** Publishes a store error; `error` may lack a code, as a message from another publisher might. */
export function publishStoreError(limiter: string, key: string, error: unknown): void {
  const message = { limiter, key, error } as StoreErrorMessage
  diagnostics.channel('sluice:store-error').publish(message)
}

/** Every key the trace uses: none may show up in any attribute or label. */
export const TRACE_KEYS = [
  'key-alice',
  'key-bob',
  'key-carol',
  'key-dave',
  'key-erin',
  'key-frank',
  'key-grace',
  'key-heidi',
  'key-ivan',
  'key-judy',
  'key-mallory',
]

/**
 * A consume of every result and reason, a peek, store errors, and every HTTP action:
 *
 * | limiter | rule      | result  | reason      | storeMs |
 * |---------|-----------|---------|-------------|---------|
 * | api     | 10-per-1s | allowed | rules       | 0.5     |
 * | api     | 10-per-1s | allowed | rules       | 1.5     |
 * | api     | leaky     | queued  | rules       | 2  (waitMs 250) |
 * | api     | 10-per-1s | denied  | rules       | 0.25    |
 * | api     | 10-per-1s | (peek)  | rules       | 0.75    |
 * | api     | 10-per-1s | denied  | cache       | 0       |
 * | pay     | 5-per-1s  | allowed | store-error | 100     |
 * | pay     | 5-per-1s  | allowed | insurance   | 100     |
 * | pay     | unlimited | allowed | unlimited   | 0       |
 * | pay     | 5-per-1s  | allowed | prefetch    | 0       |
 * | pay     | 5-per-1s  | denied  | blocked     | 0       |
 */
export function publishTrace(): void {
  publishDecision('api', 'key-alice', { storeMs: 0.5 })
  publishDecision('api', 'key-bob', { storeMs: 1.5 })
  publishDecision('api', 'key-carol', { rule: 'leaky', waitMs: 250, storeMs: 2 })
  publishDecision('api', 'key-dave', { allowed: false, storeMs: 0.25 })
  publishDecision('api', 'key-erin', { mode: 'peek', storeMs: 0.75 })
  publishDecision('api', 'key-dave', { allowed: false, reason: 'cache' })
  publishStoreError(
    'pay',
    'key-frank',
    Object.assign(new Error('timed out'), { code: 'ERR_SLUICE_STORE_TIMEOUT' }),
  )
  publishDecision('pay', 'key-frank', { rule: '5-per-1s', reason: 'store-error', storeMs: 100 })
  publishStoreError(
    'pay',
    'key-grace',
    Object.assign(new Error('timed out'), { code: 'ERR_SLUICE_STORE_TIMEOUT' }),
  )
  publishDecision('pay', 'key-grace', { rule: '5-per-1s', reason: 'insurance', storeMs: 100 })
  publishStoreError('pay', 'key-heidi', new Error('ECONNRESET without a code'))
  publishDecision('pay', 'key-heidi', { rule: 'unlimited', reason: 'unlimited' })
  publishDecision('pay', 'key-ivan', { rule: '5-per-1s', reason: 'prefetch' })
  publishDecision('pay', 'key-judy', { allowed: false, rule: '5-per-1s', reason: 'blocked' })

  publishHttp('api', 'key-alice', 'allow', '/users/:id')
  publishHttp('api', 'key-carol', 'queue', '/users/:id', { waitMs: 250 })
  publishHttp('api', 'key-dave', 'deny', '/users/:id', { allowed: false })
  publishHttp('api', 'key-mallory', 'shadow', undefined, { allowed: false })
  publishHttp('api', undefined, 'reject', undefined)
}
