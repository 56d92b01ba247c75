/**
 * @module The script for one sequence of rule kinds and one act: the prelude, the chunk of each kind it
 * uses, and a foot written here that calls each rule's `<kind>Decide`, then (all admitted, consuming) each
 * `<kind>Admit`, and replies six values per rule, the block begun, then the server's ms; or each rule's
 * `<kind>Refund` or `<kind>Penalize`.
 *
 * Over 300 lines: the foot of each act is written here, one function each, beside the others, so the
 * reply layout (wire.ts) has one Lua writer.
 *
 * The foot is straight-line code, generated once per sequence and kept: a call runs no loop over a table
 * of rules and creates no closure or table per rule. Each rule's params are read from ARGV in place
 * (after now, mode, cost and deadline, in the order of the rules).
 */
import type { RuleKind as Kind } from '@sluice/core'
import { type Script, script } from './client.ts'
import { REDIS_KINDS } from './kinds.ts'
import { PRELUDE_LUA } from './scripts.generated.ts'
import { FETCH_EXTRAS, HEAD_ARGS, PARAMS, REPLY_FIELDS, RETURN_EXTRAS } from './wire.ts'

/** Lua reading a rule's params from ARGV: `tonumber(ARGV[first])`, `tonumber(ARGV[first + 1])`, ... */
function paramsOf(kind: Kind, first: number): string {
  return Array.from({ length: PARAMS[kind] }, (_, j) => `tonumber(ARGV[${first + j}])`).join(', ')
}

/**
 * What a script does: decide a call (consume or peek), or adjust the state (`Store.adjust`); or, for a
 * store that prefetches, consume a batch of units (`fetch`) and return unspent ones (`return`).
 */
export type Act =
  | 'apply'
  | 'penalize'
  | 'settle'
  | 'refund'
  | 'refundCall'
  | 'unqueue'
  | 'release'
  | 'fetch'
  | 'return'

/**
 * A fetch takes no more than this share of what any of its rules has left: 1/16 of it, rounded down, so
 * from 31 units left a batch is the call's own cost and every call is decided in Redis.
 */
export const FETCH_SHARE = 16

/**
 * The Lua after the chunks. `apply`: decide every rule, admit all or none, begin a block when a consume is
 * denied (with a `block`), reply `REPLY_FIELDS` values per rule, then the block begun (its ms, or 0), then
 * the server's ms; a blocked key replies `{ 'blocked', ms left, server ms }` before any rule is read.
 * `penalize`: count the cost on every rule, then answer as a peek of cost 1 would. `settle`: each rule by its
 * own signed amount (its per-rule cost, below), each rule's mark after them: below 0, `<kind>RefundCall` of
 * that many units by the rule's mark (none without a mark); above 0, `<kind>Penalize`; reading nothing
 * else. `settle`, `refund`, `refundCall` (one call's units, each rule's mark after the params), `unqueue`:
 * change the state, reply `{ 'ok', server ms }`. `fetch`: as `apply` consuming, for a cost raised to the
 * batch (the units wanted, `FETCH_EXTRAS.want`, cut to `1 / FETCH_SHARE` of every rule's remaining,
 * at least the call's cost; a fetch ahead has cost 0 and takes 2 units or more, or none, counting
 * nothing), replying the batch taken and the key's reset count before the server's ms. `return`: each
 * rule's `<kind>Return` of units counted at `RETURN_EXTRAS.countedAt`.
 *
 * Resets under prefetch: `fetch` and `return` also get the key's reset count key (after the rule keys,
 * before the block key) and, among their extras (wire.ts), the reset count the process last saw and the
 * units it spent locally since its previous round trip. When the count has moved (another process
 * reset the key), those units are counted in the new state, as a penalty counts them, and a `return`
 * gives nothing back: its units were counted in the state the reset removed.
 *
 * Per-rule costs (`perRule`; a settle's always): each rule's own cost, in ARGV right after the params, one
 * per rule in order, in place of the head's cost; the act's extras follow them. Not for `fetch` and
 * `return` (prefetch serves only calls of one cost).
 */
