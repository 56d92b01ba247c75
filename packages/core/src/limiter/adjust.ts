/**
 * @module The acts that change a key's state outside a consume: reset, refund, penalize, unqueue and
 * release. Each resolves the key's rules as a consume would and asks the store once; a store failure
 * rejects with a `StoreError` whatever `onStoreError` says (an act that did not happen is never reported
 * as done).
 */
import { ErrorCode, InvalidOptionError, SluiceError } from '../errors.ts'
import { isPromise } from '../options.ts'
import { refundMark } from '../rules/index.ts'
import type { Adjustment, Decision, Rule, RuleDecision, StoreAnswer } from '../types.ts'
import { adjustCostOf, checkCost, keyOf } from './checks.ts'
import type { LimiterParts } from './decide.ts'
import { answers, asStoreError, compose, malformed, UNLIMITED_DECISION } from './decisions.ts'
import type { AdjustOptions, CallOptions, RefundOptions } from './types.ts'

/** A mark per rule (which call's units an adjustment concerns), or a function of the rules resolved. */
type Marks = readonly (string | undefined)[] | ((rules: readonly Rule[]) => readonly (string | undefined)[])

/** Forgets the key's state under its rules and lifts its block; the insurance limiter is reset too. */
export async function reset<C>(
  parts: LimiterParts<C>,
  key: string,
  options?: { context?: C },
): Promise<void> {
  const { prefix, store, block, onStoreError } = parts
  // The key is checked before the store is tried, so a bad key is never taken for a store failure.
  const storageKey = keyOf(key)
  const rules = await parts.resolveRules(key, options?.context as C)
  // With blocks a key no rule limits now may still be blocked from before: its block is lifted all the same.
  if (rules.length === 0 && block === undefined) return
  // The insurance limiter is reset too, or its old counts would greet the next outage.
  if (typeof onStoreError === 'object') await onStoreError.reset(key, options)
  try {
    await store.reset(prefix, storageKey, rules)
  } catch (error) {
    throw asStoreError(error)
  }
}

/** Gives units back: that call's own when `decision` says when it counted, else the newest. */
export async function refund<C>(
  parts: LimiterParts<C>,
  key: string,
  options?: RefundOptions<C>,
): Promise<void> {
  const decision = options?.decision
  if (decision === undefined) {
    await adjust(parts, key, options, 'refund')
    return
  }
  // Only a call the store counted has units to give back.
  if (!decision.allowed || (decision.reason !== 'rules' && decision.reason !== 'prefetch')) return
  const at = (decision as { countedAt?: unknown }).countedAt
  if (at === undefined) {
    // A store that does not say when it counted a call: its newest units, as without a decision.
    await adjust(parts, key, options, 'refund')
    return
  }
  if (typeof at !== 'number' || !Number.isSafeInteger(at) || !Array.isArray(decision.rules)) {
    throw new InvalidOptionError('refund.decision', decision, 'a decision from consume')
  }
  await adjust(parts, key, options, 'refund', (rules) =>
    rules.map((rule, i) => {
      // The rules may have changed since (a table edit): a rule the call was not decided by gives nothing.
      const d = decision.rules[i]
      return d !== undefined && d.rule === rule.name ? refundMark(rule, d, at) : undefined
    }),
  )
}

/** Counts units whatever the rules say; answers what a peek would right after. */
export async function penalize<C>(
  parts: LimiterParts<C>,
  key: string,
  options?: AdjustOptions<C>,
): Promise<Decision> {
  const answer = await adjust(parts, key, options, 'penalize')
  return answer === undefined ? UNLIMITED_DECISION : compose(answer)
}

/** Gives a queued call's slot back while nobody has queued behind it (best effort). */
export async function unqueue<C>(
  parts: LimiterParts<C>,
  key: string,
  decision: Decision,
  options?: CallOptions<C>,
): Promise<void> {
  // Best effort: a store that cannot adjust keeps the slot taken, as any store did before.
  if (!decision.allowed || decision.waitMs === 0 || typeof parts.store.adjust !== 'function') return
  const queues = decision.rules.map((d) => d.queue)
  if (queues.every((q) => q === undefined)) return
  const cost = options?.cost
  await adjust(
    parts,
    key,
    { context: options?.context, cost: typeof cost === 'number' ? cost : 1 },
    'unqueue',
    queues,
  )
}

