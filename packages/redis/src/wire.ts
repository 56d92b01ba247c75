/**
 * @module The wire between the store and its scripts: how a call goes out (KEYS and ARGV) and how its answer
 * comes back. Nothing else in TypeScript knows an offset; the Lua side of each is named where it is fixed
 * (prelude.lua reads the head, compose.ts's foot the params and each act's extras, and writes the reply).
 *
 * KEYS: each rule's key, then the key's reset count (a batch's acts: fetch, return), then the key's block
 * (when the call carries a block policy: the scripts read it from the last key).
 * ARGV: the head (now, mode, cost, deadline, block), each rule's params, a call's per-rule costs (one per
 * rule, the head's cost then 0; a settle's signed amounts), then the act's extras: a consume's lease (a plan
 * with a concurrency rule), the marks of a settle, of a release, unqueue or refund of one call, a fetch's
 * (`fetchExtras`) or a return's (`returnExtras`). The one exception is the short call of a straight-down
 * consume of one rule (`encodeConsume`): the deadline, the rule's params, a concurrency rule's lease id,
 * then the cost and the caller's ms only when they say something.
 * Reply: `{ 'late', serverNow }`; `{ 'blocked', ms left, serverNow }`; or `REPLY_FIELDS` values per rule,
 * the block begun, (a fetch: the units taken, the key's reset count,) serverNow; `{ 'ok', serverNow }`. A
 * decision of one rule that admits, waits for nothing and holds no mark (or only the lease the call sent)
 * may come as `ADMITTED_REPLY`.
 *
 * Over 400 lines, not split: every layout the scripts share with TypeScript lives here and nowhere else (the
 * call's head, each act's extras, a batch of releases, the replies and their checks), so one file is the wire.
 */
import {
  type Adjustment,
  type BlockPolicy,
  type Costs,
  ErrorCode,
  type Rule,
  type RuleDecision,
  type StoreAnswer,
  StoreError,
} from '@sluice/core'
import { blockedAnswer } from '@sluice/core/store'

type Kind = Rule['kind']

/** ARGV before the rules' params: now, mode, cost, deadline, block (see prelude.lua). */
export const HEAD_ARGS = 5

/** Where the head's deadline sits in ARGV (ARGV[4]); `withDeadline` writes it there unless a call says otherwise. */
const HEAD_DEADLINE = 3

/** How many params each kind reads from ARGV (see `ruleArgs`). */
export const PARAMS: { readonly [K in Kind]: number } = {
  fixedWindow: 2,
  slidingLog: 2,
  slidingWindow: 3,
  tokenBucket: 2,
  leakyBucket: 3,
  concurrency: 2,
  warmUp: 7,
}

/** A rule's params as the script reads them, in order. */
export function ruleArgs(rule: Rule): string[] {
  switch (rule.kind) {
    case 'fixedWindow':
    case 'slidingLog':
      return [String(rule.limit), String(rule.windowMs)]
    case 'slidingWindow':
      return [String(rule.limit), String(rule.windowMs), String(rule.bucketMs)]
    case 'tokenBucket':
      return [String(rule.capacity), String(rule.refillPerSecond)]
    case 'leakyBucket':
      return [String(rule.ratePerSecond), String(rule.maxQueueMs), String(rule.limit)]
    case 'concurrency':
      return [String(rule.limit), String(rule.leaseMs)]
    case 'warmUp':
      // The factory's doubles, written so that Lua's tonumber reads back the very same ones.
      return [
        String(rule.stableMs),
        String(rule.thresholdPermits),
        String(rule.maxPermits),
        String(rule.slope),
        String(rule.coolDownMs),
        String(rule.maxQueueMs),
        String(rule.limit),
      ]
  }
}

/** Per rule the reply holds allowed, remaining, resetMs, retryAfterMs, waitMs and the queue mark. */
export const REPLY_FIELDS = 6

/**
 * The length of the short reply a straight-down consume (fixed-window-consume.lua, sliding-log-consume.lua,
 * concurrency-consume.lua) sends for an admitted call: `{ 1, remaining, resetMs, serverNow }`, meaning no
 * retry, no wait, no block, and no mark but a concurrency rule's lease, which is the one the call sent. Half
 * the values of the full form, which Redis writes and the client reads on every such call.
 */
export const ADMITTED_REPLY = 4

/**
 * What a script is asked to do with the call's cost (ARGV[2]): '1' a consume, '0' a peek, else the act's
 * name (a store's adjustment, or a batch's `return`). The scripts read only whether it is '1' (prelude.lua:
 * `consume`); the rest names the act for whoever reads the call (MONITOR, a slow log).
 */
export type Mode = '1' | '0' | Adjustment | 'return'

