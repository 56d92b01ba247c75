// @ts-check
/**
 * @module The live statistics: every limiter's allowed / queued / denied / shadow per second summed over
 * every instance, its most denied keys, and the instances. Polls ask only for the seconds since the last
 * answer (minus a few still being counted), and the page keeps the rest.
 */
import { readStats } from './api.js'
import { chart } from './chart.js'
import { $, h } from './dom.js'
import { ago, formatCount, formatRate, spanLabel } from './format.js'

/** @typedef {import('./chart.js').Point} Point */
/** @typedef {import('@sluice/dashboard').StatsAnswer} StatsAnswer */
/** @typedef {import('@sluice/dashboard').InstanceView} InstanceView */
/** @typedef {{ allowed: number, queued: number, denied: number, shadow: number }} Counts */
/**
 * A limiter as the page holds it: its seconds by time, its most denied keys, who publishes it.
 * @typedef {{ points: Map<number, Point>, topDenied: { key: string, count: number }[], instances: string[] }} Held
 */

/** Seconds asked again on every poll: the newest ones are still being counted and published. */
const OVERLAP = 5
/** Seconds the rates (the tiles, the chips, a limiter "denying now") are averaged over. */
const RECENT = 10

const state = {
  /** Seconds shown: 60, 300 or 900. */
  range: 300,
  /** @type {Map<string, Held>} */
  limiters: new Map(),
  /** @type {InstanceView[]} */
  instances: [],
  /**
   * Instances whose published value the dashboard skipped (past the bounds, or not a snapshot), with why.
   * @type {import('@sluice/dashboard').SkippedInstance[]}
   */
  skipped: [],
  /** Limiters the answer left out past its bound. */
  omitted: 0,
  until: 0,
  seconds: 0,
  /**
   * The last `until` fetched, less OVERLAP: the next poll asks only for what follows it.
   * @type {number | undefined}
   */
  since: undefined,
}

/**
 * Reads what is new and draws it; resolves with the answer (its time, and whether Redis could be read).
 * @returns {Promise<StatsAnswer>}
 */
export async function pollStats() {
  const stats = await readStats(state.since)
  merge(stats)
  renderStats()
  return stats
}

/**
 * Shows `seconds` from now on.
 * @param {number} seconds
 */
export function showRange(seconds) {
  state.range = seconds
  renderStats()
}

/** @param {StatsAnswer} stats */
function merge(stats) {
  state.until = stats.until
  state.seconds = stats.seconds
  state.instances = stats.instances
  state.skipped = stats.skipped ?? []
  state.omitted = stats.omittedLimiters ?? 0
  const oldest = stats.until - Math.max(stats.seconds, 1) + 1
  const seen = new Set()
  let unknown = false
  for (const view of stats.limiters) {
    seen.add(view.limiter)
    let held = state.limiters.get(view.limiter)
    if (held === undefined) {
      held = { points: new Map(), topDenied: [], instances: [] }
      state.limiters.set(view.limiter, held)
      if (state.since !== undefined) unknown = true
    }
    held.topDenied = view.topDenied
    held.instances = view.instances
    for (const point of view.series) held.points.set(point.t, point)
    for (const t of held.points.keys()) if (t < oldest) held.points.delete(t)
  }
  for (const name of [...state.limiters.keys()]) if (!seen.has(name)) state.limiters.delete(name)
  // A limiter that appeared mid-way has history we did not ask for: ask for everything next time.
  state.since = unknown || stats.until === 0 ? undefined : stats.until - OVERLAP
}

/**
 * The `range` seconds of one limiter up to the last complete one (the newest second is still being
 * counted and published), oldest first, zeros where nothing was counted. `denied` is what the limiter
 * enforced: a shadowed limit's denials, which it let through, are counted by liveStats in both denied and
 * shadow, and are shown as shadow only.
 * @param {Held} held
 * @param {number} range
 * @returns {Point[]}
 */
function pointsOf(held, range) {
  const out = []
  const last = state.until - 1
  for (let t = last - range + 1; t <= last; t++) {
    const p = held.points.get(t)
    out.push(
      p === undefined
        ? { t, allowed: 0, queued: 0, denied: 0, shadow: 0 }
        : {
            t,
            allowed: p.allowed,
            queued: p.queued,
            denied: Math.max(0, p.denied - p.shadow),
            shadow: p.shadow,
          },
    )
  }
  return out
}

/**
 * @param {Point[]} points
 * @returns {Counts}
 */
function sums(points) {
  const total = { allowed: 0, queued: 0, denied: 0, shadow: 0 }
  for (const p of points) {
    total.allowed += p.allowed
    total.queued += p.queued
    total.denied += p.denied
    total.shadow += p.shadow
  }
  return total
}

