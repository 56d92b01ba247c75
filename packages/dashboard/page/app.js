// @ts-check
/**
 * @module The dashboard page's entry: polls the JSON API beside it every second and draws the statistics
 * (stats.js) and the limit tables (tables.js). Every string from the API is put in the page as text
 * (dom.js), never as markup. No inline script or style, no eval: the page runs under a strict CSP, as
 * ES modules the handler serves from its own origin.
 */
import { WRITER } from './api.js'
import { $ } from './dom.js'
import { pollStats, renderLimiters, showRange } from './stats.js'
import { pollTables } from './tables.js'

const POLL_MS = 1000

/**
 * @param {string} kind `live`, `warn` or `down`
 * @param {string} text
 */
function setStatus(kind, text) {
  $('status').dataset.state = kind
  $('status-text').textContent = text
}

async function tick() {
  try {
    const [stats] = await Promise.all([pollStats(), pollTables()])
    const time = new Date(stats.at).toLocaleTimeString()
    if (stats.redisError) setStatus('warn', `${stats.redisError.message} · ${time}`)
    else setStatus('live', `live · ${time}`)
  } catch (error) {
    const e = /** @type {{ code?: string, message?: string }} */ (error)
    setStatus('down', `not updating: ${e.code ? `${e.code}: ` : ''}${e.message}`)
  }
  setTimeout(tick, POLL_MS)
}

$('access-badge').textContent = WRITER ? 'write access' : 'read only'
$('access-badge').dataset.access = WRITER ? 'write' : 'read'
$('range').addEventListener('click', (event) => {
  const target = /** @type {HTMLElement | null} */ (event.target)
  const seconds = Number(target?.dataset?.seconds)
  if (seconds) showRange(seconds)
})
window.addEventListener('resize', () => renderLimiters())
void tick()
