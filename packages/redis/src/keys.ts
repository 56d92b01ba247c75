/**
 * @module Redis key layout: `<storePrefix>:<limiterPrefix>:{<escaped key>}:<rule.id>`.
 *
 * The braces make the user's key the hash tag, so all of one call's rule keys live in one cluster slot.
 * Prefixes cannot hold braces (both are validated), and the key is escaped so it cannot hold them either:
 * the first `{` and the first `}` always enclose exactly the escaped key, so no key can leave its hash tag
 * or reach into another prefix, and different keys never share a Redis key.
 */

const NEEDS_ESCAPE = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const ESCAPED = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/**
 * The key as it goes between the braces: `%`, `{` and `}` become `%25`, `%7B` and `%7D`, and a lone
 * UTF-16 surrogate (which UTF-8 cannot carry, so two of them would collide) becomes `%uXXXX`.
 * Everything else, NUL and unicode included, passes as is: Redis keys are binary safe.
 */
export function escapeKey(key: string): string {
  if (!NEEDS_ESCAPE.test(key)) return key
  return key.replace(ESCAPED, escapeChar)
}

function escapeChar(c: string): string {
  if (c === '%') return '%25'
  if (c === '{') return '%7B'
  if (c === '}') return '%7D'
  return `%u${c.charCodeAt(0).toString(16).toUpperCase()}`
}

/** The part of a rule key before the rule id: `<storePrefix>:<limiterPrefix>:{<escaped key>}:`. */
export function keyBase(storePrefix: string, limiterPrefix: string, key: string): string {
  return `${storePrefix}:${limiterPrefix}:{${escapeKey(key)}}:`
}
