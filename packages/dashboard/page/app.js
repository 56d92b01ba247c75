// sluice dashboard page: polls the JSON API beside it (relative URLs, so any mount path works) and draws
// every limiter's allowed / queued / denied / shadow per second, the most denied keys, the instances, and
// the limit tables. Every string from the API is put in the page as text (textContent, createTextNode,
// attribute values): never as markup. No inline script or style, no eval: the page runs under a strict CSP.

const CSRF = document.querySelector('meta[name="sluice-csrf"]')?.getAttribute('content') ?? ''
const ACCESS = document.querySelector('meta[name="sluice-access"]')?.getAttribute('content') ?? 'read'
const WRITER = ACCESS === 'write' && CSRF !== ''
const SVG = 'http://www.w3.org/2000/svg'
const POLL_MS = 1000
/** Seconds asked again on every poll: the newest ones are still being counted and published. */
const OVERLAP = 5
const RECENT = 10

const state = {
  range: 300,
  /** limiter -> { points: Map<t, point>, topDenied, instances } */
  limiters: new Map(),
  instances: [],
  until: 0,
  seconds: 0,
  /** The last `until` fetched; the next poll asks only for what follows it (minus OVERLAP). */
  since: undefined,
  tableVersions: new Map(),
  tableViews: new Map(),
}

// ---- DOM helpers: text only -------------------------------------------------------------------------

/** Control and format characters (bidi overrides, zero-width ones), separators, lone surrogates. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu
/** Longest text shown of one string from the API; the rest is cut (a 100 KB name must not be a 48,000 px row). */
const MAX_SHOWN = 300

/**
 * A string from the API as shown: each control or format character as a visible `\u{…}` (a bidi
 * override would otherwise reverse what follows it), cut at MAX_SHOWN characters.
 */
function shown(text) {
  const safe = text.replace(UNSAFE, (c) => `\\u{${c.codePointAt(0).toString(16).toUpperCase()}}`)
  return safe.length > MAX_SHOWN ? `${safe.slice(0, MAX_SHOWN)}…` : safe
}

function h(tag, props = {}, ...children) {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue
    if (name === 'class') el.className = value
    else if (name === 'text') el.textContent = shown(String(value))
    else if (name.startsWith('on')) el.addEventListener(name.slice(2), value)
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue
    el.append(child instanceof Node ? child : document.createTextNode(shown(String(child))))
  }
  return el
}

function svg(tag, attributes = {}, ...children) {
  const el = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, String(value))
  for (const child of children)
    el.append(child instanceof Node ? child : document.createTextNode(String(child)))
  return el
}

const $ = (id) => document.getElementById(id)

function formatRate(n) {
  if (n >= 1000) return `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)}k`
  if (n >= 10 || n === 0) return String(Math.round(n))
  return n.toFixed(1)
}

function formatCount(n) {
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n)
}

function ago(ms) {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s} s ago`
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  return `${Math.floor(s / 3600)} h ago`
}

function spanLabel(seconds) {
  return seconds % 60 === 0 ? `${seconds / 60} min` : `${seconds} s`
}

// ---- API ----------------------------------------------------------------------------------------------

async function api(path, init = {}) {
  const response = await fetch(path, { ...init, headers: { accept: 'application/json', ...init.headers } })
  let body = null
  try {
    body = await response.json()
  } catch {
    body = null
  }
  if (!response.ok) {
    const error = new Error(body?.message ?? `HTTP ${response.status}`)
    error.code = body?.code ?? `HTTP_${response.status}`
    throw error
  }
  return body
}

function write(method, table, entry, rules) {
  // The entry goes in the query: in a path, "." and ".." would be resolved away by the URL itself.
  return api(`api/tables/${encodeURIComponent(table)}/entry?name=${encodeURIComponent(entry)}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-sluice-csrf': CSRF },
    ...(method === 'PUT' ? { body: JSON.stringify(rules) } : {}),
  })
}

// ---- stats --------------------------------------------------------------------------------------------

