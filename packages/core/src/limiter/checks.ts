/**
 * @module What a limiter checks before it asks its store: its `rules` option (a list, rule text, or a
 * function whose answer is checked per call), its `onStoreError` policy, and each call's key and cost.
 * Everything here throws a coded error; nothing here reads a clock or a store.
 */
import { createHash } from 'node:crypto'
import {
  DuplicateRuleError,
  describe,
  ErrorCode,
  InvalidCostError,
  InvalidOptionError,
  InvalidSpecError,
  SluiceError,
} from '../errors.ts'
import { isPromise } from '../options.ts'
import { MAX_FIGURE } from '../rules/bounds.ts'
import { algorithmOf, isFactoryRule, maxCost, tooCostly } from '../rules/index.ts'
import { KINDS } from '../rules/spec.ts'
import { parseRuleSpec } from '../rules/text.ts'
import { isUnlimited, type RuleInput } from '../rules/unlimited.ts'
import type { Costs, Rule } from '../types.ts'
import type { Limiter, RulesAnswer, StoreErrorPolicy } from './types.ts'

/** Keys longer than this are stored as a digest, so hostile keys cannot grow memory or Redis keys. */
export const MAX_KEY_LENGTH = 200

/** The rules of a key no rule limits. */
const NO_RULES: readonly Rule[] = Object.freeze([])

/**
 * Checks a `rules` option (`option` names it in errors) and turns it into a per-call resolver that returns
 * only limiting rules. For `createLimiter` and for the HTTP kit, which checks it in the adapter's words.
 */
export function rulesOption<C>(
  option: string,
  value: unknown,
): (key: string, context: C) => readonly Rule[] | Promise<readonly Rule[]> {
  if (typeof value === 'function') {
    const fn = value as (key: string, context: C) => RulesAnswer | PromiseLike<unknown>
    // Every frozen list the function answered, and its check: a list that cannot change passes its check
    // once, however many calls answer it (a limit table answers one frozen list per entry, and calls of
    // keys with entries of their own and of keys under "*" come mixed). The last one is kept apart, so
    // that a run of calls under one list (or one text) skips even the lookup.
    const checks = new WeakMap<object, readonly Rule[]>()
    const texts = new TextRules()
    // Nothing a function answers: `undefined` must reach the check, not pass as the last list.
    let lastList: unknown = NO_RULES
    let lastRules: readonly Rule[] = NO_RULES
    let warned = false
    const checked = (rules: unknown): readonly Rule[] => {
      if (rules === lastList) return lastRules
      if (rules === null) return NO_RULES
      let checkedRules: readonly Rule[] | undefined
      try {
        if (typeof rules === 'string') {
          checkedRules = texts.rulesOf(rules)
        } else {
          checkedRules = rules === undefined ? undefined : checks.get(rules as object)
          if (checkedRules === undefined) {
            const fresh = checkAnswer(rules, texts)
            if (!Object.isFrozen(rules)) return fresh
            // The store reads a plain copy: an element of a frozen list costs a read many instructions, and a
            // read site that has seen both kinds of list costs every call as much.
            checkedRules = fresh === rules ? fresh.slice() : fresh
            checks.set(rules as object, checkedRules)
          }
        }
      } catch (error) {
        // The call fails on the framework's error path, which may not say why: the first time, say it here.
        if (!warned) {
          warned = true
          process.emitWarning(
            `sluice: ${(error as Error).message} Further wrong answers of this rules function are not reported.`,
            { type: 'SluiceWarning', code: (error as { code?: string }).code },
          )
        }
        throw error
      }
      lastList = rules
      lastRules = checkedRules
      return checkedRules
    }
    return (key, context) => {
      const rules = fn(key, context)
      if (rules === lastList) return lastRules
      // A native promise, whatever thenable the function answered with.
      return isPromise(rules) ? Promise.resolve(rules).then(checked) : checked(rules)
    }
  }
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError(option, value, 'a non-empty list of rules, or a function')
  }
  const rules = checkRules(value.map(ruleOfText(option)), option, ErrorCode.INVALID_OPTION)
  return () => rules
}

const FROM_FUNCTION = 'the rules function'
const LIST = 'a list of rules, rule text, or null'

/**
 * A rules function's answer other than null or one text: a list of rules and rule texts. `undefined` (a
 * function that forgot its `return`) is refused as any other value that is not a list: only `null` means
 * not limited.
 */