/**
 * Where each of a fetch's extras sits after the rules' params (compose.ts's foot reads them there): the
 * units wanted, the key's reset count the process last saw ('' for none), the units it spent locally since
 * its previous round trip.
 */
export const FETCH_EXTRAS = { want: 0, seen: 1, spent: 2 } as const

/** Where each of a return's extras sits: when its units were counted (Redis ms), then as a fetch's. */
export const RETURN_EXTRAS = { countedAt: 0, seen: 1, spent: 2 } as const

/** A fetch's extras, in `FETCH_EXTRAS` order. */
export function fetchExtras(e: { want: number; seen: string; spent: number }): string[] {
  const out = new Array<string>(3)
  out[FETCH_EXTRAS.want] = String(e.want)
  out[FETCH_EXTRAS.seen] = e.seen
  out[FETCH_EXTRAS.spent] = String(e.spent)
  return out
}

/** A return's extras, in `RETURN_EXTRAS` order. */
export function returnExtras(e: { countedAt: number; seen: string; spent: number }): string[] {
  const out = new Array<string>(3)
  out[RETURN_EXTRAS.countedAt] = String(e.countedAt)
  out[RETURN_EXTRAS.seen] = e.seen
  out[RETURN_EXTRAS.spent] = String(e.spent)
  return out
}

/** Where a key's block lives: beside its rule keys, in the same hash slot. */
const BLOCK_SUFFIX = '!block'
/** Where a key's reset count lives (see reset.lua): beside its rule keys, in the same hash slot. */
const RESETS_SUFFIX = '!resets'

/** A block policy as the script reads it (ARGV[5]). */
const blockArgs = new WeakMap<BlockPolicy, string>()
function blockArg(block: BlockPolicy | undefined): string {
  if (block === undefined) return ''
  let arg = blockArgs.get(block)
  if (arg === undefined) {
    arg = `${block.ms}:${block.factor}:${block.maxMs}:${block.forgetMs}:${block.keep}`
    blockArgs.set(block, arg)
  }
  return arg
}

/** One call as it goes out: the script's KEYS and ARGV (the deadline set by `withDeadline` when sent). */
export interface Call {
  readonly keys: readonly string[]
  readonly args: string[]
  /** Where in `args` the deadline goes: the head's place (ARGV[4]) when not given. */
  readonly deadlineAt?: number
}

/** The rules a call applies, as the wire carries them. */
export interface RulesOnWire {
  /** Per rule its state identity (`rule.id`), appended to the key base. */
  readonly ids: readonly string[]
  /** Every rule's params, in order (`ruleArgs`). */
  readonly params: readonly string[]
}

/**
 * Encodes one call on the key whose base (`keyBase`) is `base`: `block` when the call reads or may begin a
 * block, `withResets` for a batch's acts, `extras` after the params (see the module comment). `cost`: one
 * for every rule, or one per rule (`Costs`: after the params, before the extras; the script is then its
 * act's per-rule one, compose.ts `footOf`).
 */
export function encode(
  base: string,
  rules: RulesOnWire,
  now: number | undefined,
  mode: Mode,
  cost: number | Costs,
  block?: BlockPolicy,
  withResets = false,
  extras: readonly string[] = NONE,
): Call {
  const n = rules.ids.length
  const keys = new Array<string>(n)
  for (let i = 0; i < n; i++) keys[i] = base + rules.ids[i]
  if (withResets) keys.push(base + RESETS_SUFFIX)
  if (block !== undefined) keys.push(base + BLOCK_SUFFIX)
  const params = rules.params
  const costs = typeof cost === 'number' ? NONE : cost
  const args = new Array<string>(HEAD_ARGS + params.length + costs.length + extras.length)
  args[0] = now === undefined ? '' : String(now)
  args[1] = mode
  args[2] = typeof cost === 'number' ? String(cost) : '0'
  args[3] = ''
  args[4] = blockArg(block)
  let at = HEAD_ARGS
  for (let i = 0; i < params.length; i++) args[at++] = params[i]!
  for (let i = 0; i < costs.length; i++) args[at++] = String(costs[i])
  for (let i = 0; i < extras.length; i++) args[at++] = extras[i]!
  return { keys, args, deadlineAt: HEAD_DEADLINE }
}

const NONE: readonly never[] = []

/**
 * A straight-down consume (src/scripts/*-consume.lua: one fixedWindow, slidingLog or concurrency rule, a
 * cost above 0, no block) on the key whose base is `base`. KEYS: the rule's key. ARGV: the deadline (set by
 * `withDeadline`), the rule's params (limit, then windowMs or leaseMs), a concurrency rule's lease id, then
 * the cost when it is not 1, then the caller's ms when its clock is used (the cost is then sent whatever it
 * is); `lease` is given for a concurrency rule, and only then. The head's mode and block say nothing here
 * (a consume, no block), and every argument costs the client work of its own, whatever its length (ioredis
 * copies, measures and writes each one apart: about 1,400 instructions). So the common call sends three,
 * or four with a lease, as a script written for the one job would (bench/redis-client-instructions.mjs).
 */