function merge(stats) {
  state.until = stats.until
  state.seconds = stats.seconds
  state.instances = stats.instances
  const oldest = stats.until - Math.max(stats.seconds, 1) + 1
  const seen = new Set()
  let unknown = false
  for (const view of stats.limiters) {
    seen.add(view.limiter)
    let held = state.limiters.get(view.limiter)
    if (held === undefined) {
      held = { points: new Map() }
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

/** Rates per second over the last RECENT complete seconds. */
function recentRates(held) {
  const points = pointsOf(held, RECENT)
  const total = sums(points)
  for (const k of Object.keys(total)) total[k] /= RECENT
  return total
}

function visibleRange() {
  return Math.max(10, Math.min(state.range, state.seconds || state.range))
}

function renderOverview() {
  const all = { allowed: 0, queued: 0, denied: 0, shadow: 0 }
  for (const held of state.limiters.values()) {
    const r = recentRates(held)
    for (const k of Object.keys(all)) all[k] += r[k]
  }
  const requests = all.allowed + all.queued + all.denied + all.shadow
  const share = requests === 0 ? 0 : (100 * all.denied) / requests
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

function renderLimiters() {
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
  const rows = [...state.limiters].map(([name, held]) => {
    const points = pointsOf(held, range)
    return { name, held, points, total: sums(points), recent: recentRates(held) }
  })
  rows.sort((a, b) => b.total.denied - a.total.denied || (a.name < b.name ? -1 : 1))
  // The grid's columns (minmax(560px, 1fr), 16px gaps) decide a card's width; the chart fills it.
  const room = box.clientWidth || 1200
  const columns = Math.max(1, Math.floor((room + 16) / (560 + 16)))
  const width = Math.max(260, Math.floor((room - 16 * (columns - 1)) / columns) - 38)
  box.replaceChildren(...rows.map((row) => limiterCard(row, width)))
}

function limiterCard({ name, held, points, total, recent }, width) {
  const requests = total.allowed + total.queued + total.denied + total.shadow
  const percent = (n) => {
    const p = requests === 0 ? 0 : (100 * n) / requests
    return p.toFixed(p >= 10 || p === 0 ? 0 : 1)
  }
  const denying = recent.denied > 0
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

function niceCeiling(value) {
  if (value <= 4) return 4
  const power = 10 ** Math.floor(Math.log10(value))
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power
  return 10 * power
}

function chart(points, width, height, name) {
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
  const x = (i) => left + (n <= 1 ? w : (i * w) / (n - 1))
  const y = (v) => top + ht - (v / max) * ht
  const f = (v) => v.toFixed(1)

  const layers = [
    ['allowed', () => 0, (p) => p.allowed],
    ['queued', (p) => p.allowed, (p) => p.allowed + p.queued],
    ['denied', (p) => p.allowed + p.queued, (p) => p.allowed + p.queued + p.denied],
    ['shadow', (p) => p.allowed + p.queued + p.denied, (p) => p.allowed + p.queued + p.denied + p.shadow],
  ]
  const root = svg('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img' })
  root.append(svg('title', {}, `${name}: allowed, queued, denied and shadow per second`))
  for (const frac of [0, 0.5, 1]) {
    const v = max * frac
    root.append(svg('line', { class: 'grid', x1: left, x2: width - right, y1: f(y(v)), y2: f(y(v)) }))
    root.append(
      svg('text', { class: 'axis', x: left - 6, y: f(y(v) + 4), 'text-anchor': 'end' }, formatRate(v)),
    )
  }
  for (const [cls, low, high] of layers) {
    if (!points.some((p) => high(p) > low(p))) continue
    let d = ''
    points.forEach((p, i) => {
      d += `${i === 0 ? 'M' : 'L'}${f(x(i))},${f(y(high(p)))}`
    })
    for (let i = n - 1; i >= 0; i--) d += `L${f(x(i))},${f(y(low(points[i])))}`
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

/** The most denied keys; for a limit in shadow mode, the keys it would have denied. */
function deniedKeys(top, shadowOnly) {
  if (!top || top.length === 0) return h('p', { class: 'nokeys', text: 'No key denied recently.' })
  const most = top[0].count || 1
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
  const body = $('instances').tBodies[0]
  if (state.instances.length === 0) {
    body.replaceChildren(
      h('tr', {}, h('td', { colspan: 5, class: 'empty', text: 'No instance is publishing.' })),
    )
    return
  }
  const now = Date.now()
  body.replaceChildren(
    ...state.instances.map((i) => {
      const stale = now - i.lastSeen > 5000
      return h(
        'tr',
        { class: stale ? 'stale' : '' },
        h('td', { class: 'mono', text: i.instance }),
        h('td', {}, h('span', { class: `dot ${stale ? 'off' : 'on'}` }), ago(now - i.lastSeen)),
        h('td', { text: spanLabel(i.seconds) }),
        h('td', { class: 'mono', text: i.limiters.join(', ') }),
        h('td', { class: 'mono' }, ...metaParts(i.meta)),
      )
    }),
  )
}

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

// ---- tables -------------------------------------------------------------------------------------------

const DURATIONS = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'm'],
  [1000, 's'],
]

function durationText(ms) {
  if (ms === 0) return '0ms'
  for (const [unit, suffix] of DURATIONS) if (ms % unit === 0) return `${ms / unit}${suffix}`
  return `${ms}ms`
}

/** A number as the spec grammar writes it (no exponent), or undefined. */
function numberText(n) {
  const text = String(n)
  return typeof n === 'number' && /^-?\d+(\.\d+)?$/.test(text) ? text : undefined
}

/** A duration as the spec grammar writes it, or undefined. */
function msText(ms) {
  return typeof ms === 'number' && Number.isInteger(ms) && ms >= 0 ? durationText(ms) : undefined
}

const SHORT = {
  fixedWindow: { keys: ['limit', 'windowMs'], text: (s) => `${numberText(s.limit)}/${msText(s.windowMs)}` },
  slidingLog: { keys: ['limit', 'windowMs'], text: (s) => `${numberText(s.limit)}/${msText(s.windowMs)}` },
  slidingWindow: {
    keys: ['limit', 'windowMs', 'buckets'],
    text: (s) =>
      `${numberText(s.limit)}/${msText(s.windowMs)}${s.buckets === undefined ? '' : `/${numberText(s.buckets)}`}`,
  },
  tokenBucket: {
    keys: ['capacity', 'refillPerSecond'],
    text: (s) => `${numberText(s.capacity)}+${numberText(s.refillPerSecond)}/s`,
  },
  leakyBucket: {
    keys: ['ratePerSecond', 'maxQueueMs'],
    text: (s) =>
      `${numberText(s.ratePerSecond)}/s${s.maxQueueMs === undefined ? '' : `~${msText(s.maxQueueMs)}`}`,
  },
}

/**
 * A spec in the grammar the API reads (`slidingLog:100/1s`, `tokenBucket:50+10/s`, `leakyBucket:5/s~2s`,
 * `slidingWindow:600/1m/6`, each with `@NAME`), or undefined when it has no such form.
 */
function specText(spec) {
  if (spec === null || typeof spec !== 'object') return undefined
  const form = Object.hasOwn(SHORT, spec.kind) ? SHORT[spec.kind] : undefined
  if (form === undefined) return undefined
  for (const key of Object.keys(spec)) {
    if (key !== 'kind' && key !== 'name' && !form.keys.includes(key)) return undefined
  }
  if (spec.name !== undefined && (typeof spec.name !== 'string' || /[\s,@]/.test(spec.name))) return undefined
  const body = form.text(spec)
  if (body.includes('undefined')) return undefined
  return `${spec.kind}:${body}${spec.name === undefined ? '' : `@${spec.name}`}`
}

/** An entry's rules as the form takes them back: -1, short forms separated by spaces, or else JSON. */
function rulesText(rules) {
  if (rules === null || rules === undefined) return '-1'
  const texts = rules.map(specText)
  return texts.includes(undefined) ? JSON.stringify(rules) : texts.join(' ')
}

/** What the rules field holds: -1 or null, JSON, or short forms separated by spaces. */
function parseRules(text) {
  const t = text.trim()
  if (t === '')
    throw Object.assign(new Error('Write the rules: a short form such as slidingLog:100/1s, JSON, or -1.'), {
      code: 'EMPTY',
    })
  if (t === '-1' || t === 'null') return null
  if (t.startsWith('[') || t.startsWith('{')) {
    let parsed
    try {
      parsed = JSON.parse(t)
    } catch (error) {
      throw Object.assign(new Error(`The rules are not valid JSON: ${error.message}`), { code: 'JSON' })
    }
    return Array.isArray(parsed) ? parsed : [parsed]
  }
  return t.split(/[\s,]+/)
}

async function pollTables() {
  const { tables } = await api('api/tables')
  const box = $('tables')
  if (tables.length === 0) {
    if (!box.querySelector('.empty'))
      box.replaceChildren(h('p', { class: 'empty', text: 'No limit table is attached to this dashboard.' }))
    return
  }
  box.querySelector('.empty')?.remove()
  for (const t of tables) {
    if (state.tableVersions.get(t.name) === t.version) continue
    const view = await api(`api/tables/${encodeURIComponent(t.name)}`)
    state.tableVersions.set(t.name, view.version)
    renderTable(view)
  }
}

function tableCard(name) {
  let card = state.tableViews.get(name)
  if (card !== undefined) return card
  const article = h('article', { class: 'card table', 'data-table': name })
  const title = h('h3', { class: 'name', text: name })
  const version = h('span', { class: 'version' })
  const entries = h('div', { class: 'entries' })
  const audit = h('div', { class: 'audit' })
  const form = WRITER ? editForm(name) : null
  article.append(h('header', {}, title, version), entries, form?.element ?? null, audit)
  if (!WRITER)
    article.append(
      h('p', { class: 'readonly', text: 'Read-only: your access does not include changing tables.' }),
    )
  $('tables').append(article)
  card = { article, version, entries, audit, form }
  state.tableViews.set(name, card)
  return card
}

function renderTable(view) {
  const card = tableCard(view.name)
  card.version.textContent = `version ${view.version}`
  const rows = view.entries.map(({ entry, rules }) =>
    h(
      'tr',
      { 'data-entry': entry },
      h('td', { class: 'mono entry', text: entry }),
      h('td', {
        class: `mono rules${rules === null ? ' free' : ''}`,
        text: rules === null ? 'not limited (-1)' : rulesText(rules),
      }),
      WRITER
        ? h(
            'td',
            { class: 'actions' },
            h('button', {
              type: 'button',
              class: 'small',
              text: 'edit',
              onclick: () => card.form.fill(entry, rulesText(rules)),
            }),
          )
        : null,
    ),
  )
  card.entries.replaceChildren(
    rows.length === 0
      ? h('p', { class: 'empty', text: 'No entries: nothing is limited by this table.' })
      : h(
          'table',
          { class: 'grid' },
          h(
            'thead',
            {},
            h('tr', {}, h('th', { text: 'entry' }), h('th', { text: 'rules' }), WRITER ? h('th', {}) : null),
          ),
          h('tbody', {}, rows),
        ),
  )
  if (view.auditError !== undefined) {
    // Redis is away: the entries shown are the table the process holds; the trail waits for Redis.
    card.audit.replaceChildren(
      h('p', { class: 'audit-error', text: `audit trail unavailable: ${view.auditError.message}` }),
    )
    return
  }
  if (view.audit.length === 0) {
    card.audit.replaceChildren()
    return
  }
  card.audit.replaceChildren(
    h('h4', { text: 'audit trail' }),
    h(
      'ol',
      { class: 'trail' },
      view.audit.slice(0, 20).map((r) =>
        h(
          'li',
          { 'data-version': String(r.version) },
          h('time', { text: new Date(r.time).toLocaleString() }),
          h('span', { class: 'version', text: `v${r.version}` }),
          h('span', {
            class: 'mono entry',
            text: r.change === 'restore' ? '(whole table restored)' : r.entry,
          }),
          h('span', {
            class: 'mono before',
            text: r.before === undefined ? '(none)' : rulesText(r.before),
          }),
          ' → ',
          h('span', {
            class: 'mono after',
            text: r.after === undefined ? '(deleted)' : rulesText(r.after),
          }),
          r.actor ? h('span', { class: 'actor', text: r.actor }) : null,
        ),
      ),
    ),
  )
}

function editForm(table) {
  const entry = h('input', {
    name: 'entry',
    required: true,
    maxlength: 256,
    placeholder: 'PAYMENT:ALIPAY',
    autocomplete: 'off',
    spellcheck: 'false',
  })
  const rules = h('input', {
    name: 'rules',
    required: true,
    placeholder: 'slidingLog:3/1s   or   [{"kind":"slidingLog","limit":3,"windowMs":1000}]   or   -1',
    autocomplete: 'off',
    spellcheck: 'false',
  })
  const message = h('p', { class: 'message', role: 'status' })
  const save = h('button', { type: 'submit', class: 'primary', text: 'Save entry' })
  const remove = h('button', { type: 'button', class: 'danger', text: 'Delete entry' })
  const show = (kind, text) => {
    message.className = `message ${kind}`
    message.textContent = text
  }
  const run = async (action) => {
    if (entry.value.trim() === '') return show('error', 'Name the entry to change.')
    save.disabled = remove.disabled = true
    try {
      await action()
      await pollTables()
    } catch (error) {
      show('error', error.code ? `${error.code}: ${error.message}` : error.message)
    } finally {
      save.disabled = remove.disabled = false
    }
  }
  const element = h(
    'form',
    {
      class: 'edit',
      onsubmit: (event) => {
        event.preventDefault()
        void run(async () => {
          const parsed = parseRules(rules.value)
          const answer = await write('PUT', table, entry.value.trim(), parsed)
          show('ok', `Saved ${answer.entry} = ${rulesText(answer.rules)} (version ${answer.version}).`)
        })
      },
    },
    h('label', {}, h('span', { text: 'entry' }), entry),
    h('label', { class: 'wide' }, h('span', { text: 'rules' }), rules),
    h('div', { class: 'buttons' }, save, remove),
    message,
  )
  remove.addEventListener('click', () =>
    run(async () => {
      const answer = await write('DELETE', table, entry.value.trim())
      show('ok', `Deleted ${entry.value.trim()} (version ${answer.version}).`)
    }),
  )
  return {
    element,
    fill(name, text) {
      entry.value = name
      rules.value = text
      show('', '')
      rules.focus()
    },
  }
}

// ---- loop ---------------------------------------------------------------------------------------------

function setStatus(kind, text) {
  $('status').dataset.state = kind
  $('status-text').textContent = text
}

function render() {
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

async function pollStats() {
  const stats = await api(`api/stats${state.since === undefined ? '' : `?since=${state.since}`}`)
  merge(stats)
  render()
  const time = new Date(stats.at).toLocaleTimeString()
  if (stats.redisError) setStatus('warn', `${stats.redisError.message} · ${time}`)
  else setStatus('live', `live · ${time}`)
}

async function tick() {
  try {
    await Promise.all([pollStats(), pollTables()])
  } catch (error) {
    setStatus('down', `not updating: ${error.code ? `${error.code}: ` : ''}${error.message}`)
  }
  setTimeout(tick, POLL_MS)
}

$('access-badge').textContent = WRITER ? 'write access' : 'read only'
$('access-badge').dataset.access = WRITER ? 'write' : 'read'
$('range').addEventListener('click', (event) => {
  const seconds = Number(event.target?.dataset?.seconds)
  if (!seconds) return
  state.range = seconds
  render()
})
window.addEventListener('resize', () => renderLimiters())
void tick()