function checkAnswer(answer: unknown, texts: TextRules): readonly Rule[] {
  if (answer === undefined) {
    throw rulesError(
      ErrorCode.INVALID_RULES,
      FROM_FUNCTION,
      answer,
      `${LIST} for a call that is not limited (did the function forget its return?)`,
    )
  }
  if (!Array.isArray(answer)) throw rulesError(ErrorCode.INVALID_RULES, FROM_FUNCTION, answer, LIST)
  const list = answer.some((item) => typeof item === 'string')
    ? answer.map((item: unknown) => (typeof item === 'string' ? texts.ruleOf(item) : item))
    : answer
  return checkRules(list as readonly RuleInput[], FROM_FUNCTION, ErrorCode.INVALID_RULES)
}

/**
 * Rule texts a rules function answered, read once each: a function answers a handful of texts (one per
 * plan), so the cache stays small; one that builds texts without end is read afresh past a bound.
 */
class TextRules {
  readonly #rules = new Map<string, RuleInput>()
  readonly #lists = new Map<string, readonly Rule[]>()

  /** The rule `text` describes; an `ERR_SLUICE_INVALID_RULES` error for text outside the grammar. */
  ruleOf(text: string): RuleInput {
    let rule = this.#rules.get(text)
    if (rule === undefined) {
      try {
        rule = parseRuleSpec(text)
      } catch (error) {
        if (!(error instanceof InvalidSpecError)) throw error
        throw rulesError(ErrorCode.INVALID_RULES, FROM_FUNCTION, text, `rule text such as ${error.expected}`)
      }
      if (this.#rules.size >= MAX_TEXTS) this.#rules.clear()
      this.#rules.set(text, rule)
    }
    return rule
  }

  /** The limiting rules of one text answered alone: the rule, or none for `-1`. */
  rulesOf(text: string): readonly Rule[] {
    let rules = this.#lists.get(text)
    if (rules === undefined) {
      rules = checkRules([this.ruleOf(text)], FROM_FUNCTION, ErrorCode.INVALID_RULES)
      if (this.#lists.size >= MAX_TEXTS) this.#lists.clear()
      this.#lists.set(text, rules)
    }
    return rules
  }
}

/** Texts a rules function's reader keeps read. */
const MAX_TEXTS = 256

/** Builds a rule given as text (once, at construction); text outside the grammar is an error naming the option. */
function ruleOfText(option: string): (item: unknown, i: number) => RuleInput {
  return (item, i) => {
    if (typeof item !== 'string') return item as RuleInput
    try {
      return parseRuleSpec(item)
    } catch (error) {
      if (!(error instanceof InvalidSpecError)) throw error
      throw new InvalidOptionError(`${option}[${i}]`, item, `rule text such as ${error.expected}`)
    }
  }
}

/**
 * Drops unlimited markers; rejects anything a rule factory did not build (`code`), and two rules sharing a
 * state identity (`DuplicateRuleError`, `ERR_SLUICE_DUPLICATE_RULE`, at construction and per call alike).
 */
function checkRules(list: readonly RuleInput[], where: string, code: ErrorCode): readonly Rule[] {
  let rules: Rule[] | undefined
  for (let i = 0; i < list.length; i++) {
    const rule = list[i]!
    if (!isFactoryRule(rule)) {
      throw rulesError(code, where, rule, FACTORY_RULES)
    }
    if (isUnlimited(rule)) {
      rules ??= list.slice(0, i) as Rule[]
      continue
    }
    // State is keyed by identity (kind, shape, name), not by limits: two rules sharing one would share counts.
    for (let j = 0; j < i; j++) {
      const other = list[j] as Rule
      if (other.id === rule.id) throw new DuplicateRuleError(where, rule.id, other.name, rule.name)
    }
    rules?.push(rule)
  }
  return rules ?? (list as readonly Rule[])
}

/** What a rule must be, naming every kind's factory: `rules built by fixedWindow, …, concurrency or warmUp`. */
const FACTORY_RULES = `rules built by ${KINDS.slice(0, -1).join(', ')} or ${KINDS[KINDS.length - 1]}`

function rulesError(code: ErrorCode, where: string, value: unknown, expected: string): SluiceError {
  if (code === ErrorCode.INVALID_OPTION) return new InvalidOptionError(where, value, expected)
  return new SluiceError(code, `Invalid rules from ${where}: ${describe(value)}; expected ${expected}.`)
}

/** Checks an `onStoreError` option: one of the three policies, or a limiter to ask instead. */
export function storeErrorPolicyOption<C>(option: string, value: unknown): StoreErrorPolicy<C> {
  if (value === undefined) return 'allow'
  if (value === 'allow' || value === 'deny' || value === 'throw') return value
  return limiterOption<C>(option, value, "'allow', 'deny', 'throw' or a limiter built with createLimiter")
}

/** A limiter: what `createLimiter` builds (its methods and prefix), perhaps wrapped. */
export function limiterOption<C>(
  option: string,
  value: unknown,
  expected = 'a limiter built with createLimiter',
): Limiter<C> {
  const limiter = value as Partial<Limiter<C>> | null
  if (
    limiter === null ||
    typeof limiter !== 'object' ||
    typeof limiter.consume !== 'function' ||
    typeof limiter.consumeNow !== 'function' ||
    typeof limiter.peek !== 'function' ||
    typeof limiter.reset !== 'function' ||
    typeof limiter.prefix !== 'string'
  ) {
    throw new InvalidOptionError(option, value, expected)
  }
  return value as Limiter<C>
}

/**
 * The key as stored. Its rare branches are functions of their own: the compiler takes a small function
 * whole into the limiter's call, and every call pays for the branches of one it does not.
 */
export function keyOf(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) throw invalidKey(key)
  const length = key.length
  // Only a key of a digest's length that starts with its mark could be taken for one: it is digested too.
  if (length > MAX_KEY_LENGTH || (length === DIGEST_LENGTH && key.charCodeAt(0) === 0)) return digestKey(key)
  return key
}

function invalidKey(key: unknown): SluiceError {
  return new SluiceError(ErrorCode.INVALID_KEY, `Invalid key ${describe(key)}: expected a non-empty string.`)
}

/** The length of every stored digest (the NUL mark and a SHA-256 digest in base64url), taken from one. */
const DIGEST_LENGTH = digestKey('').length

/**
 * A digest keeps stored keys short; the NUL mark keeps digests apart from every key stored as is (`keyOf`
 * digests the keys that could read as one).
 */
function digestKey(key: string): string {
  return `\u0000${createHash('sha256').update(key).digest('base64url')}`
}

/**
 * Per-rule costs (`RuleCosts`) as read once from a call: its names and their figures, in the object's order
 * (a getter cannot answer the check one figure and the store another), and the object, for errors. Plain
 * lists: a copy into an object of its own would be a dictionary, slow to build and to read.
 */
export interface NamedCosts {
  readonly given: object
  readonly names: readonly string[]
  readonly figures: readonly number[]
}

/**
 * A consume's cost as given: a number, checked here; or per-rule costs (`RuleCosts`), whose figures are
 * checked here and whose names are checked against the call's rules once they resolve (`callCost`).
 */
export function costOf(cost: unknown): number | NamedCosts {
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) return ruleCostsOf(cost)
  return cost
}