export function footOf(
  kinds: readonly Kind[],
  act: Act = 'apply',
  withBlock = true,
  perRule = false,
): string {
  const f = feetOf(kinds, perRule || act === 'settle')
  return periodChecks(f) + actFoot(f, act, withBlock)
}

/**
 * Before anything else, each rule whose params carry a period (a quota: `period` in its `REDIS_KINDS` entry)
 * checks that the script's now lies in it; when not, the script changes nothing and answers its now, for
 * which the client computes the periods again (wire.ts `writePeriods`).
 */
function periodChecks({ kinds, params }: Rules): string {
  let lines = ''
  kinds.forEach((kind, i) => {
    if (REDIS_KINDS[kind].period) {
      lines += `if ${kind}Outside(now, ${params[i]}) then return { 'period', now, serverNow } end\n`
    }
  })
  return lines
}

function actFoot(f: Rules, act: Act, withBlock: boolean): string {
  const kinds = f.kinds
  switch (act) {
    case 'refund':
      return [
        ...f.head,
        ...kinds.map((kind, i) => `${kind}Refund(KEYS[${i + 1}], now, ${f.costs[i]}, ${f.params[i]})`),
        OK,
      ].join('\n')
    case 'refundCall':
      return refundCallFoot(f)
    case 'return':
      return returnFoot(f)
    case 'settle':
      return [...f.head, ...settleLines(f), OK].join('\n')
    case 'unqueue':
    case 'release':
      return markFoot(f, act)
    default:
      return decideFoot(f, act, withBlock)
  }
}

/**
 * What every foot reads: the kinds, each rule's params and cost as Lua, the lines that read per-rule costs
 * (none for one cost), and the ARGV index of the act's extras.
 */
interface Rules {
  readonly kinds: readonly Kind[]
  readonly params: readonly string[]
  /** Each rule's cost: `cost` (the head's), or its own local (`cost1`, `cost2`, ...). */
  readonly costs: readonly string[]
  /** What the foot runs first: the per-rule costs read into their locals. */
  readonly head: readonly string[]
  /** The first ARGV after the rules' params (and their per-rule costs). */
  readonly extras: number
}

function feetOf(kinds: readonly Kind[], perRule: boolean): Rules {
  const params: string[] = []
  let argv = HEAD_ARGS + 1
  for (const kind of kinds) {
    params.push(paramsOf(kind, argv))
    argv += PARAMS[kind]
  }
  if (!perRule) return { kinds, params, costs: kinds.map(() => 'cost'), head: [], extras: argv }
  const costs = kinds.map((_, i) => `cost${i + 1}`)
  const values = kinds.map((_, i) => `tonumber(ARGV[${argv + i}])`)
  return {
    kinds,
    params,
    costs,
    head: [`local ${costs.join(', ')} = ${values.join(', ')}`],
    extras: argv + kinds.length,
  }
}

const OK = "return { 'ok', serverNow }"

/**
 * Each rule's mark (the ms that names the call in its state, see @sluice/core's refundMark) follows the
 * params; '' for a rule that gives nothing back.
 */
function refundCallFoot({ kinds, params, costs, head, extras }: Rules): string {
  return [
    ...head,
    ...kinds.map(
      (kind, i) =>
        `if ARGV[${extras + i}] ~= '' then ${kind}RefundCall(KEYS[${i + 1}], now, ${costs[i]}, ${params[i]}, tonumber(ARGV[${extras + i}])) end`,
    ),
    OK,
  ].join('\n')
}

/**
 * A batch's acts: units spent after another process's reset are counted in the new state (see `footOf`).
 * `seen` and `spent`: the ARGV of the reset count the process last saw and of the units it spent since.
 */
