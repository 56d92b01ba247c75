/**
 * @module What core asks of a rule kind, as one type: each kind declares one `RuleKindEntry` beside its
 * factory and algorithm, and spec.ts's `RULE_KINDS` lists them by kind. A kind missing from the list, or an
 * entry missing a trait, fails to compile.
 */
import type { Rule, RuleDecision, RuleKind } from '../types.ts'
import type { Algorithm } from './algorithm.ts'
import type { RuleInput } from './unlimited.ts'

/** The rule of kind `K`. */
export type RuleOf<K extends RuleKind> = Extract<Rule, { readonly kind: K }>

/** Everything core asks of one rule kind. */
export interface RuleKindEntry<K extends RuleKind = RuleKind> {
  /** The factory users call; `ruleFromSpec` builds a spec of this kind with it. */
  readonly factory: (options: never) => RuleInput
  /** The option names a spec of this kind may hold, in the factory's order. */
  readonly options: readonly string[]
  /**
   * The options whose figures lay out the state (its shape): with the kind and a given name, they make the
   * rule's state identity (`id`), never a limit, capacity or rate (see define.ts).
   */
  readonly identity: readonly string[]
  /** How the memory store runs it; `mark` says which mark an admitted decision carries. */
  readonly algorithm: Algorithm<RuleOf<K>, unknown>
  /**
   * The rule's answer in sluice's shape when no algorithm makes it (a blocked key's), with the figure its
   * decisions carry as `limit` and its unit (algorithm.ts).
   */
  decision(
    rule: RuleOf<K>,
    allowed: boolean,
    remaining: number,
    resetMs: number,
    retryAfterMs: number,
    waitMs: number,
  ): RuleDecision
  /** Its text form, after `<kind>:` and before `@NAME` (see text.ts). */
  readonly text: {
    /** What the text looks like, for error messages: `fixedWindow:LIMIT/WINDOW, e.g. fixedWindow:1000/1h`. */
    readonly form: string
    /**
     * True for a body that may end with `@@ZONE` (quota's time zone): the name is then what follows the
     * next `@` after it. Absent for the others, whose name follows the first `@`.
     */
    readonly zoned?: true
    /** The spec's options a text body gives (the factory checks them), or undefined for a body not of the form. */
    read(body: string): Record<string, unknown> | undefined
    /** The body `read` takes back to the same spec. */
    write(rule: RuleOf<K>): string
  }
  /**
   * The most units one consume (`penalty` false) or one penalty may bring to the rule: the limiter refuses
   * more with a coded error before any store is asked (see bounds.ts for the range).
   */
  maxCost(rule: RuleOf<K>, penalty: boolean): number
  /**
   * Why a cost above `maxCost` is refused, for the error; built only then (a message of figures costs a
   * call more than its check).
   */
  tooCostly(rule: RuleOf<K>, penalty: boolean): string
  /**
   * The mark by which a store finds the units of one admitted call in the rule's state, to give them back
   * (`Store.adjust`, `'refund'`), from the ms it was counted at and its decision; undefined for a kind that
   * refunds do not apply to.
   */
  refundMark(rule: RuleOf<K>, d: RuleDecision, at: number): string | undefined
  /**
   * Whether a denial's `retryAfterMs` is certain: no other call can free units before it (short of a reset,
   * a refund or a slot given back), so a cache of denials may keep the denial until then. False for a kind
   * whose units an act of another call frees at once (a concurrency rule's release).
   */
  readonly certainRetry: boolean
}