/**
 * A cost that is not a valid number: per-rule costs, each figure an integer >= 1, else an error. Read by
 * `for...in` over own names (the order of `Object.keys`), counted first so that the lists are built at their
 * size: the compiler then reads each figure by its slot in the object's layout and knows each name its own,
 * where a name read from a list looks its figure up afresh (the dearest part of a call by far).
 */
function ruleCostsOf(cost: unknown): NamedCosts {
  if (cost === null || typeof cost !== 'object' || Array.isArray(cost)) {
    throw new InvalidCostError(cost, 'expected an integer >= 1')
  }
  let n = 0
  for (const name in cost) {
    // biome-ignore lint/suspicious/noPrototypeBuiltins: in a for...in of the object the compiler proves it true; Object.hasOwn stays a call.
    if (Object.prototype.hasOwnProperty.call(cost, name)) n++
  }
  const names = new Array<string>(n)
  const figures = new Array<number>(n)
  let i = 0
  for (const name in cost) {
    // biome-ignore lint/suspicious/noPrototypeBuiltins: as above.
    if (!Object.prototype.hasOwnProperty.call(cost, name)) continue
    const figure = (cost as Record<string, unknown>)[name]
    if (typeof figure !== 'number' || !Number.isSafeInteger(figure) || figure < 1) {
      throw new InvalidCostError(figure, `expected an integer >= 1 for rule ${name}`)
    }
    names[i] = name
    figures[i] = figure
    i++
  }
  // A getter that deleted a name the count had seen.
  if (i !== n) {
    names.length = i
    figures.length = i
  }
  return { given: cost, names, figures }
}

