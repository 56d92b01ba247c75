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

/** CRC16-CCITT (XMODEM), as Redis Cluster hashes keys: one entry per byte value. */
const CRC16 = new Uint16Array(256)
for (let b = 0; b < 256; b++) {
  let crc = b << 8
  for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  CRC16[b] = crc
}

/**
 * The cluster slot of a Redis key, as Redis computes it (CLUSTER KEYSLOT): CRC16 of its hash tag (the text
 * between the first `{` and the first `}` after it, when not empty), else of the whole key, in UTF-8, mod 16384.
 */
export function slotOf(key: string): number {
  let from = 0
  let to = key.length
  const open = key.indexOf('{')
  if (open !== -1) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) {
      from = open + 1
      to = close
    }
  }
  let crc = 0
  for (let i = from; i < to; i++) {
    const c = key.charCodeAt(i)
    if (c >= 0x80) return crcOfBytes(Buffer.from(key.slice(from, to), 'utf8'))
    crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ c) & 0xff]!
  }
  return crc & 0x3fff
}

function crcOfBytes(bytes: Uint8Array): number {
  let crc = 0
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ b) & 0xff]!
  return crc & 0x3fff
}
