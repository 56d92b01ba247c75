// @ts-check
/**
 * @module The limit tables: each with its entries (every rule as text and in words) and its audit trail,
 * and for a writer a form to change an entry, with a row that writes a quota's text. Rules are read and
 * written as text by core's one grammar (grammar.js, `parseRuleSpecs` and `formatRuleSpec` from
 * `@sluice/core`), as the API, the `sluice` command and `rules: ['…']` read them.
 */
import { deleteEntry, readTable, readTables, setEntry, WRITER } from './api.js'
import { $, h } from './dom.js'
import { figures, WEEKDAYS } from './figures.js'
import { formatRuleSpec, parseRuleSpec, parseRuleSpecs, quota } from './grammar.js'

/** @typedef {import('@sluice/dashboard').TableView} TableView */
/** @typedef {import('./figures.js').Words} Words */
/**
 * A table's card, made once and updated in place (the form keeps what is typed in it). `until`: when
 * the words it shows go stale (the soonest end of a quota's period shown), so it is drawn again then.
 * @typedef {{ version: HTMLElement, entries: HTMLElement, audit: HTMLElement, form: EditForm | undefined, until: number }} Card
 */
/** @typedef {{ element: HTMLFormElement, fill: (entry: string, rules: string) => void }} EditForm */

/** The version each card shows: a table is read again only when its version moved. */
const versions = new Map()
/** @type {Map<string, Card>} */
const cards = new Map()

/**
 * Rules as the page shows them and the form takes them back: `-1` for not limited, else each rule in the
 * grammar, separated by spaces (`slidingLog:100/1s fixedWindow:1000/1h`), or the JSON when a spec has no
 * text (a spec sluice cannot read).
 * @param {readonly unknown[] | null} rules
 * @returns {string}
 */
export function rulesText(rules) {
  if (rules === null) return '-1'
  try {
    return rules.map((spec) => formatRuleSpec(parseRuleSpec(JSON.stringify(spec)))).join(' ')
  } catch {
    return JSON.stringify(rules)
  }
}

/**
 * What the rules field holds, as the API takes it: `null` for `-1`, else the rules' specs. The text is
 * rules in the grammar separated by spaces, or a JSON list of specs. Throws the grammar's coded errors
 * (`ERR_SLUICE_INVALID_SPEC`, `ERR_SLUICE_INVALID_OPTION`), as the API would answer them.
 * @param {string} text
 * @returns {unknown[] | null}
 */
export function rulesOf(text) {
  const t = text.trim()
  if (t === '') {
    throw Object.assign(new Error('Write the rules: a short form such as slidingLog:100/1s, JSON, or -1.'), {
      code: 'EMPTY',
    })
  }
  const rules = parseRuleSpecs(t.startsWith('[') || t.startsWith('{') ? [t] : t.split(/\s+/))
  if (rules.length === 1 && rules[0]?.kind === 'unlimited') return null
  return JSON.parse(JSON.stringify(rules))
}

/** Words for a spec the page cannot read (a quota in a zone this browser does not know): none, for good. */
const NO_WORDS = { text: '', until: Number.POSITIVE_INFINITY }

/**
 * A rule's figures in words (figures.js) at `now`, or none for a spec the page cannot read.
 * @param {unknown} spec
 * @param {number} now
 * @returns {Words}
 */
function figuresOf(spec, now) {
  if (spec === null || typeof spec !== 'object') return NO_WORDS
  try {
    return figures(/** @type {Record<string, unknown>} */ (spec), now)
  } catch {
    return NO_WORDS
  }
}

/** Reads the tables whose version moved and draws them. */
export async function pollTables() {
  const { tables } = await readTables()
  const box = $('tables')
  if (tables.length === 0) {
    if (!box.querySelector('.empty'))
      box.replaceChildren(h('p', { class: 'empty', text: 'No limit table is attached to this dashboard.' }))
    return
  }
  box.querySelector('.empty')?.remove()
  const now = Date.now()
  for (const t of tables) {
    // Read again when the version moved, or when a quota's period the card shows has ended.
    if (versions.get(t.name) === t.version && now < (cards.get(t.name)?.until ?? 0)) continue
    const view = await readTable(t.name)
    versions.set(t.name, view.version)
    renderTable(view)
  }
}

/**
 * @param {string} name
 * @returns {Card}
 */
function cardOf(name) {
  let card = cards.get(name)
  if (card !== undefined) return card
  const article = h('article', { class: 'card table', 'data-table': name })
  const title = h('h3', { class: 'name', text: name })
  const version = h('span', { class: 'version' })
  const entries = h('div', { class: 'entries' })
  const audit = h('div', { class: 'audit' })
  const form = WRITER ? editForm(name) : undefined
  article.append(h('header', {}, title, version), entries)
  if (form !== undefined) article.append(form.element)
  article.append(audit)
  if (!WRITER)
    article.append(
      h('p', { class: 'readonly', text: 'Read-only: your access does not include changing tables.' }),
    )
  $('tables').append(article)
  card = { version, entries, audit, form, until: Number.POSITIVE_INFINITY }
  cards.set(name, card)
  return card
}

