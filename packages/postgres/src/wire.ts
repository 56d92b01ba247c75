/**
 * @module One owner for the apply function's arguments and reply, and the one-statement consumes': a call is
 * encoded here and its answer decoded here; nothing else counts positions (schema.ts and the kinds' SQL
 * define them).
 */

import type { FixedWindowRule, SlidingWindowRule } from '@sluice/core'
import {
  type BlockPolicy,
  type Costs,
  ErrorCode,
  type Rule,
  type RuleDecision,
  StoreError,
} from '@sluice/core'
import { blockedAnswer, ruleDecision, type StoreAnswer } from '@sluice/core/store'
import { PARAMS_PER_RULE } from './kinds/kind.ts'
import { HEAD, type kindsOf, PER_RULE, STATUS } from './schema.ts'

type Kinds = ReturnType<typeof kindsOf>

/** A rule's kind number and params, made once per rule object. */
const encoded = new WeakMap<Rule, { code: number; params: number[] }>()

function encodeRule(kinds: Kinds, rule: Rule): { code: number; params: number[] } {
  let e = encoded.get(rule)
  if (e === undefined) {
    const sql = kinds[rule.kind] as { code: number; params(rule: Rule): number[] }
    const params = sql.params(rule)
    while (params.length < PARAMS_PER_RULE) params.push(0)
    e = { code: sql.code, params }
    encoded.set(rule, e)
  }
  return e
}

/**
 * The row key of `key` under `prefix`: injective (the prefix's length first) and free of NUL, which
 * PostgreSQL text cannot hold (a backslash and a NUL are escaped, and only then).
 */
export function rowKey(prefix: string, key: string): string {
  const safe = /[\\\0]/.test(key) ? key.replaceAll('\\', '\\\\').replaceAll('\0', '\\0') : key
  return `${prefix.length}:${prefix}:${safe}`
}

/**
 * The apply function's arguments for a call, but its deadline and budget: key, ids, kinds, params, cost,
 * act, the caller's ms (or null: the database's clock), deadline, block, marks, budget, costs. `cost` is one
 * number for every rule (`costs` null), or one per rule (`costs`, `cost` then 0): per-rule costs, or a
 * settle's signed amounts.
 */
export function encode(
  kinds: Kinds,
  rowKey: string,
  rules: readonly Rule[],
  cost: number | Costs,
  act: number,
  at: number | null,
  block: BlockPolicy | undefined,
  marks: readonly (string | undefined | null)[] | null,
): unknown[] {
  const ids = new Array<string>(rules.length)
  const codes = new Array<number>(rules.length)
  const params: number[] = []
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    const e = encodeRule(kinds, rule)
    ids[i] = rule.id
    codes[i] = e.code
    for (const p of e.params) params.push(p)
  }
  const blk = block === undefined ? null : [block.ms, block.factor, block.maxMs, block.forgetMs, block.keep]
  const m = marks === null ? null : marks.map((x) => x ?? null)
  if (typeof cost === 'number') return [rowKey, ids, codes, params, cost, act, at, null, blk, m, null, null]
  return [rowKey, ids, codes, params, 0, act, at, null, blk, m, null, cost]
}

/**
 * Sets `args`' (from `encode`) deadline in the database's clock, or, before any reply has told that clock
 * (`deadline` null), the timeout as a budget from the statement's start.
 */
export function withDeadline(args: unknown[], deadline: number | null, budgetMs: number): unknown[] {
  if (deadline !== null) args[7] = deadline
  else args[10] = budgetMs
  return args
}

/**
 * The one-statement fixedWindow consume's arguments (kinds/fixed-window.ts `fixedWindowConsume`): the
 * deadline, or null with the timeout as a budget from the statement's start, and the lock timeout.
 */
export function encodeFixedWindow(
  rowKey: string,
  rule: FixedWindowRule,
  cost: number,
  at: number | null,
  deadline: number | null,
  timeoutMs: number,
): unknown[] {
  return [rowKey, rule.id, rule.limit, rule.windowMs, cost, at, deadline, timeoutMs, `${timeoutMs}ms`]
}

/** The one-statement slidingWindow consume's arguments (kinds/sliding-window.ts), as `encodeFixedWindow`. */
export function encodeSlidingWindow(
  rowKey: string,
  rule: SlidingWindowRule,
  cost: number,
  at: number | null,
  deadline: number | null,
  timeoutMs: number,
): unknown[] {
  return [
    rowKey,
    rule.id,
    rule.limit,
    rule.windowMs,
    rule.buckets,
    rule.bucketMs,
    cost,
    at,
    deadline,
    timeoutMs,
    `${timeoutMs}ms`,
  ]
}

