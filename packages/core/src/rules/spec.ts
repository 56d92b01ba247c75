/**
 * @module Rules as data. A rule's spec is `{ kind, ...the factory's options }`; `ruleFromSpec` builds the
 * rule with the factory's own checks, and `JSON.stringify(rule)` gives the spec back. Kinds are looked up
 * in one registry: adding a kind is one entry here.
 */
import { InvalidOptionError, InvalidSpecError } from '../errors.ts'
import type { RuleKind } from '../types.ts'
import { type ConcurrencyOptions, concurrency } from './concurrency.ts'
import { type FixedWindowOptions, fixedWindow } from './fixed-window.ts'
import { type LeakyBucketOptions, leakyBucket } from './leaky-bucket.ts'
import { type SlidingLogOptions, slidingLog } from './sliding-log.ts'
import { type SlidingWindowOptions, slidingWindow } from './sliding-window.ts'
import { type TokenBucketOptions, tokenBucket } from './token-bucket.ts'
import { type RuleInput, UNLIMITED } from './unlimited.ts'
import { type WarmUpOptions, warmUp } from './warm-up.ts'

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
  | { readonly kind: 'unlimited' }

/** What the registry knows of a kind: its factory and the option names a spec of it may hold. */
export interface RuleKindEntry {
  readonly factory: (options: never) => RuleInput
  readonly options: readonly string[]
}

/** Every kind a spec may name. */
export const RULE_KINDS: { readonly [K in RuleKind]: RuleKindEntry } = {
  fixedWindow: { factory: fixedWindow, options: ['limit', 'windowMs', 'name'] },
  slidingLog: { factory: slidingLog, options: ['limit', 'windowMs', 'name'] },
  slidingWindow: { factory: slidingWindow, options: ['limit', 'windowMs', 'buckets', 'name'] },
  tokenBucket: { factory: tokenBucket, options: ['capacity', 'refillPerSecond', 'name'] },
  leakyBucket: { factory: leakyBucket, options: ['ratePerSecond', 'maxQueueMs', 'name'] },
  concurrency: { factory: concurrency, options: ['limit', 'leaseMs', 'name'] },
  warmUp: { factory: warmUp, options: ['ratePerSecond', 'warmUpMs', 'coldFactor', 'maxQueueMs', 'name'] },
}

const KINDS = Object.keys(RULE_KINDS) as RuleKind[]

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