function recountLines({ kinds, params }: Rules, seen: number, spent: number): string[] {
  return [
    `local resets = redis.call('GET', KEYS[${kinds.length + 1}]) or '0'`,
    `local wasReset = ARGV[${seen}] ~= '' and ARGV[${seen}] ~= resets`,
    `if wasReset and tonumber(ARGV[${spent}]) > 0 then`,
    ...kinds.map(
      (kind, i) => `  ${kind}Penalize(KEYS[${i + 1}], now, tonumber(ARGV[${spent}]), ${params[i]})`,
    ),
    'end',
  ]
}

function returnFoot(rules: Rules): string {
  const { kinds, params, extras } = rules
  return [
    `local at = tonumber(ARGV[${extras + RETURN_EXTRAS.countedAt}])`,
    ...recountLines(rules, extras + RETURN_EXTRAS.seen, extras + RETURN_EXTRAS.spent),
    "if wasReset then return { 'ok', serverNow } end",
    ...kinds.map((kind, i) => `${kind}Return(KEYS[${i + 1}], now, cost, ${params[i]}, at)`),
    OK,
  ].join('\n')
}

/** Each rule's mark (its queue mark, its lease) follows the params; '' for a rule without one. */
function markFoot({ kinds, params, costs, head, extras }: Rules, act: 'unqueue' | 'release'): string {
  const lines: string[] = [...head]
  kinds.forEach((kind, i) => {
    const mark = `ARGV[${extras + i}]`
    const held = REDIS_KINDS[kind].mark
    if (act === 'unqueue' && held === 'queue') {
      lines.push(
        `if ${mark} ~= '' then ${kind}Unqueue(KEYS[${i + 1}], now, ${costs[i]}, ${params[i]}, ${mark}) end`,
      )
    } else if (act === 'release' && held === 'lease') {
      lines.push(`if ${mark} ~= '' then ${kind}Release(KEYS[${i + 1}], ${mark}) end`)
    }
  })
  lines.push(OK)
  return lines.join('\n')
}

/** The foot of the acts that decide: `apply`, `penalize` (then a peek of cost 1) and `fetch`. */
function decideFoot(rules: Rules, act: Act, withBlock: boolean): string {
  const head = decideHead(rules, act, withBlock)
  // A fetch replies the units it took and the key's reset count before the server's ms.
  const tail = act === 'fetch' ? 'cost, resets, serverNow' : 'serverNow'
  return rules.kinds.length === 1 && rules.head.length === 0
    ? oneRuleFoot(rules, act, withBlock, head, tail)
    : severalRulesFoot(rules, act, withBlock, head, tail)
}

/** `settle`: each rule by its signed amount (its per-rule cost), its mark after them; 0 leaves it alone. */
function settleLines({ kinds, params, costs, extras }: Rules): string[] {
  const lines: string[] = []
  kinds.forEach((kind, i) => {
    const mark = `ARGV[${extras + i}]`
    const amount = costs[i]!
    lines.push(
      `if ${amount} > 0 then ${kind}Penalize(KEYS[${i + 1}], now, ${amount}, ${params[i]})`,
      `elseif ${amount} < 0 and ${mark} ~= '' then ${kind}RefundCall(KEYS[${i + 1}], now, -${amount}, ${params[i]}, tonumber(${mark})) end`,
    )
  })
  return lines
}

