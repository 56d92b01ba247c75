/**
 * @module createLimiter: checks its options and assembles a limiter from its parts: the consume and peek
 * path (decide.ts), the other acts on a key (adjust.ts) and the prefix claims (prefixes.ts). It knows
 * nothing of HTTP and nothing of Redis.
 */
import { blockOption } from '../block.ts'
import { RateLimitedError } from '../errors.ts'
import { given, prefixOption, readOptions, storeOption } from '../options.ts'
import { MemoryStore } from '../store/memory-store.ts'
import { penalize, refund, release, reset, settle, unqueue } from './adjust.ts'
import { rulesOption, storeErrorPolicyOption } from './checks.ts'
import { Decider, type LimiterParts } from './decide.ts'
import { hold } from './hold.ts'
import { claimPrefix, unclaimPrefix } from './prefixes.ts'
import type { Limiter, LimiterOptions } from './types.ts'

export { limiterOption, MAX_KEY_LENGTH, rulesOption, storeErrorPolicyOption } from './checks.ts'
export { STORE_ERROR_RETRY_MS, UNLIMITED_DECISION } from './decisions.ts'
export type {
  AcquireOptions,
  AdjustOptions,
  CallOptions,
  Limiter,
  LimiterOptions,
  RefundOptions,
  RuleCosts,
  RulesAnswer,
  RulesOption,
  SettleOptions,
  StoreErrorPolicy,
} from './types.ts'

const LIMITER_OPTIONS = ['rules', 'store', 'prefix', 'onStoreError', 'block']

/** Builds a limiter. Every option is checked here; a bad one throws `InvalidOptionError`. */
export function createLimiter<C = unknown>(options: LimiterOptions<C>): Limiter<C> {
  const parts = limiterParts<C>(options)
  const { prefix, store, block } = parts
  // A prefix left to its default is claimed in the store's place too: two stores on one Redis client would
  // otherwise share every count unseen. A prefix given on purpose may be shared on purpose.
  const place = claimPrefix(store, prefix, options.prefix === undefined)
  const decider = new Decider(parts)
  const limiter: Limiter<C> = {
    prefix,
    store,
    block,
    consume: (key, options) => decider.promised(key, options, 'consume'),
    consumeNow: (key, options) => decider.decide(key, options, 'consume'),
    peek: (key, options) => decider.promised(key, options, 'peek'),
    reset: (key, options) => reset(parts, key, options),
    refund: (key, options) => refund(parts, key, options),
    penalize: (key, options) => penalize(parts, key, options),
    settle: (key, options) => settle(parts, key, options),
    unqueue: (key, decision, options) => unqueue(parts, key, decision, options),
    release: (key, decision, options) => release(parts, key, decision, options),
    close: () => unclaimPrefix(store, prefix, place),
    async acquire(key, options) {
      const signal = options?.signal
      signal?.throwIfAborted()
      const decision = await decider.promised(key, options, 'consume')
      if (!decision.allowed) throw new RateLimitedError(decision)
      if (decision.waitMs > 0 && !(await hold(decision.waitMs, signal))) {
        // Given up: the slot goes back if nobody queued behind it. The abort is what the caller hears.
        await unqueue(parts, key, decision, options).catch(() => {})
        throw signal!.reason
      }
      return decision
    },
  }
  return limiter
}

/** `createLimiter`'s options, checked and resolved. */
function limiterParts<C>(options: LimiterOptions<C>): LimiterParts<C> {
  const o = readOptions('createLimiter', options, LIMITER_OPTIONS)
  return {
    resolveRules: rulesOption<C>('createLimiter.rules', o.rules),
    store: o.store === undefined ? new MemoryStore() : storeOption('createLimiter.store', o.store),
    prefix: prefixOption('createLimiter.prefix', given(o.prefix, 'sluice')),
    onStoreError: storeErrorPolicyOption<C>('createLimiter.onStoreError', o.onStoreError),
    block: o.block === undefined ? undefined : blockOption('createLimiter.block', o.block),
  }
}