export function encodeConsume(
  base: string,
  rules: RulesOnWire,
  now: number | undefined,
  cost: number,
  lease?: string,
): Call {
  const params = rules.params
  const keys = [base + rules.ids[0]!]
  const args = lease === undefined ? ['', params[0]!, params[1]!] : ['', params[0]!, params[1]!, lease]
  if (cost !== 1 || now !== undefined) args.push(String(cost))
  if (now !== undefined) args.push(String(now))
  return { keys, args, deadlineAt: 0 }
}

/**
 * A batch of releases (compose.ts's `releasesScript`), built up one lease at a time by `addRelease`: KEYS
 * each lease's rule key; ARGV the head (mode 'release', no cost), then the leases' ids, in the order of their
 * keys, as one JSON array: one argument rather than one per lease, which the client encodes and Redis reads
 * each on its own (a batch carries up to 64). A release reads no clock. The reply is `{ 'ok', serverNow }`.
 */
export interface ReleasesCall {
  readonly keys: string[]
  readonly leases: string[]
}

export function releasesCall(): ReleasesCall {
  return { keys: [], leases: [] }
}

/**
 * Adds the release of `lease` on `key` to a batch. The script reads the ids with `cjson`, which refuses an
 * escaped lone surrogate: such an id was never sent by a consume (ids are ASCII), so `holdable` says to
 * leave it out, its release changing nothing.
 */
export function addRelease(call: ReleasesCall, key: string, lease: string): void {
  call.keys.push(key)
  call.leases.push(lease)
}