function decideHead(rules: Rules, act: Act, withBlock: boolean): string[] {
  const { kinds, params, costs, extras } = rules
  const head: string[] = [...rules.head]
  if (act === 'fetch') {
    head.push(...recountLines(rules, extras + FETCH_EXTRAS.seen, extras + FETCH_EXTRAS.spent))
  }
  if (act === 'penalize') {
    kinds.forEach((kind, i) => {
      head.push(`${kind}Penalize(KEYS[${i + 1}], now, ${costs[i]}, ${params[i]})`)
    })
    // What a peek of cost 1 answers right after (the mode is not '1': nothing is admitted).
    head.push('cost = 1')
  }
  if (withBlock) {
    head.push(
      'do',
      '  local left = blockLeft()',
      "  if left > 0 then return { 'blocked', left, serverNow } end",
      'end',
    )
  }
  if (act === 'fetch') {
    // The batch: what was wanted, cut to a share of what each rule has left, never below the call's cost.
    head.push(`local want = tonumber(ARGV[${extras + FETCH_EXTRAS.want}])`, 'do', '  local _, r')
    kinds.forEach((kind, i) => {
      head.push(
        `  _, r = ${kind}Decide(KEYS[${i + 1}], now, 0, ${params[i]})`,
        `  r = floor(r / ${FETCH_SHARE})`,
        '  if r < want then want = r end',
      )
    })
    // A fetch ahead (cost 0) takes 2 units or none: from 31 left, every unit is counted for its own call.
    head.push(
      '  if want > cost and (cost > 0 or want > 1) then cost = want end',
      'end',
      'if cost == 0 then consume = false end',
    )
  }
  // A call with a concurrency rule brings its lease id (made by the store) after the params (and the costs).
  if (kinds.some((kind) => REDIS_KINDS[kind].mark === 'lease')) head.push(`local lease = ARGV[${extras}]`)
  return head
}

/** Rule `i`'s admit, its mark (a leaky bucket's queue mark, a lease) kept in `mark` when it has one. */
function admitOf(
  rules: Rules,
  i: number,
  indent: string,
  mark: string,
  waitMs: string,
  cost = 'cost',
): string[] {
  const kind = rules.kinds[i]!
  const call = `${kind}Admit(KEYS[${i + 1}], now, ${cost}, ${rules.params[i]}, ${stateOf(rules.kinds.length, i)}`
  const held = REDIS_KINDS[kind].mark
  if (held === 'queue')
    return [`${indent}local m = ${call})`, `${indent}if ${waitMs} > 0 then ${mark} = m end`]
  if (held === 'lease') return [`${indent}${call}, lease)`, `${indent}${mark} = lease`]
  return [`${indent}${call})`]
}

function oneRuleFoot(rules: Rules, act: Act, withBlock: boolean, head: string[], tail: string): string {
  const kind = rules.kinds[0]!
  const params = rules.params[0]
  const decide = `${kind}Decide(KEYS[1], now, cost, ${params})`
  // A kind with `<kind>Consume` decides and admits a consume of a cost above 0 in one go.
  const oneGo = act === 'apply' && REDIS_KINDS[kind].consumesInOneGo
  return [
    ...head,
    ...(oneGo
      ? [
          'local ok, remaining, resetMs, retryAfterMs, waitMs, a, b',
          'local counted = consume and cost > 0',
          `if counted then ok, remaining, resetMs, retryAfterMs, waitMs = ${kind}Consume(KEYS[1], now, cost, ${params})`,
          `else ok, remaining, resetMs, retryAfterMs, waitMs, a, b = ${decide} end`,
        ]
      : [`local ok, remaining, resetMs, retryAfterMs, waitMs, a, b = ${decide}`]),
    "local mark, blocked = '', 0",
    'if ok then',
    oneGo ? '  if consume and not counted then' : '  if consume then',
    ...admitOf(rules, 0, '    ', 'mark', 'waitMs'),
    '  end',
    `  return { 1, remaining, resetMs, retryAfterMs, waitMs, mark, blocked, ${tail} }`,
    'end',
    ...(withBlock
      ? [
          'if consume and block then',
          '  blocked = beginBlock()',
          '  if retryAfterMs < blocked then retryAfterMs = blocked end',
          'end',
        ]
      : []),
    `return { 0, remaining, resetMs, retryAfterMs, waitMs, '', blocked, ${tail} }`,
  ].join('\n')
}

