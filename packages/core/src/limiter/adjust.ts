/**
 * @module The acts that change a key's state outside a consume: reset, refund, penalize, settle, unqueue
 * and release. Each resolves the key's rules as a consume would and asks the store once (a settle that
 * changes no rule, not at all); a store failure
 * rejects with a `StoreError` whatever `onStoreError` says (an act that did not happen is never reported
 * as done).
 */
import { describe, ErrorCode, InvalidOptionError, SluiceError } from '../errors.ts'
import { isPromise } from '../options.ts'
import { MAX_FIGURE } from '../rules/bounds.ts'
import { refundMark } from '../rules/index.ts'
import type { Adjustment, Costs, Decision, Rule, RuleDecision, StoreAnswer } from '../types.ts'
import { adjustCostOf, checkCost, costOf, keyOf, perRule, sameCost, trueCostOf } from './checks.ts'
import type { LimiterParts } from './decide.ts'
import { answers, asStoreError, compose, malformed, UNLIMITED_DECISION } from './decisions.ts'
import type { AdjustOptions, CallOptions, RefundOptions, SettleOptions } from './types.ts'

/** A mark per rule (which call's units an adjustment concerns), or a function of the rules resolved. */
type Marks = readonly (string | undefined)[] | ((rules: readonly Rule[]) => readonly (string | undefined)[])

/** An adjustment's cost for its resolved rules: a number for every rule, or one per rule. */
type CostOf = (rules: readonly Rule[]) => number | Costs

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

/**
 * Decisions settled, or refunded naming them, already: a call's units go back once, and a decision settles
 * once. A decision is known by its object, so one read back from JSON is a new decision to this set (the
 * caller keeps a decision from settling twice across processes).
 */
const settledDecisions = new WeakSet<Decision>()

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
  // A call's units go back once: a decision refunded or settled already gives nothing more, and one
  // refunded here settles no more (`settle`). Marked before the store is asked, as a settle is.
  if (settledDecisions.has(decision)) return
  settledDecisions.add(decision)
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
  // Each queued rule gives back its own cost: the call's as given, else what its decision reserved.
  const cost = options?.cost
  const given = cost === undefined ? undefined : typeof cost === 'number' ? adjustCostOf(cost) : costOf(cost)
  const costs: CostOf = (rules) => {
    if (typeof given === 'number') return given
    if (given !== undefined) return sameCost(perRule(given, rules, () => 1))
    const reserved = reservedCosts(decision)
    if (reserved === null)
      throw new InvalidOptionError('unqueue.decision', decision, 'a decision from consume')
    return reserved === undefined ? 1 : sameCost(rules.map((_, i) => reserved[i] ?? 1))
  }
  await adjust(parts, key, { context: options?.context }, 'unqueue', queues, costs)
}

/**
 * Makes an admitted call's reservation its true cost, per rule, in one store call (`'settle'`): each rule
 * the call was decided by gives back what it reserved beyond its true cost (as `refund` naming the call
 * does) or counts the excess (as `penalize` does), and answers nothing. A decision that counted nothing in
 * the store (unlimited, or decided by `onStoreError`, the insurance limiter included) changes nothing.
 */