/** @param {TableView} view */
function renderTable(view) {
  const card = cardOf(view.name)
  card.version.textContent = `version ${view.version}`
  const now = Date.now()
  card.until = Number.POSITIVE_INFINITY
  /** @param {unknown} spec */
  const words = (spec) => {
    const w = figuresOf(spec, now)
    card.until = Math.min(card.until, w.until)
    return h('span', { class: 'figure', text: w.text })
  }
  const rows = view.entries.map(({ entry, rules }) =>
    h(
      'tr',
      { 'data-entry': entry },
      h('td', { class: 'mono entry', text: entry }),
      h('td', {
        class: `mono rules${rules === null ? ' free' : ''}`,
        text: rules === null ? 'not limited (-1)' : rulesText(rules),
      }),
      h('td', { class: 'figures' }, (rules ?? []).map(words)),
      card.form === undefined
        ? null
        : h(
            'td',
            { class: 'actions' },
            h('button', {
              type: 'button',
              class: 'small',
              text: 'edit',
              onclick: () => card.form?.fill(entry, rulesText(rules)),
            }),
          ),
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
            h(
              'tr',
              {},
              h('th', { text: 'entry' }),
              h('th', { text: 'rules' }),
              h('th', { text: 'in words' }),
              WRITER ? h('th', {}) : null,
            ),
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

/**
 * The form that sets or deletes an entry of `table`; it shows the code of a refusal, the grammar's or the
 * API's.
 * @param {string} table
 * @returns {EditForm}
 */
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
  /**
   * @param {string} kind
   * @param {string} text
   */
  const show = (kind, text) => {
    message.className = `message ${kind}`
    message.textContent = text
  }
  /** @param {() => Promise<void>} action */
  const run = async (action) => {
    if (entry.value.trim() === '') return show('error', 'Name the entry to change.')
    save.disabled = remove.disabled = true
    try {
      await action()
      await pollTables()
    } catch (error) {
      const e = /** @type {{ code?: string, message?: string }} */ (error)
      show('error', e.code ? `${e.code}: ${e.message}` : String(e.message))
    } finally {
      save.disabled = remove.disabled = false
    }
  }
  const builder = quotaBuilder((text) => {
    const current = rules.value.trim()
    rules.value = current === '' || current === '-1' ? text : `${current} ${text}`
    show('ok', `Added ${text}: save the entry to write it.`)
  }, show)
  const element = h(
    'form',
    {
      class: 'edit',
      onsubmit: (event) => {
        event.preventDefault()
        void run(async () => {
          const answer = await setEntry(table, entry.value.trim(), rulesOf(rules.value))
          show('ok', `Saved ${answer.entry} = ${rulesText(answer.rules)} (version ${answer.version}).`)
        })
      },
    },
    h('label', {}, h('span', { text: 'entry' }), entry),
    h('label', { class: 'wide' }, h('span', { text: 'rules' }), rules),
    h('div', { class: 'buttons' }, save, remove),
    builder,
    message,
  )
  remove.addEventListener('click', () =>
    run(async () => {
      const answer = await deleteEntry(table, entry.value.trim())
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

/** Periods a quota counts over, as its `per` names them. */
const PERIODS = ['hour', 'day', 'week', 'month', 'year']

/**
 * The form's quota row: limit, period, time zone and (for a week) the day it starts on. "Add quota" builds
 * the rule with core's own `quota` factory and its checks, and hands its text (`quota:1000/month@@Europe/Berlin`)
 * to `add`; a refusal shows core's code (`ERR_SLUICE_INVALID_OPTION` naming the option) through `show`.
 * @param {(text: string) => void} add
 * @param {(kind: string, text: string) => void} show
 * @returns {HTMLElement}
 */
function quotaBuilder(add, show) {
  const limit = h('input', {
    name: 'quota-limit',
    inputmode: 'numeric',
    placeholder: '10000',
    autocomplete: 'off',
    spellcheck: 'false',
  })
  const per = h(
    'select',
    { name: 'quota-per' },
    PERIODS.map((p) => h('option', { value: p, text: p, selected: p === 'month' })),
  )
  const zones = h(
    'datalist',
    { id: `quota-zones-${++builders}` },
    Intl.supportedValuesOf('timeZone').map((zone) => h('option', { value: zone })),
  )
  const zone = h('input', {
    name: 'quota-zone',
    value: 'UTC',
    list: zones.id,
    autocomplete: 'off',
    spellcheck: 'false',
  })
  const week = h(
    'select',
    { name: 'quota-week', disabled: true },
    WEEKDAYS.map((day, i) => h('option', { value: String(i + 1), text: day })),
  )
  per.addEventListener('change', () => {
    week.disabled = per.value !== 'week'
  })
  const button = h('button', {
    type: 'button',
    class: 'small',
    text: 'Add quota',
    onclick: () => {
      try {
        const rule = quota({
          limit: limit.value.trim() === '' ? Number.NaN : Number(limit.value),
          per: /** @type {import('@sluice/core').QuotaPer} */ (per.value),
          timeZone: zone.value.trim(),
          ...(per.value === 'week' && { weekStartsOn: Number(week.value) }),
        })
        add(formatRuleSpec(rule))
      } catch (error) {
        const e = /** @type {{ code?: string, message?: string }} */ (error)
        show('error', e.code ? `${e.code}: ${e.message}` : String(e.message))
      }
    },
  })
  // Enter in the row adds the quota, rather than saving the entry without it.
  for (const input of [limit, zone]) {
    input.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter') return
      event.preventDefault()
      button.click()
    })
  }
  return h(
    'fieldset',
    { class: 'quota' },
    h('legend', { text: 'quota' }),
    h('label', {}, h('span', { text: 'limit' }), limit),
    h('label', {}, h('span', { text: 'per' }), per),
    h('label', { class: 'wide' }, h('span', { text: 'time zone' }), zone, zones),
    h('label', {}, h('span', { text: 'week starts on' }), week),
    button,
  )
}

/** Quota rows made, for their zone lists' ids. */
let builders = 0
