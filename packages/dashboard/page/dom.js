// @ts-check
/**
 * @module The page's DOM helpers. Every string from the API goes in as text (textContent, createTextNode,
 * attribute values), never as markup, and is shown with its control and format characters visible.
 */

const SVG_NS = 'http://www.w3.org/2000/svg'

/** Control and format characters (bidi overrides, zero-width ones), separators, lone surrogates. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu
/** Longest text shown of one string from the API; the rest is cut (a 100 KB name must not be a 48,000 px row). */
const MAX_SHOWN = 300

/**
 * A string from the API as shown: each control or format character as a visible `\u{…}` (a bidi
 * override would otherwise reverse what follows it), cut at MAX_SHOWN characters.
 * @param {string} text
 * @returns {string}
 */
export function shown(text) {
  const safe = text.replace(UNSAFE, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16).toUpperCase()}}`)
  return safe.length > MAX_SHOWN ? `${safe.slice(0, MAX_SHOWN)}…` : safe
}

/**
 * What `h` takes: `class`, `text` (shown as text), `on…` listeners, and attributes (skipped when
 * undefined, null or false; `true` is an empty attribute).
 * @typedef {Record<string, string | number | boolean | null | undefined | EventListener>} Props
 */

/** @typedef {Node | string | number | null | undefined | false} Child */

/**
 * An HTML element with `props` and `children`, strings among them as text.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Props} [props]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue
    if (typeof value === 'function') el.addEventListener(name.slice(2), value)
    else if (name === 'class') el.className = String(value)
    else if (name === 'text') el.textContent = shown(String(value))
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue
    el.append(child instanceof Node ? child : document.createTextNode(shown(String(child))))
  }
  return el
}

/**
 * An SVG element with `attributes`, and `children` (strings as text).
 * @param {string} tag
 * @param {Record<string, string | number>} [attributes]
 * @param {...(Node | string)} children
 * @returns {SVGElement}
 */
export function svg(tag, attributes = {}, ...children) {
  const el = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag))
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, String(value))
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(child))
  return el
}

/**
 * The page's element with this id (index.html has every one the modules ask for).
 * @param {string} id
 * @returns {HTMLElement}
 */
export function $(id) {
  const el = document.getElementById(id)
  if (el === null) throw new Error(`The page has no #${id}.`)
  return el
}
