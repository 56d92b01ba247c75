/**
 * @module Local answers: a consume decided from this process's memory, with no round trip. Each layer (the
 * denied-key cache, prefetch) implements `LocalAnswers`; the store asks its layers in turn and, when none
 * answers, Redis. A layer that is off is not in the list, so it costs nothing.
 */
import type { BlockPolicy, Costs, Rule, StoreAnswer } from '@sluice/core'

/** A consume as the layers see it. */
export interface LocalCall<P> {
  /** The key within its limiter: `<limiter prefix>\0<key>`. */
  readonly id: string
  readonly prefix: string
  readonly key: string
  /** The store's plan for the rules: their combined identity, and whether prefetch serves them. */
  readonly plan: P
  readonly rules: readonly Rule[]
  /** Its cost: one for every rule, or per rule (`Costs`, not all the same). */
  readonly cost: number | Costs
  readonly block: BlockPolicy | undefined
  /** Local ms: the store's clock, or the process's monotonic one. */
  readonly now: number
}

export interface LocalAnswers<P> {
  /** The call's answer from memory, or undefined: the next layer, else Redis, decides it. */
  answer(call: LocalCall<P>): StoreAnswer | Promise<StoreAnswer> | undefined
}
