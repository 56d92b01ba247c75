// @ts-check
/** @module Numbers, ages and spans as the page writes them. */

/**
 * A rate per second: `1.5k`, `12`, `0.4`.
 * @param {number} n
 */
export function formatRate(n) {
  if (n >= 1000) return `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)}k`
  if (n >= 10 || n === 0) return String(Math.round(n))
  return n.toFixed(1)
}

/**
 * A count: `12k` from ten thousand on.
 * @param {number} n
 */
export function formatCount(n) {
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n)
}

/**
 * How long ago, in ms: `4 s ago`, `2 min ago`, `1 h ago`.
 * @param {number} ms
 */
export function ago(ms) {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s} s ago`
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  return `${Math.floor(s / 3600)} h ago`
}

/**
 * A span of seconds: `5 min`, `90 s`.
 * @param {number} seconds
 */
export function spanLabel(seconds) {
  return seconds % 60 === 0 ? `${seconds / 60} min` : `${seconds} s`
}