/** Rule i (1-based) replies in out[6i - 5 .. 6i] and keeps what its admit needs in st[2i - 1], st[2i]. */
function severalRulesFoot(rules: Rules, act: Act, withBlock: boolean, head: string[], tail: string): string {
  const { kinds, params } = rules
  // A call decides at each rule's cost; a penalty's peek at cost 1 (`cost`, set in its head).
  const costOf = (i: number): string => (act === 'apply' ? rules.costs[i]! : 'cost')
  const F = REPLY_FIELDS
  const slots = kinds.flatMap(() => ['0', '0', '0', '0', '0', "''"]).join(', ')
  // The reply table is built at its full size, so its slots are an array from the start.
  const lines = [...head, `local out, st = { ${slots}, 0, ${tail} }, {}`, 'local admitted, ok = true, true']
  kinds.forEach((kind, index) => {
    const i = index + 1
    const o = index * F
    lines.push(
      `-- rule ${i}: ${kind}`,
      `ok, out[${o + 2}], out[${o + 3}], out[${o + 4}], out[${o + 5}], st[${2 * i - 1}], st[${2 * i}] = ` +
        `${kind}Decide(KEYS[${i}], now, ${costOf(index)}, ${params[index]})`,
      `if ok then out[${o + 1}] = 1 else out[${o + 1}] = 0; admitted = false end`,
    )
  })
  lines.push('if admitted then', '  if consume then')
  kinds.forEach((kind, index) => {
    const o = index * F
    // A queue mark's admit declares a local (`m`): each in a block of its own.
    const queue = REDIS_KINDS[kind].mark === 'queue'
    if (queue) lines.push('    do')
    lines.push(...admitOf(rules, index, '    ', `out[${o + 6}]`, `out[${o + 5}]`, costOf(index)))
    if (queue) lines.push('    end')
  })
  lines.push(
    '  end',
    'else',
    '  -- Nothing is counted: the rules that would have admitted the call report what they have left.',
    '  local _',
  )
  kinds.forEach((kind, index) => {
    const i = index + 1
    const o = index * F
    lines.push(
      `  if out[${o + 1}] == 1 then`,
      `    _, out[${o + 2}], out[${o + 3}] = ${kind}Decide(KEYS[${i}], now, 0, ${params[index]})`,
      `    out[${o + 4}], out[${o + 5}] = 0, 0`,
      '  end',
    )
  })
  if (withBlock) {
    lines.push('  if consume and block then', '    local blocked = beginBlock()')
    kinds.forEach((_, index) => {
      const o = index * F
      lines.push(`    if out[${o + 1}] == 0 and out[${o + 4}] < blocked then out[${o + 4}] = blocked end`)
    })
    lines.push(`    out[${kinds.length * F + 1}] = blocked`, '  end')
  }
  lines.push('end', 'return out')
  return lines.join('\n')
}

/** What rule `i` (0-based) of `n` hands its admit: `a, b` for one rule, its two `st` slots for several. */
function stateOf(n: number, i: number): string {
  return n === 1 ? 'a, b' : `st[${2 * i + 1}], st[${2 * i + 2}]`
}

/** One script per sequence of kinds; a rules function could ask for many, so the cache is bounded. */
const scripts = new Map<string, Script>()
const MAX_SCRIPTS = 256

/**
 * The script for rules of these kinds, in this order, doing `act`; `withBlock` when the call carries a block
 * policy (a script without one neither reads nor begins a block); `perRule` when each rule has a cost of its
 * own (see `footOf`).
 */
export function scriptFor(
  kinds: readonly Kind[],
  act: Act = 'apply',
  withBlock = true,
  perRule = false,
): Script {
  const id = `${act}:${withBlock ? 'b' : ''}${perRule ? 'c' : ''}:${kinds.join(',')}`
  let s = scripts.get(id)
  if (s === undefined) {
    const chunks = [PRELUDE_LUA]
    for (const kind of new Set(kinds)) chunks.push(REDIS_KINDS[kind].chunk)
    const foot = footOf(kinds, act, withBlock, perRule)
    s = script(`${withoutUnused(chunks.join('\n'), foot)}\n${foot}`)
    if (scripts.size >= MAX_SCRIPTS) scripts.clear()
    scripts.set(id, s)
  }
  return s
}

