/**
 * @module The script for one sequence of rule kinds: the prelude, the chunk of each kind it uses, and a
 * foot written here that calls each rule's `<kind>Decide`, then (all admitted, consuming) each
 * `<kind>Admit`, and replies five integers per rule, then the server's ms.
 *
 * The foot is straight-line code, generated once per sequence and kept: a call runs no loop over a table
 * of rules and creates no closure or table per rule. Each rule's params are read from ARGV in place
 * (after now, mode, cost and deadline, in the order of the rules).
 */
import type { Rule } from '@sluice/core'
import { type Script, script } from './script-runner.ts'
import { PRELUDE_LUA, RULE_LUA } from './scripts.generated.ts'

type Kind = Rule['kind']

/** ARGV before the rules' params: now, mode, cost, deadline (see prelude.lua). */
export const HEAD_ARGS = 4

/** How many params each kind reads from ARGV (see `ruleArgs`). */
const PARAMS: { readonly [K in Kind]: number } = {
  fixedWindow: 2,
  slidingLog: 2,
  slidingWindow: 3,
  tokenBucket: 2,
  leakyBucket: 3,
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
  }
}

/** Lua reading a rule's params from ARGV: `tonumber(ARGV[first])`, `tonumber(ARGV[first + 1])`, ... */
function paramsOf(kind: Kind, first: number): string {
  return Array.from({ length: PARAMS[kind] }, (_, j) => `tonumber(ARGV[${first + j}])`).join(', ')
}

/**
 * The Lua after the chunks: decide every rule, admit all or none, reply. A one-rule call (the common case)
 * keeps its results in locals. With several rules, results go straight into the reply table and what
 * admit needs into one `st` table, so the foot declares no local per rule (Lua allows 200 locals per
 * function; a call may have any number of rules).
 */
export function footOf(kinds: readonly Kind[]): string {
  if (kinds.length === 1) {
    const params = paramsOf(kinds[0]!, HEAD_ARGS + 1)
    return [
      `local ok, remaining, resetMs, retryAfterMs, waitMs, a, b = ${kinds[0]}Decide(KEYS[1], now, cost, ${params})`,
      `if ok and consume then ${kinds[0]}Admit(KEYS[1], now, cost, ${params}, a, b) end`,
      'if ok then return { 1, remaining, resetMs, retryAfterMs, waitMs, serverNow } end',
      'return { 0, remaining, resetMs, retryAfterMs, waitMs, serverNow }',
    ].join('\n')
  }
  // Rule i (1-based) replies in out[5i - 4 .. 5i] and keeps what its admit needs in st[2i - 1], st[2i].
  const params: string[] = []
  let argv = HEAD_ARGS + 1
  for (const kind of kinds) {
    params.push(paramsOf(kind, argv))
    argv += PARAMS[kind]
  }
  const zeros = kinds.flatMap(() => [0, 0, 0, 0, 0]).join(', ')
  // The reply table is built at its full size, so its slots are an array from the start.
  const lines = [`local out, st = { ${zeros}, serverNow }, {}`, 'local admitted, ok = true, true']
  kinds.forEach((kind, index) => {
    const i = index + 1
    const o = index * 5
    lines.push(
      `-- rule ${i}: ${kind}`,
      `ok, out[${o + 2}], out[${o + 3}], out[${o + 4}], out[${o + 5}], st[${2 * i - 1}], st[${2 * i}] = ` +
        `${kind}Decide(KEYS[${i}], now, cost, ${params[index]})`,
      `if ok then out[${o + 1}] = 1 else out[${o + 1}] = 0; admitted = false end`,
    )
  })
  lines.push('if admitted then', '  if consume then')
  kinds.forEach((kind, index) => {
    const i = index + 1
    lines.push(`    ${kind}Admit(KEYS[${i}], now, cost, ${params[index]}, st[${2 * i - 1}], st[${2 * i}])`)
  })
  lines.push(
    '  end',
    'else',
    '  -- Nothing is counted: the rules that would have admitted the call report what they have left.',
    '  local _',
  )
  kinds.forEach((kind, index) => {
    const i = index + 1
    const o = index * 5
    lines.push(
      `  if out[${o + 1}] == 1 then`,
      `    _, out[${o + 2}], out[${o + 3}] = ${kind}Decide(KEYS[${i}], now, 0, ${params[index]})`,
      `    out[${o + 4}], out[${o + 5}] = 0, 0`,
      '  end',
    )
  })
  lines.push('end', 'return out')
  return lines.join('\n')
}

/** One script per sequence of kinds; a rules function could ask for many, so the cache is bounded. */
const scripts = new Map<string, Script>()
const MAX_SCRIPTS = 256

/** The script for rules of these kinds, in this order. */
export function scriptFor(kinds: readonly Kind[]): Script {
  const id = kinds.join(',')
  let s = scripts.get(id)
  if (s === undefined) {
    const chunks = [PRELUDE_LUA]
    for (const kind of new Set(kinds)) chunks.push(RULE_LUA[kind])
    chunks.push(footOf(kinds))
    s = script(chunks.join('\n'))
    if (scripts.size >= MAX_SCRIPTS) scripts.clear()
    scripts.set(id, s)
  }
  return s
}
