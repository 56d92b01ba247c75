/**
 * @module The diagnostics channels sluice publishes on (`node:diagnostics_channel`), as undici and fastify
 * do. Nothing is built for a message unless its channel has subscribers, so an unobserved limiter pays one
 * property read per call. `@sluice/metrics` subscribes here; anyone can (`subscribe('sluice:decision', fn)`).
 */
import { channel } from 'node:diagnostics_channel'
import type { SluiceError } from './errors.ts'
import type { Costs, Decision, StoreMode } from './types.ts'

/** Published for every consume and peek, after the decision is known (a store failure's included). */
export interface DecisionMessage {
  /** The limiter's prefix. */
  readonly limiter: string
  /** The key as the caller gave it (before any digest for long keys). */
  readonly key: string
  /**
   * The call's cost: a number when every rule took the same, else one per rule in the order of
   * `decision.rules` (per-rule costs, `CallOptions.cost` as `RuleCosts`).
   */
  readonly cost: number | Costs
  readonly mode: StoreMode
  readonly decision: Decision
  /** How long the store took, in ms (fractional); 0 when it answered synchronously (the memory store). */
  readonly storeMs: number
}

/**
 * What an HTTP adapter did with one request under one limit; `'settle'`, published after the one it was
 * admitted with, when its reservation became its true cost.
 */
export type HttpAction = 'allow' | 'queue' | 'deny' | 'shadow' | 'reject' | 'settle'

/** Published once per limit per request by the HTTP kit that adapters share. */
export interface HttpMessage {
  readonly limiter: string
  /**
   * The request's key; `''` for a request rejected because a key part was missing, and for one an
   * `overload` guard shed (`decision.reason === 'overload'`: no key was built).
   */
  readonly key: string
  /** The framework's request object. */
  readonly request: unknown
  /** The limit's decision; undefined for `action: 'reject'` (no key, nothing decided). */
  readonly decision: Decision | undefined
  readonly action: HttpAction
  /** The route template (`GET /users/:id`) when the adapter knows it, else undefined. */
  readonly route: string | undefined
  /**
   * `action: 'settle'` only: per rule by name, the units the request reserved (`reserved`) and its true
   * cost as settled (`cost`); a larger cost charged the difference, a smaller one gave it back. The
   * decision is then what a peek answers right after the settle.
   */
  readonly reserved?: Readonly<Record<string, number>>
  readonly cost?: Readonly<Record<string, number>>
}

/** Published when a store fails or times out, before `onStoreError` decides. */
export interface StoreErrorMessage {
  readonly limiter: string
  readonly key: string
  /** A coded `SluiceError` (`ERR_SLUICE_STORE_TIMEOUT`, `ERR_SLUICE_STORE`, ...); a store's own error is its `cause`. */
  readonly error: SluiceError
}

export const decisionChannel = channel('sluice:decision')
export const httpChannel = channel('sluice:http')
export const storeErrorChannel = channel('sluice:store-error')