let releases: Script | undefined

/**
 * The script of a batch of releases (wire.ts `releasesWire`): concurrency.lua's `concurrencyRelease`, the
 * code a single release runs, for each lease in turn (`KEYS[i]`, the i-th id of the JSON array after the
 * head), then `{ 'ok', serverNow }`. A script that starts after the batch's deadline ends no lease (the
 * prelude's head).
 */
export function releasesScript(): Script {
  if (releases === undefined) {
    const foot = [
      `local leases = cjson.decode(ARGV[${HEAD_ARGS + 1}])`,
      'for i = 1, #KEYS do',
      '  concurrencyRelease(KEYS[i], leases[i])',
      'end',
      OK,
    ].join('\n')
    releases = script(`${withoutUnused(`${PRELUDE_LUA}\n${REDIS_KINDS.concurrency.chunk}`, foot)}\n${foot}`)
  }
  return releases
}

/** The straight-down consume scripts (see `consumeScriptFor`), made once. */
const consumes = new Map<Kind, Script>()

/**
 * For rules that are one rule of a kind with a consume written straight down (src/scripts/*-consume.lua),
 * that script: a consume of a cost above 0 without a block, that makes no closure and calls no Lua function
 * (the composed script spends most of Redis's time per call on those). It answers as the `apply` script
 * does (an admitted call may get the short reply), and reads the short call (wire.ts `encodeConsume`).
 * Undefined for any other rules.
 */
export function consumeScriptFor(kinds: readonly Kind[]): Script | undefined {
  if (kinds.length !== 1) return undefined
  const kind = kinds[0]!
  let s = consumes.get(kind)
  if (s === undefined) {
    const lua = REDIS_KINDS[kind].consume
    if (lua === undefined) return undefined
    s = script(lua)
    consumes.set(kind, s)
  }
  return s
}

/**
 * The prelude and chunks without the functions the foot never reaches. Redis runs a script's body on every
 * call, and each `local function` there makes a closure: a fixedWindow consume needs 3 of the 12 its chunk
 * and the prelude define. A function is a top-level `local function <name>(` line through the next line that
 * is `end` alone, or that line alone when it ends in `end` (the chunks are written so); it is kept when the foot, a top-level statement or a kept
 * function names it.
 */
export function withoutUnused(lua: string, foot: string): string {
  const lines = lua.split('\n')
  const functions = new Map<string, { from: number; to: number }>()
  for (let i = 0; i < lines.length; i++) {
    const m = /^local function (\w+)\(/.exec(lines[i]!)
    if (m === null) continue
    let to = i
    // A one-line function (`local function f() end`) ends on its own line.
    if (!/\bend$/.test(lines[i]!)) while (lines[to] !== 'end') to++
    functions.set(m[1]!, { from: i, to })
    i = to
  }
  const inside = new Set<number>()
  for (const f of functions.values()) for (let i = f.from; i <= f.to; i++) inside.add(i)
  const kept = new Set<string>()
  const pending = [foot, lines.filter((_, i) => !inside.has(i)).join('\n')]
  while (pending.length > 0) {
    const text = pending.pop()!
    for (const [name, f] of functions) {
      if (kept.has(name) || !new RegExp(`\\b${name}\\b`).test(text)) continue
      kept.add(name)
      pending.push(lines.slice(f.from + 1, f.to + 1).join('\n'))
    }
  }
  const dropped = new Set<number>()
  for (const [name, f] of functions) {
    if (kept.has(name)) continue
    for (let i = f.from; i <= f.to; i++) dropped.add(i)
  }
  return lines.filter((_, i) => !dropped.has(i)).join('\n')
}
