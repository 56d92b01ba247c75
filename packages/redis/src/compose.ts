/**
 * @module The script for one sequence of rule kinds: the prelude, the chunk of each kind it uses, and a
 * foot written here that calls each rule's `<kind>Decide`, then (all admitted, consuming) each
 * `<kind>Admit`, and replies five integers per rule.
 *
 * The foot is straight-line code, generated once per sequence and kept: a call runs no loop over a table
 * of rules and creates no closure or table per rule. Each rule's params are read from ARGV in place
 * (after now, mode and cost, in the order of the rules).
 */
import type { Rule } from '@sluice/core'
import { type Script, script } from './script-runner.ts'
import { PRELUDE_LUA, RULE_LUA } from './scripts.generated.ts'

type Kind = Rule['kind']

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

/**
 * The Lua after the chunks: decide every rule, admit all or none, reply. Results go straight into the
 * reply table and what admit needs into one `st` table, so the foot declares no local per rule (Lua
 * allows 200 locals per function; a call may have any number of rules).
 */
export function footOf(kinds: readonly Kind[]): string {
  if (kinds.length === 1) return footOfOne(kinds[0]!)
  // The reply table built at its full size, so its slots are an array from the start.
  const lines = [
    `local out, st = { ${Array(kinds.length * 5)
      .fill(0)
      .join(', ')} }, {}`,
    'local admitted, ok = true, true',
  ]
  // The call expression of rule `i` (1-based) with `cost`, its params read from ARGV in place.
  const calls: string[] = []
  let argv = 4
  for (const kind of kinds) {
    const i = calls.length + 1
    const params = Array.from({ length: PARAMS[kind] }, (_, j) => `tonumber(ARGV[${argv + j}])`)
    argv += params.length
    calls.push(`(KEYS[${i}], now, COST, ${params.join(', ')})`)
  }
  kinds.forEach((kind, index) => {
    const i = index + 1
    const o = index * 5
    lines.push(
      `-- rule ${i}: ${kind}`,
      `ok, out[${o + 2}], out[${o + 3}], out[${o + 4}], out[${o + 5}], st[${2 * i - 1}], st[${2 * i}] = ` +
        `${kind}Decide${calls[index]!.replace('COST', 'cost')}`,
      `if ok then out[${o + 1}] = 1 else out[${o + 1}] = 0; admitted = false end`,
    )
  })
  lines.push('if admitted then', '  if consume then')
  kinds.forEach((kind, index) => {
    const i = index + 1
    const call = calls[index]!.replace('COST', 'cost').replace(/\)$/, `, st[${2 * i - 1}], st[${2 * i}])`)
    lines.push(`    ${kind}Admit${call}`)
  })
  lines.push('  end')
  if (kinds.length > 1) {
    lines.push(
      'else',
      '  -- Nothing is counted: the rules that would have admitted the call report what they have left.',
      '  local _',
    )
    kinds.forEach((kind, index) => {
      const o = index * 5
      lines.push(
        `  if out[${o + 1}] == 1 then`,
        `    _, out[${o + 2}], out[${o + 3}] = ${kind}Decide${calls[index]!.replace('COST', '0')}`,
        `    out[${o + 4}], out[${o + 5}] = 0, 0`,
        '  end',
      )
    })
  }
  lines.push('end', 'return out')
  return lines.join('\n')
}

/** The foot for one rule, the common case: its results in locals, the reply built once at the end. */
function footOfOne(kind: Kind): string {
  const params = Array.from({ length: PARAMS[kind] }, (_, j) => `tonumber(ARGV[${4 + j}])`).join(', ')
  return [
    `local ok, remaining, resetMs, retryAfterMs, waitMs, a, b = ${kind}Decide(KEYS[1], now, cost, ${params})`,
    `if ok and consume then ${kind}Admit(KEYS[1], now, cost, ${params}, a, b) end`,
    'if ok then return { 1, remaining, resetMs, retryAfterMs, waitMs } end',
    'return { 0, remaining, resetMs, retryAfterMs, waitMs }',
  ].join('\n')
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
