/**
 * @module What the store asks of a rule kind: its params as the SQL reads them, and the PL/pgSQL steps
 * (decide, admit, refund, one call's refund, penalize, and for two kinds unqueue and release) that the
 * apply function (src/schema.ts) inlines, one CASE branch per kind. Each kind's file holds its steps beside
 * its TypeScript twin's comments in @sluice/core: the same float operations in the same order, so the
 * stores agree to the last bit (float8 is an IEEE double, as a JavaScript number is).
 *
 * What a step may use (declared once in the apply function): `st`, the rule's row (its state columns `a`,
 * `b`, `c`, `xs`, `ys`, `ids`, all NULL for a fresh state, and `expires`); `p1`…`p8`, the rule's params;
 * `now`; `cc`, the cost of this step; `mk`, the call's mark for this rule (a lease to admit under, or the
 * mark of a call to refund, unqueue or release). A decide step sets `ok`, `rem`, `rst`, `rty`, `wt` (and
 * `q1`, `q2`: where a queued call left the queue) and changes nothing; every other step changes `st` and sets
 * `changed` when it did. Scratch: `x`, `y`, `z`, `w`, `u`, `v`, `s`, `tot`, `base` (float8); `j`, `f`,
 * `lo`, `hi`, `mid`, `nn` (int).
 */
import type { Rule } from '@sluice/core'

export interface KindSql<R extends Rule = Rule> {
  /** The kind's number in the apply function's CASE. */
  readonly code: number
  /** The rule's params, `p1` on. At most `PARAMS_PER_RULE`. */
  params(rule: R): number[]
  /** Functions the steps call, created by the migration (the name maker prefixes the store's table). */
  helpers?(name: (suffix: string) => string): string
  readonly decide: string
  readonly admit: string
  readonly refund: string
  readonly refundCall: string
  readonly penalize: string
  readonly unqueue?: string
  readonly release?: string
  /**
   * For a kind whose params carry a period the client computed (quota), a condition over `now` and the
   * params that holds when `now` lies outside it: the apply function then answers its `now` before taking
   * any lock or reading any row (`STATUS.period`), and the client sends the call once more.
   */
  readonly outside?: string
}

/** Params per rule in the call's flat list of params. */
export const PARAMS_PER_RULE = 8
