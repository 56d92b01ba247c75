/** @module Small numbers helpers for the bench: medians, ranges, formatting. */

export function median(values) {
  const s = [...values].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2
}

/** `{ median, min, max, n, values }` of a list of numbers (`values` as measured, in run order). */
export function summary(values) {
  return {
    median: median(values),
    min: Math.min(...values),
    max: Math.max(...values),
    n: values.length,
    values,
  }
}

/**
 * The median over runs of `a`'s run over `b`'s same run, for subjects measured in alternation: each
 * pair was measured seconds apart, so a machine that slows down for a while moves both alike. Falls back
 * to the ratio of the medians when the runs are not paired.
 */
export function pairedRatio(a, b) {
  if (a === undefined || b === undefined) return undefined
  const [x, y] = [a.values, b.values]
  if (x === undefined || y === undefined || x.length !== y.length) return a.median / b.median
  return median(x.map((v, i) => v / y[i]))
}

/** The `q`-quantile (0..1) of an already sorted list, nearest rank. */
export function quantile(sorted, q) {
  if (sorted.length === 0) return Number.NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[i]
}

/** 12345678 -> "12.3 M", 123456 -> "123 k". */
export function rate(x) {
  if (!Number.isFinite(x)) return 'n/a'
  if (x >= 1e6) return `${(x / 1e6).toFixed(x >= 1e7 ? 1 : 2)} M`
  if (x >= 1e3) return `${(x / 1e3).toFixed(x >= 1e5 ? 0 : 1)} k`
  return x.toFixed(0)
}

/** A summary as "median (min–max)" with `fmt` applied to each. */
export function spread(s, fmt = rate) {
  if (s === undefined) return 'n/a'
  return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`
}

/** 0.934 -> "0.93×"; "n/a" for a missing or non-finite ratio. */
export function times(x) {
  return x === undefined || !Number.isFinite(x) ? 'n/a' : `${x.toFixed(2)}×`
}

export function ratio(a, b) {
  if (a === undefined || b === undefined || !(b > 0)) return 'n/a'
  return `${(a / b).toFixed(2)}×`
}