/**
 * Rates per second over the last RECENT complete seconds.
 * @param {Held} held
 * @returns {Counts}
 */
function recentRates(held) {
  const total = sums(pointsOf(held, RECENT))
  return {
    allowed: total.allowed / RECENT,
    queued: total.queued / RECENT,
    denied: total.denied / RECENT,
    shadow: total.shadow / RECENT,
  }
}

function visibleRange() {
  return Math.max(10, Math.min(state.range, state.seconds || state.range))
}

/** Draws the tiles, the limiters, the instances and the range buttons from what the page holds. */
export function renderStats() {
  renderOverview()
  renderLimiters()
  renderInstances()
  for (const button of $('range').querySelectorAll('button')) {
    const seconds = Number(button.dataset.seconds)
    button.classList.toggle('on', seconds === state.range)
    button.title =
      state.seconds > 0 && seconds > state.seconds ? `instances keep only ${spanLabel(state.seconds)}` : ''
  }
}

function renderOverview() {
  const all = { allowed: 0, queued: 0, denied: 0, shadow: 0 }
  for (const held of state.limiters.values()) {
    const r = recentRates(held)
    all.allowed += r.allowed
    all.queued += r.queued
    all.denied += r.denied
    all.shadow += r.shadow
  }
  const requests = all.allowed + all.queued + all.denied + all.shadow
  const share = requests === 0 ? 0 : (100 * all.denied) / requests
  /**
   * @param {string} cls
   * @param {string} label
   * @param {string} value
   * @param {string} [note]
   */
  const tile = (cls, label, value, note) =>
    h(
      'div',
      { class: `tile ${cls}` },
      h('span', { class: 'label', text: label }),
      h('span', { class: 'value', text: value }),
      note ? h('span', { class: 'note', text: note }) : null,
    )
  $('overview').replaceChildren(
    tile('allowed', 'allowed', `${formatRate(all.allowed)}/s`),
    tile('queued', 'queued', `${formatRate(all.queued)}/s`),
    tile(
      'denied',
      'denied',
      `${formatRate(all.denied)}/s`,
      `${share.toFixed(share >= 10 ? 0 : 1)}% of requests`,
    ),
    tile('shadow', 'shadow', `${formatRate(all.shadow)}/s`, 'let through by shadow limits'),
    tile(
      'plain',
      'limiters',
      String(state.limiters.size),
      `${state.instances.length} instance${state.instances.length === 1 ? '' : 's'}`,
    ),
  )
}

/** Draws one card per limiter, the busiest denier first, its chart as wide as the card. */
export function renderLimiters() {
  const range = visibleRange()
  const box = $('limiters')
  if (state.limiters.size === 0) {
    box.replaceChildren(
      h(
        'p',
        { class: 'empty' },
        'No limiter has reported yet. Each process runs ',
        h('code', { text: 'liveStats()' }),
        ' and ',
        h('code', { text: 'publishStats({ stats, client, instance })' }),
        '.',
      ),
    )
    return
  }
  const omitted =
    state.omitted > 0
      ? h('p', {
          class: 'empty',
          text: `${state.omitted} more limiter${state.omitted === 1 ? '' : 's'} not shown: one answer holds a bounded number.`,
        })
      : null
  const rows = [...state.limiters].map(([name, held]) => {
    const points = pointsOf(held, range)
    return { name, held, points, total: sums(points), recent: recentRates(held) }
  })
  rows.sort((a, b) => b.total.denied - a.total.denied || (a.name < b.name ? -1 : 1))
  // The grid's columns (minmax(560px, 1fr), 16px gaps) decide a card's width; the chart fills it.
  const room = box.clientWidth || 1200
  const columns = Math.max(1, Math.floor((room + 16) / (560 + 16)))
  const width = Math.max(260, Math.floor((room - 16 * (columns - 1)) / columns) - 38)
  box.replaceChildren(...rows.map((row) => limiterCard(row, width)), ...(omitted === null ? [] : [omitted]))
}

/**
 * @param {{ name: string, held: Held, points: Point[], total: Counts, recent: Counts }} row
 * @param {number} width
 */
