/**
 * @module What the store sends for each combination of rules, computed once and kept: the rules' ids,
 * params, limits and scripts (`Plan`), found by the identity of the rules list, else by the rules' specs.
 */
import type { Rule } from '@sluice/core'
import { certainRetry } from '@sluice/core/store'
import type { Script } from './client.ts'
import { type Act, consumeScriptFor, scriptFor } from './compose.ts'
import { REDIS_KINDS } from './kinds.ts'
import { ruleArgs } from './wire.ts'

/** What the store sends for one combination of rules, computed once and kept. */
export interface Plan {
  /**
   * The rules' specs (kind, numbers, given name), joined: the combination with its numbers. Rules that
   * share state identities but differ in their limits get different plans, each sending its own numbers.
   */
  readonly id: string
  /** Per rule: `<rule.id>`, its state identity (no limits), appended to the key base. */
  readonly ids: readonly string[]
  readonly kinds: readonly Rule['kind'][]
  /** Every rule's numbers, in order, as the script reads them (the wire's `params`). */
  readonly params: readonly string[]
  /** The script that applies this sequence of rule kinds without a block (src/compose.ts). */
  readonly script: Script
  /**
   * For one rule of a kind with a consume written straight down, the script of a consume of a cost above
   * 0 without a block (the common call: `script` answers it too, in more of Redis's time). It reads the
   * short call (wire.ts `encodeConsume`).
   */
  readonly consume: Script | undefined
  readonly limits: readonly number[]
  /** Per rule: whether its denial is certain until its `retryAfterMs`, so the denied cache may keep it. */
  readonly certainRetry: readonly boolean[]
  /**
   * The scripts of the other acts (and of calls with a block, or per-rule costs), by act, `+b` and `+c`, made
   * when first needed.
   */
  acts?: { [act: string]: Script }
  /** Whether a rule holds leases (concurrency): a consume then brings a lease id. */
  readonly leases: boolean
  /** Whether every rule is of a kind the store can prefetch units for. */
  readonly batchable: boolean
}

/** Rule combinations remembered by their ids; a rules function could otherwise grow the map forever. */
const MAX_PLANS = 1024

export class Plans {
  readonly #byList = new WeakMap<readonly Rule[], Plan>()
  readonly #byId = new Map<string, Plan>()

  /**
   * The plan for `rules`: by identity of the list first (fixed rules, and a limit table's entries, pass
   * the same list every call), then by the rules' specs.
   */
  of(rules: readonly Rule[]): Plan {
    let plan = this.#byList.get(rules)
    if (plan !== undefined) return plan
    let id = specOf(rules[0]!)
    for (let i = 1; i < rules.length; i++) id += `|${specOf(rules[i]!)}`
    plan = this.#byId.get(id)
    if (plan === undefined) {
      plan = planOf(id, rules)
      if (this.#byId.size >= MAX_PLANS) this.#byId.clear()
      this.#byId.set(id, plan)
    }
    this.#byList.set(rules, plan)
    return plan
  }
}

/**
 * The script of `act` for the plan's rules, with or without a block, of one cost or of one per rule (`perRule`),
 * made when first needed.
 */
export function scriptOf(plan: Plan, act: Act, withBlock: boolean, perRule = false): Script {
  plan.acts ??= {}
  const id = `${act}${withBlock ? '+b' : ''}${perRule ? '+c' : ''}`
  let s = plan.acts[id]
  if (s === undefined) {
    s = scriptFor(plan.kinds, act, withBlock, perRule)
    plan.acts[id] = s
  }
  return s
}

/** Each rule's JSON (its spec: kind, numbers, given name), computed once per rule object. */
const specs = new WeakMap<Rule, string>()

function specOf(rule: Rule): string {
  let spec = specs.get(rule)
  if (spec === undefined) {
    spec = JSON.stringify(rule)
    specs.set(rule, spec)
  }
  return spec
}

function planOf(id: string, rules: readonly Rule[]): Plan {
  const kinds = rules.map((r) => r.kind)
  return {
    id,
    ids: rules.map((r) => r.id),
    kinds,
    params: rules.flatMap(ruleArgs),
    script: scriptFor(kinds, 'apply', false),
    consume: consumeScriptFor(kinds),
    limits: rules.map((r) => ('limit' in r ? r.limit : r.capacity)),
    leases: kinds.some((kind) => REDIS_KINDS[kind].mark === 'lease'),
    batchable: kinds.every((kind) => REDIS_KINDS[kind].prefetch),
    certainRetry: rules.map(certainRetry),
  }
}
