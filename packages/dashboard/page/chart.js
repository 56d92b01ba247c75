// @ts-check
/** @module A limiter's chart: allowed, queued, denied and shadow per second, stacked, as SVG. */
import { svg } from './dom.js'
import { formatRate } from './format.js'

/** @typedef {{ t: number, allowed: number, queued: number, denied: number, shadow: number }} Point */

/**
 * The axis's top: 4 at least, else the next 1, 2, 2.5 or 5 times a power of ten.
 * @param {number} value
 */
function niceCeiling(value) {
  if (value <= 4) return 4
  const power = 10 ** Math.floor(Math.log10(value))
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power
  return 10 * power
}

/** @type {[string, (p: Point) => number, (p: Point) => number][]} */
const LAYERS = [
  ['allowed', () => 0, (p) => p.allowed],
  ['queued', (p) => p.allowed, (p) => p.allowed + p.queued],
  ['denied', (p) => p.allowed + p.queued, (p) => p.allowed + p.queued + p.denied],
  ['shadow', (p) => p.allowed + p.queued + p.denied, (p) => p.allowed + p.queued + p.denied + p.shadow],
]

/**
 * `points`, oldest first, drawn `width` by `height` px, titled for `name`.
 * @param {Point[]} points
 * @param {number} width
 * @param {number} height
 * @param {string} name
 * @returns {SVGElement}
 */
export function chart(points, width, height, name) {
  const left = 38
  const right = 6
  const top = 8
  const bottom = 20
  const w = width - left - right
  const ht = height - top - bottom
  const n = points.length
  let max = 0
  for (const p of points) max = Math.max(max, p.allowed + p.queued + p.denied + p.shadow)
  max = niceCeiling(max)
  /** @param {number} i */
  const x = (i) => left + (n <= 1 ? w : (i * w) / (n - 1))
  /** @param {number} v */
  const y = (v) => top + ht - (v / max) * ht
  /** @param {number} v */
  const f = (v) => v.toFixed(1)

  const root = svg('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img' })
  root.append(svg('title', {}, `${name}: allowed, queued, denied and shadow per second`))
  for (const frac of [0, 0.5, 1]) {
    const v = max * frac
    root.append(svg('line', { class: 'grid', x1: left, x2: width - right, y1: f(y(v)), y2: f(y(v)) }))
    root.append(
      svg('text', { class: 'axis', x: left - 6, y: f(y(v) + 4), 'text-anchor': 'end' }, formatRate(v)),
    )
  }
  for (const [cls, low, high] of LAYERS) {
    if (!points.some((p) => high(p) > low(p))) continue
    let d = ''
    points.forEach((p, i) => {
      d += `${i === 0 ? 'M' : 'L'}${f(x(i))},${f(y(high(p)))}`
    })
    for (let i = n - 1; i >= 0; i--) d += `L${f(x(i))},${f(y(low(/** @type {Point} */ (points[i]))))}`
    root.append(svg('path', { class: `area ${cls}`, d: `${d}Z` }))
  }
  const tick = n <= 60 ? 15 : n <= 300 ? 60 : 180
  for (let back = 0; back < n; back += tick) {
    const i = n - 1 - back
    root.append(svg('line', { class: 'tick', x1: f(x(i)), x2: f(x(i)), y1: top + ht, y2: top + ht + 4 }))
    const label = back === 0 ? 'now' : back % 60 === 0 ? `−${back / 60}m` : `−${back}s`
    root.append(
      svg(
        'text',
        { class: 'axis', x: f(x(i)), y: height - 4, 'text-anchor': back === 0 ? 'end' : 'middle' },
        label,
      ),
    )
  }
  return root
}