function limiterCard({ name, held, points, total, recent }, width) {
  const requests = total.allowed + total.queued + total.denied + total.shadow
  /** @param {number} n */
  const percent = (n) => {
    const p = requests === 0 ? 0 : (100 * n) / requests
    return p.toFixed(p >= 10 || p === 0 ? 0 : 1)
  }
  const denying = recent.denied > 0
  /**
   * @param {string} cls
   * @param {string} label
   * @param {string} value
   */
  const chip = (cls, label, value) =>
    h('span', { class: `chip ${cls}` }, h('b', { text: value }), ` ${label}`)
  const over = `over the last ${spanLabel(points.length)}`
  const share =
    total.denied === 0 && total.shadow > 0
      ? h(
          'span',
          { class: 'share shadowed', title: `shadow share ${over}` },
          `${percent(total.shadow)}% shadow`,
        )
      : h(
          'span',
          { class: `share${total.denied > 0 ? ' hot' : ''}`, title: `denied share ${over}` },
          `${percent(total.denied)}% denied`,
        )
  return h(
    'article',
    {
      class: `card limiter${denying ? ' denying' : recent.shadow > 0 ? ' shadowing' : ''}`,
      'data-limiter': name,
    },
    h('header', {}, h('h3', { class: 'name', text: name, title: name }), share),
    h(
      'div',
      { class: 'chips' },
      chip('allowed', 'allowed/s', formatRate(recent.allowed)),
      chip('queued', 'queued/s', formatRate(recent.queued)),
      chip('denied', 'denied/s', formatRate(recent.denied)),
      chip('shadow', 'shadow/s', formatRate(recent.shadow)),
    ),
    chart(points, width, 150, name),
    h(
      'div',
      { class: 'below' },
      deniedKeys(held.topDenied, total.denied === 0 && total.shadow > 0),
      h('p', { class: 'from', text: `from ${held.instances.join(', ')}` }),
    ),
  )
}

/**
 * The most denied keys; for a limit in shadow mode, the keys it would have denied.
 * @param {{ key: string, count: number }[]} top
 * @param {boolean} shadowOnly
 */
function deniedKeys(top, shadowOnly) {
  const first = top[0]
  if (first === undefined) return h('p', { class: 'nokeys', text: 'No key denied recently.' })
  const most = first.count || 1
  const list = h('ol', { class: 'keys' })
  for (const { key, count } of top.slice(0, 8)) {
    const bar = h('span', { class: 'bar' })
    bar.style.width = `${Math.max(2, (100 * count) / most)}%`
    list.append(
      h(
        'li',
        { title: key },
        h('span', { class: 'key', text: key }),
        h('span', { class: 'count', text: formatCount(count) }),
        h('span', { class: 'track' }, bar),
      ),
    )
  }
  return h(
    'div',
    { class: `denied-keys${shadowOnly ? ' shadowed' : ''}` },
    h('h4', { text: shadowOnly ? 'most denied keys (shadow: let through)' : 'most denied keys' }),
    list,
  )
}

function renderInstances() {
  const body = /** @type {HTMLTableElement} */ ($('instances')).tBodies[0]
  if (body === undefined) return
  // An instance whose value was skipped is named with why, beside the healthy ones.
  const skipped = state.skipped.map((s) =>
    h(
      'tr',
      { class: 'skipped' },
      h('td', { class: 'mono', text: s.instance }),
      h('td', { colspan: 4, text: `skipped: ${s.reason}` }),
    ),
  )
  if (state.instances.length === 0) {
    body.replaceChildren(
      h('tr', {}, h('td', { colspan: 5, class: 'empty', text: 'No instance is publishing.' })),
      ...skipped,
    )
    return
  }
  const now = Date.now()
  body.replaceChildren(
    ...skipped,
    ...state.instances.map((i) => {
      const stale = now - i.lastSeen > 5000
      return h(
        'tr',
        { class: stale ? 'stale' : '' },
        h('td', { class: 'mono', text: i.instance }),
        h('td', {}, h('span', { class: `dot ${stale ? 'off' : 'on'}` }), ago(now - i.lastSeen)),
        h('td', { text: spanLabel(i.seconds) }),
        h('td', {
          class: 'mono',
          text:
            i.limiters.join(', ') +
            (i.limiterCount > i.limiters.length ? `, … (${i.limiterCount} in all)` : ''),
        }),
        h('td', { class: 'mono' }, ...metaParts(i.meta)),
      )
    }),
  )
}

/**
 * What an instance publishes beside its counts (its table's version, say), or a dash.
 * @param {Record<string, unknown> | undefined} meta
 * @returns {(Node | string)[]}
 */
function metaParts(meta) {
  const parts = []
  for (const [k, v] of Object.entries(meta ?? {})) {
    const label = k === 'tableVersion' ? 'table version' : k
    parts.push(
      h(
        'span',
        { class: 'meta' },
        h('span', { class: 'mk', text: label }),
        ' ',
        h('b', { text: typeof v === 'string' ? v : JSON.stringify(v) }),
      ),
    )
  }
  return parts.length > 0 ? parts : ['–']
}
