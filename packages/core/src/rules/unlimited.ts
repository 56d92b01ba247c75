/**
 * @module The "not limited" marker. A factory given `limit: -1` returns it; the limiter admits
 * calls it governs and stores nothing for them. Its JSON is `{"kind":"unlimited"}`, which `ruleFromSpec`
 * takes back.
 */
import type { Rule, UnlimitedRule } from '../types.ts'

export const UNLIMITED: UnlimitedRule = Object.freeze(
  Object.defineProperty({ kind: 'unlimited' }, 'name', { value: 'unlimited', enumerable: false }),
) as UnlimitedRule

/** A rule as users may pass it: a real rule or the unlimited marker. */
export type RuleInput = Rule | UnlimitedRule

export function isUnlimited(rule: RuleInput): rule is UnlimitedRule {
  return rule.kind === 'unlimited'
}
