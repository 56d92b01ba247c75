/**
 * @module How a factory lays out the rule it builds. The spec (the kind, the options the factory took with
 * their defaults applied, and `name` only when one was given) is the rule's enumerable fields, so
 * `JSON.stringify(rule)` gives exactly the spec and `ruleFromSpec` builds the rule back from it. Everything
 * derived from the spec (`id`, a default name, `policyWindowSeconds`, `bucketMs`, ...) is a non-enumerable
 * field: readable like any other, left out of JSON. The rule is frozen.
 *
 * A rule's `id` is its state identity: its kind, its shape (the figures that say how state is laid out:
 * `windowMs`, `buckets`) and its name when one was given, never its limit, capacity or rate. Stores key
 * state by it, so an edited limit judges the state the old one built.
 */
import type { Rule } from '../types.ts'

/**
 * The state identity of a rule of `kind` with `shape` and the given `name` (undefined for a default name):
 * `fixedWindow:60000`, `slidingWindow:60000:10`, `tokenBucket`, `fixedWindow:60000@burst`,
 * `quota:month:Europe/Berlin:1`. The kind fixes how many shape figures follow (a figure is a number, or a
 * word such as a quota's period and time zone), and a name always follows `@`, which no figure holds: two
 * different identities never read the same.
 */
export function ruleIdentity(
  kind: string,
  shape: readonly (number | string)[],
  name: string | undefined,
): string {
  let id = kind
  for (const figure of shape) id += `:${figure}`
  return name === undefined ? id : `${id}@${name}`
}

/**
 * Builds a frozen rule: `spec` (kind first, then the options in the factory's order) and `name`, when
 * given, as enumerable fields; `id` (from the figures of the kind's `identity` options and `name`), the
 * default name when none was given, and `derived` as non-enumerable ones.
 */
export function defineRule<R extends Rule>(
  spec: { readonly kind: R['kind'] } & Readonly<Record<string, number | string>>,
  identity: readonly string[],
  name: string | undefined,
  defaultName: string,
  derived: Readonly<Record<string, unknown>>,
): R {
  // Field by field onto an empty object, not spread: every rule of a kind then shares one hidden class (a
  // spread copy made a new one per rule after a few dozen), so a call reads a rule's fields at one known
  // place whatever rule it runs, as a limit table's thousand rule objects do.
  const rule: Record<string, unknown> = {}
  for (const field of Object.keys(spec)) rule[field] = spec[field]
  if (name !== undefined) rule.name = name
  hidden(
    rule,
    'id',
    ruleIdentity(
      spec.kind,
      identity.map((option) => spec[option]!),
      name,
    ),
  )
  if (name === undefined) hidden(rule, 'name', defaultName)
  for (const field of Object.keys(derived)) hidden(rule, field, derived[field])
  return Object.freeze(rule) as unknown as R
}

function hidden(target: object, field: string, value: unknown): void {
  Object.defineProperty(target, field, { value, enumerable: false, writable: false, configurable: false })
}