/**
 * Ends a concurrency lease. Not an async function, and no promise of its own when the store answers in the
 * same tick (the memory store): a request releases once, as its response ends, and nobody needs to wait.
 */
export function release<C>(
  parts: LimiterParts<C>,
  key: string,
  decision: Decision,
  options?: { context?: C },
): Promise<void> {
  if (decision.lease === undefined || typeof parts.store.adjust !== 'function') return NOTHING
  // A release's promise settles with nothing already (adjustUnder): no further hop to drop its value.
  return adjust(parts, key, options, 'release', leasesOf(decision.rules)) as Promise<unknown> as Promise<void>
}

/** Each rule's lease, the marks of a release: a list literal for one rule (the usual case) costs no loop. */
function leasesOf(said: readonly RuleDecision[]): (string | undefined)[] {
  if (said.length === 1) return [said[0]!.lease]
  const marks: (string | undefined)[] = []
  for (const d of said) marks.push(d.lease)
  return marks
}

const nothing = (): undefined => undefined

/** A store's answer to an act that is not a penalty, passed on as it came. */
const passOn = (said: StoreAnswer | undefined): StoreAnswer | undefined => said

/** A store's failure, as a `StoreError`. */
const storeFailure = (error: unknown): never => {
  throw asStoreError(error)
}

/**
 * Runs an adjustment on the store; a failure rejects with a `StoreError`, whatever `onStoreError` says. Not an
 * async function: rules and a store that answer synchronously cost no promise hop between them.
 */
function adjust<C>(
  parts: LimiterParts<C>,
  key: string,
  options: AdjustOptions<C> | undefined,
  adjustment: Adjustment,
  marksOf?: Marks,
): Promise<StoreAnswer | undefined> {
  try {
    const storageKey = keyOf(key)
    const cost = adjustCostOf(options?.cost)
    const rules = parts.resolveRules(key, options?.context as C)
    if (isPromise(rules)) {
      return rules.then((resolved) => adjustUnder(parts, storageKey, resolved, cost, adjustment, marksOf))
    }
    return adjustUnder(parts, storageKey, rules, cost, adjustment, marksOf)
  } catch (error) {
    return Promise.reject(error)
  }
}

/** `adjust` under the key's resolved rules. */
function adjustUnder<C>(
  parts: LimiterParts<C>,
  storageKey: string,
  rules: readonly Rule[],
  cost: number,
  adjustment: Adjustment,
  marksOf: Marks | undefined,
): Promise<StoreAnswer | undefined> {
  const { prefix, store, block } = parts
  if (rules.length === 0) return NOTHING
  if (adjustment === 'penalize') checkCost(cost, rules, true)
  const marks = typeof marksOf === 'function' ? marksOf(rules) : marksOf
  if (typeof store.adjust !== 'function') {
    throw new SluiceError(ErrorCode.UNSUPPORTED, `This store cannot ${adjustment}: it has no adjust method.`)
  }
  let answer: StoreAnswer | undefined | Promise<StoreAnswer | undefined>
  try {
    answer = store.adjust(prefix, storageKey, rules, cost, adjustment, block, marks)
  } catch (error) {
    return Promise.reject(asStoreError(error))
  }
  if (isPromise(answer)) {
    // Only a penalty's answer is checked; a release's settles with nothing (it says nothing), the others'
    // as they came: no closure per call but a penalty's.
    if (adjustment === 'penalize') {
      return Promise.resolve(answer).then((said) => checked(said, adjustment, rules.length), storeFailure)
    }
    return Promise.resolve(answer).then(adjustment === 'release' ? nothing : passOn, storeFailure)
  }
  // Answered in the tick with nothing to say (every act but a penalty; a release whatever its store said):
  // the one settled promise, made once.
  if ((answer === undefined || adjustment === 'release') && adjustment !== 'penalize') return NOTHING
  return Promise.resolve(checked(answer, adjustment, rules.length))
}

/** A store's answer to an adjustment: a penalty's must be one decision per rule (a malformed one throws). */
function checked(
  answer: StoreAnswer | undefined,
  adjustment: Adjustment,
  n: number,
): StoreAnswer | undefined {
  if (adjustment === 'penalize' && !answers(answer, n)) throw malformed(answer)
  return answer
}

const NOTHING: Promise<undefined> = Promise.resolve(undefined)
