// @ts-check
/**
 * @module The JSON API beside the page (relative URLs, so any mount path works), and what the page was
 * given: its access and, for a writer, the CSRF token every change carries.
 */

/** @typedef {import('@sluice/dashboard').StatsAnswer} StatsAnswer */
/** @typedef {import('@sluice/dashboard').TableSummary} TableSummary */
/** @typedef {import('@sluice/dashboard').TableView} TableView */

const CSRF = document.querySelector('meta[name="sluice-csrf"]')?.getAttribute('content') ?? ''
const ACCESS = document.querySelector('meta[name="sluice-access"]')?.getAttribute('content') ?? 'read'
/** Whether this page may change tables: write access, and a token to prove it. */
export const WRITER = ACCESS === 'write' && CSRF !== ''

/** An answer the API refused, with its stable code (`ERR_SLUICE_…`, or `HTTP_<status>`). */
export class ApiError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

/**
 * The API's JSON answer at `path`; throws `ApiError` for a refusal.
 * @param {string} path
 * @param {RequestInit & { headers?: Record<string, string> }} [init]
 * @returns {Promise<any>}
 */
async function api(path, init = {}) {
  const response = await fetch(path, { ...init, headers: { accept: 'application/json', ...init.headers } })
  /** @type {{ code?: string, message?: string } | null} */
  let body = null
  try {
    body = await response.json()
  } catch {
    body = null
  }
  if (!response.ok) {
    throw new ApiError(body?.code ?? `HTTP_${response.status}`, body?.message ?? `HTTP ${response.status}`)
  }
  return body
}

/**
 * Every process's statistics, from `since` on (everything when undefined).
 * @param {number | undefined} since
 * @returns {Promise<StatsAnswer>}
 */
export function readStats(since) {
  return api(`api/stats${since === undefined ? '' : `?since=${since}`}`)
}

/** @returns {Promise<{ tables: TableSummary[] }>} */
export function readTables() {
  return api('api/tables')
}

/**
 * @param {string} name
 * @returns {Promise<TableView>}
 */
export function readTable(name) {
  return api(`api/tables/${encodeURIComponent(name)}`)
}

/**
 * Sets an entry to `rules` (specs, or `null` for not limited).
 * @param {string} table
 * @param {string} entry
 * @param {unknown[] | null} rules
 * @returns {Promise<{ table: string, version: number, entry: string, rules: unknown[] | null }>}
 */
export function setEntry(table, entry, rules) {
  return write('PUT', table, entry, JSON.stringify(rules))
}

/**
 * @param {string} table
 * @param {string} entry
 * @returns {Promise<{ table: string, version: number }>}
 */
export function deleteEntry(table, entry) {
  return write('DELETE', table, entry, undefined)
}

/**
 * @param {'PUT' | 'DELETE'} method
 * @param {string} table
 * @param {string} entry
 * @param {string | undefined} body
 */
function write(method, table, entry, body) {
  // The entry goes in the query: in a path, "." and ".." would be resolved away by the URL itself.
  return api(`api/tables/${encodeURIComponent(table)}/entry?name=${encodeURIComponent(entry)}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-sluice-csrf': CSRF },
    ...(body === undefined ? {} : { body }),
  })
}