/**
 * A consume's cost under its resolved rules, checked against each rule's `maxCost`: a number when every rule takes the same (the store's usual path), else one cost per rule, in
 * order. A name no rule of the call has is an error; so are different costs under two concurrency rules
 * (a call holds one lease, of one cost). A call no rule limits takes per-rule costs unchecked by name.
 */
export function callCost(cost: number | NamedCosts, rules: readonly Rule[]): number | Costs {
  if (typeof cost === 'number') {
    checkCost(cost, rules)
    return cost
  }
  return namedCost(cost, rules)
}

/** `callCost` of per-rule costs: a function of its own, so that a call of one number does not carry it. */
function namedCost(cost: NamedCosts, rules: readonly Rule[]): number | Costs {
  if (rules.length === 0) return EMPTY_COSTS
  const costs = perRule(cost, rules, one)
  let lease: number | undefined
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!
    if (costs[i]! > maxCost(rule, false)) throw new InvalidCostError(costs[i], tooCostly(rule, false))
    if (algorithmOf(rule).mark === 'lease') {
      if (lease !== undefined && lease !== costs[i]) {
        throw new InvalidCostError(
          cost.given,
          'the concurrency rules of a call hold one lease: give them one cost',
        )
      }
      lease = costs[i]
    }
  }
  return sameCost(costs)
}

/** `costs` as one number when every rule takes the same, as the Store contract asks. */
export function sameCost(costs: Costs): number | Costs {
  for (let i = 1; i < costs.length; i++) if (costs[i] !== costs[0]) return costs
  return costs.length === 0 ? EMPTY_COSTS : costs[0]!
}

const EMPTY_COSTS: Costs = Object.freeze([])

const one = (): number => 1

/**
 * One figure per rule from costs by name, as `costOf` or `trueCostOf` copied them (`unnamed(i)` for a rule
 * not named); a name no rule of the call has is an `InvalidCostError` naming it.
 */
export function perRule(cost: NamedCosts, rules: readonly Rule[], unnamed: (i: number) => number): number[] {
  const n = rules.length
  const costs = new Array<number>(n)
  for (let i = 0; i < n; i++) costs[i] = unnamed(i)
  const { names, figures } = cost
  for (let j = 0; j < names.length; j++) {
    const name = names[j]!
    let named = false
    for (let i = 0; i < n; i++) {
      if (rules[i]!.name === name) {
        costs[i] = figures[j]!
        named = true
      }
    }
    if (!named) {
      const all = rules.map((rule) => rule.name).join(', ')
      throw new InvalidCostError(cost.given, `${name} names no rule of this call (its rules: ${all})`)
    }
  }
  return costs
}

/** A refund's or a penalty's cost: an integer from 1 to 2^50 (it may exceed a limit; a refund then empties). */
export function adjustCostOf(cost: unknown): number {
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1 || cost > MAX_FIGURE) {
    throw new InvalidCostError(cost, 'expected an integer from 1 to 2^50')
  }
  return cost
}

/**
 * A settle's true cost as given: an integer from 0 to 2^50, or one per rule by name (`RuleCosts`), each
 * such an integer; the names are checked once the rules resolve (`perRule`).
 */
export function trueCostOf(cost: unknown): number | NamedCosts {
  if (typeof cost === 'number') return trueFigure(cost, cost, '')
  if (cost === null || typeof cost !== 'object' || Array.isArray(cost)) {
    throw new InvalidCostError(cost, TRUE_COST)
  }
  const names = Object.keys(cost)
  const figures = names.map((name) =>
    trueFigure((cost as Record<string, unknown>)[name], cost, ` for rule ${name}`),
  )
  return { given: cost, names, figures }
}

const TRUE_COST = 'expected an integer from 0 to 2^50, or one per rule by name'

function trueFigure(figure: unknown, cost: unknown, which: string): number {
  if (typeof figure !== 'number' || !Number.isSafeInteger(figure) || figure < 0 || figure > MAX_FIGURE) {
    throw new InvalidCostError(which === '' ? cost : figure, `expected an integer from 0 to 2^50${which}`)
  }
  return figure
}

/** Refuses a cost some rule cannot take in one consume (or, `penalty`, one penalty): see `maxCost`. */
export function checkCost(cost: number, rules: readonly Rule[], penalty = false): void {
  for (const rule of rules) {
    if (cost > maxCost(rule, penalty)) throw new InvalidCostError(cost, tooCostly(rule, penalty))
  }
}