/** The server's ms in a reply. */
export function serverNowOf(reply: readonly (number | null)[]): number {
  return reply[1]!
}

/** Whether the function refused the call: it started after the call's deadline. */
export function isLate(reply: readonly (number | null)[]): boolean {
  return reply[0] === STATUS.late
}

/**
 * A reply as a store answer: a blocked key's; or one decision per rule (a queued leaky-bucket call
 * learns where it left the queue, an admitted call its lease under each rule `marks` gives one), the block
 * a denial began stretching the denying rules' retries, and for an admitted consume the ms it was counted at.
 */
export function decode(
  reply: readonly (number | null)[],
  rules: readonly Rule[],
  consume: boolean,
  marks: readonly (string | undefined)[] | null,
): StoreAnswer {
  if (reply[0] === STATUS.blocked) return blockedAnswer(rules, reply[3]!)
  if (reply[0] !== STATUS.ok) {
    throw new StoreError(ErrorCode.STORE_ERROR, `PostgreSQL replied ${JSON.stringify(reply)}.`)
  }
  const blockMs = reply[3]!
  const out = new Array<RuleDecision>(rules.length) as RuleDecision[] & { countedAt?: number }
  let allowed = true
  for (let i = 0; i < rules.length; i++) {
    const at = HEAD + i * PER_RULE
    const rule = rules[i]!
    const ok = reply[at] === 1
    if (!ok) allowed = false
    const retry = !ok && reply[at + 3]! < blockMs ? blockMs : reply[at + 3]!
    const d = ruleDecision(rule, ok, reply[at + 1]!, reply[at + 2]!, retry, reply[at + 4]!) as {
      -readonly [F in keyof RuleDecision]: RuleDecision[F]
    }
    // A NULL element reads as null through pg and as NaN through postgres.js.
    const q = reply[at + 5]
    if (consume && d.waitMs > 0 && typeof q === 'number' && !Number.isNaN(q))
      d.queue = `${q}:${reply[at + 6]}`
    out[i] = d
  }
  if (consume && allowed) {
    if (marks !== null) {
      for (let i = 0; i < rules.length; i++) {
        const lease = marks[i]
        if (lease !== undefined) (out[i] as { lease?: string }).lease = lease
      }
    }
    out.countedAt = reply[2]!
  }
  return out
}

/** The row `fixedWindowConsume` returns (pg reads float8 as numbers, as postgres.js does). */
export interface FixedWindowRow {
  a: number
  b: number
  c: number
  now: number
  server: number
}

/** A fixedWindow consume's answer from its row (kinds/fixed-window.ts); as the memory store decides it. */
export function decodeFixedWindow(row: FixedWindowRow, rule: FixedWindowRule): StoreAnswer {
  const allowed = row.c === 1
  const resetMs = row.b === 0 ? 0 : row.a + rule.windowMs - row.now
  const d = ruleDecision(rule, allowed, Math.max(rule.limit - row.b, 0), resetMs, allowed ? 0 : resetMs, 0)
  const out = [d] as RuleDecision[] & { countedAt?: number }
  if (allowed) out.countedAt = row.now
  return out
}

/** The row `slidingWindowConsume` returns. */
export interface SlidingWindowRow {
  ok: number
  total: number
  newest: number | null
  retry: number | null
  now: number
  server: number
}

/** A slidingWindow consume's answer from its row (kinds/sliding-window.ts); as the memory store decides it. */
export function decodeSlidingWindow(row: SlidingWindowRow, rule: SlidingWindowRule): StoreAnswer {
  const { now } = row
  const allowed = row.ok === 1
  const remaining = Math.max(rule.limit - row.total, 0)
  const out = (
    allowed
      ? [ruleDecision(rule, true, remaining, now - (now % rule.bucketMs) + rule.windowMs - now, 0, 0)]
      : [
          ruleDecision(
            rule,
            false,
            remaining,
            row.newest! + rule.windowMs - now,
            row.retry! + rule.windowMs - now,
            0,
          ),
        ]
  ) as RuleDecision[] & { countedAt?: number }
  if (allowed) out.countedAt = now
  return out
}
