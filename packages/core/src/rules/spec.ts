/**
 * @module The registry of rule kinds, and rules as data. `RULE_KINDS` lists each kind's entry (kind.ts:
 * everything core asks of a kind, declared beside its factory and algorithm); adding a kind is one line
 * here. A rule's spec is `{ kind, ...the factory's options }`; `ruleFromSpec` builds the rule with the
 * factory's own checks, and `JSON.stringify(rule)` gives the spec back.
 */
import { InvalidOptionError, InvalidSpecError } from '../errors.ts'
import type { Rule, RuleKind } from '../types.ts'
import { type ConcurrencyOptions, concurrencyKind } from './concurrency.ts'
import { type FixedWindowOptions, fixedWindowKind } from './fixed-window.ts'
import type { RuleKindEntry } from './kind.ts'
import { type LeakyBucketOptions, leakyBucketKind } from './leaky-bucket.ts'
import { type QuotaOptions, quotaKind } from './quota.ts'
import { type SlidingLogOptions, slidingLogKind } from './sliding-log.ts'
import { type SlidingWindowOptions, slidingWindowKind } from './sliding-window.ts'
import { type TokenBucketOptions, tokenBucketKind } from './token-bucket.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'
import { type WarmUpOptions, warmUpKind } from './warm-up.ts'

/**
 * A rule as data: its kind and the options its factory takes, as `JSON.stringify(rule)` writes it and
 * `ruleFromSpec` reads it. `limit: -1` (`capacity: -1`) means not limited, as in the factories, and so does
 * `{ kind: 'unlimited' }`.
 */
export type RuleSpec =
  | ({ readonly kind: 'fixedWindow' } & Readonly<FixedWindowOptions>)
  | ({ readonly kind: 'slidingLog' } & Readonly<SlidingLogOptions>)
  | ({ readonly kind: 'slidingWindow' } & Readonly<SlidingWindowOptions>)
  | ({ readonly kind: 'tokenBucket' } & Readonly<TokenBucketOptions>)
  | ({ readonly kind: 'leakyBucket' } & Readonly<LeakyBucketOptions>)
  | ({ readonly kind: 'concurrency' } & Readonly<ConcurrencyOptions>)
  | ({ readonly kind: 'warmUp' } & Readonly<WarmUpOptions>)
  | ({ readonly kind: 'quota' } & Readonly<QuotaOptions>)
  | { readonly kind: 'unlimited' }

/** Every kind a rule may be, by its entry. */
export const RULE_KINDS: { readonly [K in RuleKind]: RuleKindEntry<K> } = {
  fixedWindow: fixedWindowKind,
  slidingLog: slidingLogKind,
  slidingWindow: slidingWindowKind,
  tokenBucket: tokenBucketKind,
  leakyBucket: leakyBucketKind,
  concurrency: concurrencyKind,
  warmUp: warmUpKind,
  quota: quotaKind,
}

/** The kinds, in the registry's order (the order error messages list them in). */
export const KINDS = Object.keys(RULE_KINDS) as readonly RuleKind[]

/** The entry of `rule`'s kind, typed for any rule. */
export function kindOf(rule: Rule): RuleKindEntry {
  return RULE_KINDS[rule.kind] as RuleKindEntry
}

/**
 * Builds the rule a spec describes, `{ kind, ...options }`, with its factory's checks: a bad value throws
 * `InvalidOptionError` naming it (`fixedWindow.limit`), and so does a field the kind does not take
 * (`fixedWindow.limitt`). A spec that is not an object or names no known kind throws `InvalidSpecError`
 * (`ERR_SLUICE_INVALID_SPEC`). `ruleFromSpec(JSON.parse(JSON.stringify(rule)))` equals `rule`.
 */
export function ruleFromSpec(spec: RuleSpec): RuleInput {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new InvalidSpecError(spec, 'an object { kind, ...options }')
  }
  // Only an own `kind`: an inherited one is not part of the data.
  const kind = Object.hasOwn(spec, 'kind') ? (spec as { kind?: unknown }).kind : undefined
  if (kind === 'unlimited') {
    for (const field of Object.keys(spec)) {
      if (field !== 'kind') {
        throw new InvalidOptionError(
          `unlimited.${field}`,
          (spec as Record<string, unknown>)[field],
          'no options',
        )
      }
    }
    return UNLIMITED
  }
  if (typeof kind !== 'string' || !Object.hasOwn(RULE_KINDS, kind)) {
    throw new InvalidSpecError(spec, `a kind of ${KINDS.join(', ')} or unlimited (got ${describeKind(kind)})`)
  }
  const entry = RULE_KINDS[kind as RuleKind]
  const options = Object.create(null) as Record<string, unknown>
  for (const field of Object.keys(spec)) {
    if (field === 'kind') continue
    const value = (spec as Record<string, unknown>)[field]
    if (!entry.options.includes(field)) {
      throw new InvalidOptionError(
        `${kind}.${field}`,
        value,
        `one of the known options: ${entry.options.join(', ')}`,
      )
    }
    options[field] = value
  }
  return entry.factory(options as never)
}

function describeKind(kind: unknown): string {
  return typeof kind === 'string' ? JSON.stringify(kind.slice(0, 64)) : String(kind)
}
