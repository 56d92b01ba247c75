/**
 * @module What the Redis store asks of each rule kind, declared once per kind: its Lua chunk, its straight-down
 * consume script, which of the chunk's optional functions the foot may call, and the mark its admit leaves.
 * compose.ts and plans.ts read these fields; nothing decides a kind's traits from its name or its script's text.
 * A kind missing here, or an entry missing a field, fails to compile.
 */
import type { RuleKind } from '@sluice/core'
import { CONSUME_LUA, RULE_LUA } from './scripts.generated.ts'

/** One kind's part of the scripts. */
export interface RedisKind {
  /** The kind's chunk (src/scripts/<kind>.lua): `<kind>Decide`, `<kind>Admit`, and the functions below. */
  readonly chunk: string
  /**
   * Whether the chunk defines `<kind>Consume`, which decides and admits a consume of a cost above 0 in one
   * go: a single rule's `apply` foot then calls it instead of decide, then admit.
   */
  readonly consumesInOneGo: boolean
  /**
   * The single-rule consume written straight down (src/scripts/<kind>-consume.lua), or undefined when the
   * kind has none: see compose.ts `consumeScriptFor`.
   */
  readonly consume: string | undefined
  /**
   * Whether units of this kind may be prefetched: the chunk defines `<kind>Return`, which takes a batch's
   * unspent units back.
   */
  readonly prefetch: boolean
  /**
   * For a kind that may be prefetched, how a batch ends and goes back: `'window'`, a batch ends with the
   * window its units were counted in (their reset) and gives back every unspent unit; `'newest'`, the rule
   * takes units back only where the newest batch was counted, so at most that batch goes back; `'all'`, a
   * batch lasts the prefetch time and gives back every unspent unit. Undefined for a kind never prefetched.
   */
  readonly batch: 'window' | 'newest' | 'all' | undefined
  /**
   * What an admitted call leaves behind for a later act to name: a queue mark (`<kind>Admit` returns it when
   * the call waits; `unqueue` lifts it with `<kind>Unqueue`), a lease (`<kind>Admit` takes the call's lease
   * id; `release` ends it with `<kind>Release`), or nothing.
   */
  readonly mark: 'queue' | 'lease' | undefined
  /**
   * Whether the rule's params end with a period [start, end) the client computes per call from its estimate of
   * the script's clock (wire.ts `writePeriods`): the chunk defines `<kind>Outside(now, params...)`, which the
   * foot asks before anything else, and a call whose `now` lies outside changes nothing and answers
   * `{ 'period', now, serverNow }` (calls.ts sends it once more, for the period holding that `now`).
   */
  readonly period: boolean
}

export const REDIS_KINDS: { readonly [K in RuleKind]: RedisKind } = {
  fixedWindow: {
    chunk: RULE_LUA.fixedWindow,
    consumesInOneGo: true,
    consume: CONSUME_LUA.fixedWindow,
    prefetch: true,
    batch: 'window',
    mark: undefined,
    period: false,
  },
  slidingLog: {
    chunk: RULE_LUA.slidingLog,
    consumesInOneGo: false,
    consume: CONSUME_LUA.slidingLog,
    prefetch: true,
    batch: 'newest',
    mark: undefined,
    period: false,
  },
  slidingWindow: {
    chunk: RULE_LUA.slidingWindow,
    consumesInOneGo: false,
    consume: undefined,
    prefetch: true,
    batch: 'newest',
    mark: undefined,
    period: false,
  },
  tokenBucket: {
    chunk: RULE_LUA.tokenBucket,
    consumesInOneGo: false,
    consume: undefined,
    prefetch: true,
    batch: 'all',
    mark: undefined,
    period: false,
  },
  leakyBucket: {
    chunk: RULE_LUA.leakyBucket,
    consumesInOneGo: false,
    consume: undefined,
    prefetch: false,
    batch: undefined,
    mark: 'queue',
    period: false,
  },
  concurrency: {
    chunk: RULE_LUA.concurrency,
    consumesInOneGo: false,
    consume: CONSUME_LUA.concurrency,
    prefetch: false,
    batch: undefined,
    mark: 'lease',
    period: false,
  },
  warmUp: {
    chunk: RULE_LUA.warmUp,
    consumesInOneGo: false,
    consume: undefined,
    prefetch: false,
    batch: undefined,
    mark: undefined,
    period: false,
  },
  quota: {
    chunk: RULE_LUA.quota,
    consumesInOneGo: false,
    consume: CONSUME_LUA.quota,
    // A batch would have to end at its period's edge, and the decision's `used` would be the batch's, not the
    // call's: every quota consume is a round trip (docs/design/layers.md).
    prefetch: false,
    batch: undefined,
    mark: undefined,
    period: true,
  },
}
