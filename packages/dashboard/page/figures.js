// @ts-check
/**
 * @module A rule's figures in words, as a table's card shows them beside the rule's text. A named rule's
 * name is its unit (`slidingWindow:90000/1m@tokens` reads `90,000 tokens / 1m`): a token budget is a rule
 * like any other, and reads in tokens. A quota says when its period ends, in the rule's own time zone
 * (`1,000 / month · resets Dec 1, 00:00 Europe/Berlin`), by core's calendar (`quotaPeriod`). Spec fields
 * are read as `JSON.stringify(rule)` writes them; a kind the page does not know reads as nothing, so a
 * newer process's table still shows.
 */
import { parseRuleSpec, quotaPeriod } from './grammar.js'

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
function durationText(ms) {
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

/** The days a week may start on, `weekStartsOn` 1 to 7. */
export const WEEKDAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday']

/**
 * When a quota's period ends, on the rule's wall clock: `Dec 1, 00:00`.
 * @param {string} timeZone
 * @param {number} at
 */
function wallClock(timeZone, at) {
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).format(at)
}

/**
 * What words say until when: a quota's words change when its period ends, every other rule's never.
 * @typedef {{ text: string, until: number }} Words
 */

/**
 * What `spec` says, in words, in its units: `90,000 tokens / 1m`, `50 requests, refilled 10/s`, `10 at
 * once`; for a quota, when its period holding `now` ends, and that the words hold until then. Throws for
 * a quota core refuses (an unknown zone).
 * @param {Readonly<Record<string, unknown>>} spec
 * @param {number} now ms since the epoch
 * @returns {Words}
 */
export function figures(spec, now) {
  const unit = typeof spec.name === 'string' ? ` ${spec.name}` : ''
  if (spec.kind === 'quota') return quotaWords(spec, unit, now)
  return { text: plainWords(spec, unit), until: Number.POSITIVE_INFINITY }
}

/**
 * @param {Readonly<Record<string, unknown>>} spec
 * @param {string} unit
 * @param {number} now
 * @returns {Words}
 */
function quotaWords(spec, unit, now) {
  const rule = parseRuleSpec(JSON.stringify(spec))
  if (rule.kind !== 'quota') return { text: '', until: Number.POSITIVE_INFINITY }
  const from = rule.weekStartsOn === 1 ? '' : ` from ${WEEKDAYS[rule.weekStartsOn - 1]}`
  const { end } = quotaPeriod(rule, now)
  return {
    text: `${count(rule.limit)}${unit} / ${rule.per}${from} · resets ${wallClock(rule.timeZone, end)} ${rule.timeZone}`,
    until: end,
  }
}

/**
 * @param {Readonly<Record<string, unknown>>} spec
 * @param {string} unit
 * @returns {string}
 */
function plainWords(spec, unit) {
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