export async function settle<C>(
  parts: LimiterParts<C>,
  key: string,
  options: SettleOptions<C>,
): Promise<void> {
  const storageKey = keyOf(key)
  const decision: unknown = (options as Partial<SettleOptions<C>> | undefined)?.decision
  const work = counted(decision)
  const truth = trueCostOf(options.cost)
  if (!work) return
  const reserved = reservedCosts(decision)
  if (reserved === null) throw invalidSettle(decision, 'its costs are not one integer >= 1 per rule')
  if (settledDecisions.has(decision)) {
    throw invalidSettle(decision, 'it has been settled, or refunded naming it, already')
  }
  // Taken before the rules resolve, so a second settle of it meanwhile is refused; given back on an error
  // before the store is asked (a store that failed may still have settled it: a late reply, a commit).
  settledDecisions.add(decision)
  let asked = false
  try {
    const rules = await parts.resolveRules(key, options.context as C)
    if (rules.length === 0) return
    const at = decision.countedAt!
    const said = decision.rules
    const was = (i: number): number => reserved?.[i] ?? 1
    const trueCosts = typeof truth === 'number' ? rules.map(() => truth) : perRule(truth, rules, was)
    // Only the rules a settle changes go to the store: one whose true cost is what it reserved, or that
    // has nothing to give back (no mark: a concurrency lease), is left out, and a settle that changes
    // nothing asks the store nothing.
    const changed: Rule[] = []
    const amounts: number[] = []
    const marks: (string | undefined)[] = []
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      const d = said[i]
      // The rules may have changed since (a table edit): a rule the call was not decided by is left alone.
      const amount = d !== undefined && d.rule === rule.name ? trueCosts[i]! - was(i) : 0
      if (amount > 0) checkCost(amount, [rule], true)
      const mark = amount < 0 ? refundMark(rule, d!, at) : undefined
      if (amount > 0 || mark !== undefined) {
        changed.push(rule)
        amounts.push(amount)
        marks.push(mark)
      }
    }
    if (changed.length === 0) return
    asked = true
    await adjustUnder(parts, storageKey, changed, amounts, 'settle', marks)
  } catch (error) {
    if (!asked) settledDecisions.delete(decision)
    throw error
  }
}

/**
 * Whether `decision` is an admitted call the store counted (`settle` has work to do); false for one that
 * counted nothing in the store. A denied decision, and anything that is not a decision from a consume (a
 * peek's, one a store did not say it counted), is an `ERR_SLUICE_INVALID_SETTLE` error.
 */
function counted(decision: unknown): decision is Decision {
  const d = decision as Partial<Decision> | null | undefined
  if (d === null || typeof d !== 'object' || typeof d.allowed !== 'boolean' || !Array.isArray(d.rules)) {
    throw invalidSettle(decision, 'expected the decision of a consume')
  }
  if (!d.allowed) throw invalidSettle(decision, 'it was denied, so it reserved nothing')
  if (d.reason === 'unlimited' || d.reason === 'store-error' || d.reason === 'insurance') return false
  if ((d.reason !== 'rules' && d.reason !== 'prefetch') || !Number.isSafeInteger(d.countedAt)) {
    throw invalidSettle(decision, 'expected the decision of a consume the store counted (not a peek)')
  }
  return true
}

function invalidSettle(decision: unknown, why: string): SluiceError {
  return new SluiceError(ErrorCode.INVALID_SETTLE, `Cannot settle ${describe(decision)}: ${why}.`)
}

/**
 * What an admitted decision reserved per rule (`Decision.cost`): undefined for 1 under each rule, null when
 * it is not an integer from 1 to 2^50, or one per rule (not a decision a limiter made).
 */
function reservedCosts(decision: Decision): Costs | undefined | null {
  const cost = (decision as { cost?: unknown }).cost
  if (cost === undefined) return undefined
  const costs = typeof cost === 'number' ? decision.rules.map(() => cost) : cost
  if (
    !Array.isArray(costs) ||
    costs.length !== decision.rules.length ||
    !costs.every((c) => Number.isSafeInteger(c) && c >= 1 && c <= MAX_FIGURE)
  ) {
    return null
  }
  return costs
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
  costOf?: CostOf,
): Promise<StoreAnswer | undefined> {
  try {
    const storageKey = keyOf(key)
    const cost = costOf ?? adjustCostOf(options?.cost)
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
  costOf: number | Costs | CostOf,
  adjustment: Adjustment,
  marksOf: Marks | undefined,
): Promise<StoreAnswer | undefined> {
  const { prefix, store, block } = parts
  if (rules.length === 0) return NOTHING
  const cost = typeof costOf === 'function' ? costOf(rules) : costOf
  if (adjustment === 'penalize') checkCost(cost as number, rules, true)
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
    // Only a penalty's answer is checked; a release's resolves to nothing (it says nothing), the others' as
    // they came: no closure per call but a penalty's.
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

/** A store's answer to an adjustment: a penalty's must be one decision per rule (else it throws). */
function checked(
  answer: StoreAnswer | undefined,
  adjustment: Adjustment,
  n: number,
): StoreAnswer | undefined {
  if (adjustment === 'penalize' && !answers(answer, n)) throw malformed(answer)
  return answer
}

const NOTHING: Promise<undefined> = Promise.resolve(undefined)
