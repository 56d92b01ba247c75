// @ts-check
/**
 * @module A rule's figures in words, as a table's card shows them beside the rule's text. A named rule's
 * name is its unit (`slidingWindow:90000/1m@tokens` reads `90,000 tokens / 1m`): a token budget is a rule
 * like any other, and reads in tokens. Spec fields are read as `JSON.stringify(rule)` writes them; a kind
 * the page does not know reads as nothing, so a newer process's table still shows.
 */

const COUNT = new Intl.NumberFormat('en-US')

/** Units of a duration, largest first, as the rule grammar writes them. */
const DURATIONS = /** @type {const} */ ([
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
])

/**
 * A duration as the grammar writes it: `1m`, `90s`, `1h`, `250ms`.
 * @param {number} ms
 */
export function durationText(ms) {
  for (const [unit, size] of DURATIONS) if (ms >= size && ms % size === 0) return `${ms / size}${unit}`
  return `${ms}ms`
}

/**
 * A count with thousands separators (`90,000`); `-1` is `unlimited`.
 * @param {unknown} n
 */
function count(n) {
  if (n === -1) return 'unlimited'
  return typeof n === 'number' ? COUNT.format(n) : '?'
}

/**
 * What `spec` says, in words, in its units: `90,000 tokens / 1m`, `50 requests, refilled 10/s`, `10 at
 * once`. A quota also says when its period ends (`quotaEnd`, given the rule and the page's clock).
 * @param {Readonly<Record<string, unknown>>} spec
 * @returns {string}
 */
export function figures(spec) {
  const unit = typeof spec.name === 'string' ? ` ${spec.name}` : ''
  const per = (/** @type {unknown} */ ms) => (typeof ms === 'number' ? durationText(ms) : '?')
  switch (spec.kind) {
    case 'fixedWindow':
    case 'slidingLog':
    case 'slidingWindow':
      return `${count(spec.limit)}${unit} / ${per(spec.windowMs)}`
    case 'tokenBucket':
      return `${count(spec.capacity)}${unit}, refilled ${spec.refillPerSecond}/s`
    case 'leakyBucket':
      return `${spec.ratePerSecond}${unit} / s${queue(spec.maxQueueMs)}`
    case 'warmUp':
      return `${spec.ratePerSecond}${unit} / s once warm${queue(spec.maxQueueMs)}`
    case 'concurrency':
      return `${count(spec.limit)}${unit} at once`
    default:
      return ''
  }
}

/** @param {unknown} ms */
function queue(ms) {
  return typeof ms === 'number' && ms > 0 ? `, waiting up to ${durationText(ms)}` : ''
}