/** Whether `lease` can be held: not an id with a lone surrogate, which no consume sent (see `addRelease`). */
export function holdable(lease: string): boolean {
  return !LONE_SURROGATE.test(lease)
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A batch of releases as it goes out. */
export function releasesWire(call: ReleasesCall): Call {
  return { keys: call.keys, args: ['', 'release', '0', '', '', JSON.stringify(call.leases)] }
}

/** Sets the call's deadline in Redis's ms (ARGV[4], or where the call says); 0 when Redis's clock is not known yet. */
export function withDeadline(call: Call, deadline: number | undefined): Call {
  call.args[call.deadlineAt ?? HEAD_DEADLINE] = deadline === undefined ? '0' : String(Math.floor(deadline))
  return call
}

/** A reset's keys: every rule key, the block, and the reset count last (reset.lua bumps it). */
export function resetKeys(base: string, ids: readonly string[]): string[] {
  const keys = ids.map((id) => base + id)
  keys.push(base + BLOCK_SUFFIX, base + RESETS_SUFFIX)
  return keys
}

/** True for a script's answer that it started after its deadline and counted nothing. */
export function isLate(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 2 && String(reply[0]) === 'late'
}

/** Redis's ms, which every reply ends with; undefined when the reply is not one of the scripts'. */
export function serverNowOf(reply: unknown): number | undefined {
  if (!Array.isArray(reply) || reply.length < 2) return undefined
  const serverNow = numberOf(reply[reply.length - 1])
  return Number.isInteger(serverNow) ? serverNow : undefined
}

export function unexpectedReply(): StoreError {
  return new StoreError(ErrorCode.STORE_ERROR, 'Redis answered the sluice script with an unexpected reply.')
}

/** A reply's number: a number (a bigint from GLIDE), or a string of one; NaN for anything else ('', null). */
function numberOf(value: unknown): number {
  if (typeof value === 'number') return value
  if (typeof value === 'bigint') return Number(value)
  return typeof value === 'string' && value !== '' ? Number(value) : Number.NaN
}

/** A reply's count or ms: finite and not below 0, else the reply is not one of the scripts'. */
function amountOf(value: unknown): number {
  const n = numberOf(value)
  if (!(n >= 0 && n < Number.POSITIVE_INFINITY)) throw unexpectedReply()
  return n
}

/**
 * The script's reply as RuleDecisions, and the ms of the block the call began (0 for none). `limits`: each
 * rule's limit (or capacity), as the decisions report it. Data from Redis: a reply of another shape, an
 * `allowed` other than 0 or 1, or a count or ms that is not a finite number >= 0 (a block's ms: > 0)
 * throws `unexpectedReply()`, and the call fails as any store failure does (`onStoreError`). `lease`: the
 * lease id a consume sent (a plan with a concurrency rule), which a short reply stands for.
 */
export function decode(
  limits: readonly number[],
  rules: readonly Rule[],
  reply: unknown[],
  fetch: boolean,
  lease?: string,
): [StoreAnswer, number] {
  const n = rules.length
  if (reply.length === 3 && String(reply[0]) === 'blocked') {
    const left = amountOf(reply[1])
    if (left === 0) throw unexpectedReply()
    return [blockedAnswer(rules, left), 0]
  }
  if (reply.length === ADMITTED_REPLY && n === 1 && !fetch)
    return [[admitted(limits[0]!, rules[0]!, reply, lease)], 0]
  if (reply.length !== n * REPLY_FIELDS + (fetch ? 4 : 2)) throw unexpectedReply()
  const out = new Array<RuleDecision>(n)
  for (let i = 0; i < n; i++) {
    const o = i * REPLY_FIELDS
    const allowed = numberOf(reply[o])
    if (allowed !== 0 && allowed !== 1) throw unexpectedReply()
    const waitMs = amountOf(reply[o + 4])
    const remaining = amountOf(reply[o + 1])
    const resetMs = amountOf(reply[o + 2])
    const retryAfterMs = amountOf(reply[o + 3])
    const mark = reply[o + 5]
    const rule = rules[i]!
    if (rule.kind === 'concurrency') {
      const lease = mark !== '' && mark != null ? String(mark) : undefined
      const limit = limits[i]!
      out[i] = leaseDecision(rule, allowed === 1, limit, remaining, resetMs, retryAfterMs, waitMs, lease)
      continue
    }
    const d: RuleDecision = {
      rule: rule.name,
      allowed: allowed === 1,
      limit: limits[i]!,
      remaining,
      resetMs,
      retryAfterMs,
      waitMs,
      windowSeconds: rule.policyWindowSeconds,
    }
    out[i] = waitMs > 0 && mark !== '' && mark != null ? { ...d, queue: String(mark) } : d
  }
  return [out, amountOf(reply[n * REPLY_FIELDS])]
}

/**
 * A concurrency rule's decision, with its lease when it has one, each written out: a copy of a plain
 * decision spread into another costs more than decoding the rest of the reply.
 */
function leaseDecision(
  rule: Rule,
  allowed: boolean,
  limit: number,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  waitMs: number,
  lease: string | undefined,
): RuleDecision {
  const windowSeconds = rule.policyWindowSeconds
  const unit = 'concurrent-requests'
  if (lease === undefined) {
    return { rule: rule.name, allowed, limit, remaining, resetMs, retryAfterMs, waitMs, windowSeconds, unit }
  }
  return {
    rule: rule.name,
    allowed,
    limit,
    remaining,
    resetMs,
    retryAfterMs,
    waitMs,
    windowSeconds,
    unit,
    lease,
  }
}

/**
 * The short reply's decision (`ADMITTED_REPLY`): `allowed` must be 1. A concurrency rule's admitted call
 * holds the lease its consume sent (`lease`): without one, the reply is not one of the scripts'.
 */
function admitted(limit: number, rule: Rule, reply: unknown[], lease: string | undefined): RuleDecision {
  if (numberOf(reply[0]) !== 1) throw unexpectedReply()
  if (rule.kind === 'concurrency') {
    if (lease === undefined || lease === '') throw unexpectedReply()
    return leaseDecision(rule, true, limit, amountOf(reply[1]), amountOf(reply[2]), 0, 0, lease)
  }
  return {
    rule: rule.name,
    allowed: true,
    limit,
    remaining: amountOf(reply[1]),
    resetMs: amountOf(reply[2]),
    retryAfterMs: 0,
    waitMs: 0,
    windowSeconds: rule.policyWindowSeconds,
  }
}

/**
 * What a fetch's reply adds before Redis's ms: the units it took (a whole number from 0 to the `want` it
 * asked for) and the key's reset count (a whole number); else it throws `unexpectedReply()`.
 */
export function fetchedOf(
  reply: unknown[],
  want: number,
): { taken: number; resets: string; serverNow: number } {
  const n = reply.length
  const taken = numberOf(reply[n - 3])
  const resets = numberOf(reply[n - 2])
  const serverNow = numberOf(reply[n - 1])
  if (!(Number.isInteger(taken) && taken >= 0 && taken <= want)) throw unexpectedReply()
  if (!(Number.isInteger(resets) && resets >= 0) || !Number.isInteger(serverNow)) throw unexpectedReply()
  return { taken, resets: String(reply[n - 2]), serverNow }
}

/** Checks the reply of an act that only changes the state (`{ 'ok', serverNow }`); else it throws. */
export function expectOk(reply: unknown[]): undefined {
  if (reply.length !== 2 || String(reply[0]) !== 'ok' || !Number.isInteger(numberOf(reply[1])))
    throw unexpectedReply()
  return undefined
}
