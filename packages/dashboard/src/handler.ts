/**
 * @module `dashboard(options)`: the Node `(req, res)` handler that serves the page, its assets and the
 * JSON API under a mount path. Every request is asked `access` first, whatever it asks for; a write must
 * also come from the page's own origin and carry the page's CSRF token. Every response carries a strict
 * Content-Security-Policy, so the page runs only its own script and style.
 *
 * Over 300 lines: every check a request passes (access, origin, CSRF token, its path and query) sits
 * beside the routes it guards, so the dashboard's one gate reads in one file.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { DashboardApi, DashboardError } from './api.ts'
import {
  type Access,
  type DashboardConfig,
  DashboardErrorCode,
  type DashboardOptions,
  dashboardConfig,
} from './options.ts'
import { readRuleSpecs } from './spec.ts'

/** A Node request handler; it never rejects (failures answer 500). */
export type DashboardHandler<Request extends IncomingMessage = IncomingMessage> = (
  req: Request,
  res: ServerResponse,
) => Promise<void>

export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
}

/** Longest entry name accepted in a path, in characters. */
export const MAX_ENTRY_LENGTH = 256

interface Asset {
  type: string
  body: Buffer
}

/**
 * The page's files, read once per process: the handler serves them itself (no CDN, works offline). The
 * page is ES modules (page/*.js, each `// @ts-check`ed by page/tsconfig.json, copied to dist/page/ by the
 * build) and core's rule grammar, bundled by the build (dist/page/grammar.js), which the page imports as
 * `./grammar.js`.
 */
let assets: Map<string, Asset> | undefined

function loadAssets(): Map<string, Asset> {
  if (assets !== undefined) return assets
  // From src/ and from dist/ alike: the build copies the page into dist/page/, beside its bundled grammar.
  const page = new URL('../dist/page/', import.meta.url)
  const script = (body: Buffer): Asset => ({ type: 'text/javascript; charset=utf-8', body })
  let grammar: Buffer
  try {
    grammar = readFileSync(new URL('grammar.js', page))
  } catch (error) {
    throw new Error(
      `@sluice/dashboard is not built: ${(error as Error).message} (run its build, which bundles the page's rule grammar).`,
    )
  }
  const modules = readdirSync(page).filter((name) => name.endsWith('.js') && name !== 'grammar.js')
  assets = new Map([
    ['index.html', { type: 'text/html; charset=utf-8', body: readFileSync(new URL('index.html', page)) }],
    ...modules.map((name): [string, Asset] => [`assets/${name}`, script(readFileSync(new URL(name, page)))]),
    ['assets/grammar.js', script(grammar)],
    ['assets/app.css', { type: 'text/css; charset=utf-8', body: readFileSync(new URL('app.css', page)) }],
    ['assets/icon.svg', { type: 'image/svg+xml', body: readFileSync(new URL('icon.svg', page)) }],
  ])
  return assets
}

/**
 * Where a request falls under the mount: a path relative to it (`/`, `/api/stats`), or a redirect from
 * the mount path without its slash to the mount path with it, or nothing (not ours).
 */
export type Located = { path: string; query: string } | { redirect: string } | undefined

/** Splits `url` at `?`: the path as sent (never normalised: no `//host` or `..` tricks) and the query. */
function splitUrl(url: string): { path: string; query: string } {
  const q = url.indexOf('?')
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) }
}

/** The redirect target for a mount path without its slash: relative, so it survives a proxy's prefix. */
function slashRedirect(mount: string, query: string): string {
  const last = mount.slice(mount.lastIndexOf('/') + 1)
  return `./${encodeURI(decodeSafe(last) ?? last)}/${query === '' ? '' : `?${query}`}`
}

/** Locates a request mounted at `mount` (`''` for the whole server), given its full URL. */
export function locate(fullUrl: string, mount: string): Located {
  const { path, query } = splitUrl(fullUrl)
  if (mount === '') return { path: path === '' ? '/' : path, query }
  if (path === mount) return { redirect: slashRedirect(mount, query) }
  if (!path.startsWith(`${mount}/`)) return undefined
  return { path: path.slice(mount.length), query }
}

/** Express sets `baseUrl` (where the router matched) and `originalUrl`; `url` is relative to the mount. */
function locateRequest(req: IncomingMessage, basePath: string): Located {
  const express = req as IncomingMessage & { baseUrl?: unknown; originalUrl?: unknown }
  if (typeof express.baseUrl === 'string' && typeof express.originalUrl === 'string') {
    return locate(express.originalUrl, express.baseUrl)
  }
  return locate(req.url ?? '/', basePath)
}

function decodeSafe(text: string): string | undefined {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

/**
 * The dashboard as a Node handler. Mount it in Express with `app.use('/sluice', handler)`, in Fastify with
 * `fastifyDashboard`, in a plain `node:http` server (give `basePath` when it gets only some paths), or run
 * it alone with `startDashboard`. Throws `InvalidOptionError` for invalid options, and without `access`.
 */
export function dashboard<Request extends IncomingMessage = IncomingMessage>(
  options: DashboardOptions<Request>,
): DashboardHandler<Request> {
  const server = new DashboardServer(dashboardConfig(options))
  return (req, res) => server.serve(req, res, locateRequest(req, server.basePath))
}

/** The handler's state: config, API, assets and the CSRF token. Adapters call `serve` with a location. */
export class DashboardServer<Request extends IncomingMessage> {
  readonly #config: DashboardConfig<Request>
  readonly #api: DashboardApi<Request>
  readonly #assets: Map<string, Asset>
  /** One per handler unless configured: a page served by this handler carries it, a page from elsewhere cannot. */
  readonly #csrf: string

  constructor(config: DashboardConfig<Request>) {
    this.#config = config
    this.#csrf = config.csrfToken ?? randomBytes(32).toString('base64url')
    this.#api = new DashboardApi(config)
    this.#assets = loadAssets()
  }

  get basePath(): string {
    return this.#config.basePath
  }

  async serve(req: Request, res: ServerResponse, located: Located): Promise<void> {
    try {
      // Before anything else, access included: a Host this dashboard does not serve gets nothing.
      if (!this.#config.hosts.serves(req, req.headers.host)) {
        return sendError(
          res,
          421,
          DashboardErrorCode.HOST,
          'This dashboard does not answer for that Host; name it in allowedHosts to serve it.',
        )
      }
      let access: Access = 'none'
      try {
        const answer = await this.#config.access(req)
        if (answer === 'write' || answer === 'read') access = answer
      } catch {
        // A policy that fails denies: the dashboard is never open by accident.
      }
      if (access === 'none') {
        return sendError(res, 403, DashboardErrorCode.FORBIDDEN, 'Access to the sluice dashboard is denied.')
      }
      if (located === undefined) return sendError(res, 404, DashboardErrorCode.NOT_FOUND, 'Not found.')
      if ('redirect' in located) {
        res.writeHead(308, { ...SECURITY_HEADERS, location: located.redirect, 'content-length': '0' })
        res.end()
        return
      }
      await this.#route(req, res, located.path, located.query, access)
    } catch (error) {
      if (error instanceof DashboardError) return sendError(res, error.status, error.code, error.message)
      if (!res.headersSent) {
        sendError(res, 500, DashboardErrorCode.UNAVAILABLE, 'The dashboard failed to answer.')
      } else {
        res.destroy()
      }
    }
  }

  async #route(req: Request, res: ServerResponse, path: string, query: string, access: Access) {
    const method = req.method ?? 'GET'
    const read = method === 'GET' || method === 'HEAD'
    if (path === '/' || path === '/index.html') {
      if (!read) throw methodNotAllowed(res, 'GET, HEAD')
      return this.#page(res, access)
    }
    const asset = path.startsWith('/assets/') ? this.#assets.get(path.slice(1)) : undefined
    if (asset !== undefined) {
      if (!read) throw methodNotAllowed(res, 'GET, HEAD')
      return send(res, 200, asset.type, asset.body)
    }
    if (!path.startsWith('/api/')) throw new DashboardError(404, DashboardErrorCode.NOT_FOUND, 'Not found.')
    const parts = path.slice('/api/'.length).split('/')
    if (parts.length === 1 && parts[0] === 'stats') {
      if (!read) throw methodNotAllowed(res, 'GET, HEAD')
      return sendJson(res, 200, await this.#api.stats(sinceOf(query)))
    }
    if (parts[0] !== 'tables') throw new DashboardError(404, DashboardErrorCode.NOT_FOUND, 'Not found.')
    if (parts.length === 1) {
      if (!read) throw methodNotAllowed(res, 'GET, HEAD')
      return sendJson(res, 200, this.#api.tables())
    }
    const name = pathPart(parts[1]!, 'table name', 100)
    if (parts.length === 2) {
      if (!read) throw methodNotAllowed(res, 'GET, HEAD')
      return sendJson(res, 200, await this.#api.table(name))
    }
    let entry: string
    if (parts.length === 3 && parts[2] === 'entry') {
      // `entry?name=…`: any entry name, "." and ".." included, which a path cannot carry (URLs resolve them).
      entry = entryOf(query)
    } else if (parts.length === 4 && parts[2] === 'entries') {
      entry = pathPart(parts[3]!, 'entry name', MAX_ENTRY_LENGTH)
    } else {
      throw new DashboardError(404, DashboardErrorCode.NOT_FOUND, 'Not found.')
    }
    if (method !== 'PUT' && method !== 'DELETE') throw methodNotAllowed(res, 'PUT, DELETE')
    this.#checkWrite(req, access)
    const actor = actorText(this.#config.actor(req))
    if (method === 'DELETE') return sendJson(res, 200, await this.#api.delete(name, entry, actor))
    const body = await readJsonBody(req, res, this.#config.maxBodyBytes)
    let rules: ReturnType<typeof readRuleSpecs>
    try {
      rules = readRuleSpecs(body)
    } catch (error) {
      const e = error as { code: string; message: string }
      throw new DashboardError(400, e.code, e.message)
    }
    return sendJson(res, 200, await this.#api.set(name, entry, rules, actor))
  }

  /** Only a writer, from this origin, with the page's token, may change a table. */
  #checkWrite(req: Request, access: Access): void {
    if (access !== 'write') {
      throw new DashboardError(403, DashboardErrorCode.FORBIDDEN, 'Read access cannot change a table.')
    }
    const site = req.headers['sec-fetch-site']
    if (site !== undefined && site !== 'same-origin') {
      throw new DashboardError(
        403,
        DashboardErrorCode.CROSS_ORIGIN,
        'A table can only be changed from the dashboard page.',
      )
    }
    const origin = req.headers.origin
    if (origin !== undefined && !this.#config.hosts.ownOrigin(req, origin)) {
      throw new DashboardError(
        403,
        DashboardErrorCode.CROSS_ORIGIN,
        'A table can only be changed from the dashboard page.',
      )
    }
    const token = req.headers['x-sluice-csrf']
    if (typeof token !== 'string' || !sameSecret(token, this.#csrf)) {
      throw new DashboardError(
        403,
        DashboardErrorCode.CSRF,
        'A change needs the header x-sluice-csrf with the token of the dashboard page.',
      )
    }
  }

  #page(res: ServerResponse, access: Access): void {
    const html = this.#assets
      .get('index.html')!
      .body.toString('utf8')
      .replace(
        '<meta name="sluice-csrf" content="">',
        `<meta name="sluice-csrf" content="${access === 'write' ? this.#csrf : ''}">`,
      )
      .replace('<meta name="sluice-access" content="">', `<meta name="sluice-access" content="${access}">`)
    send(res, 200, 'text/html; charset=utf-8', Buffer.from(html))
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  // timingSafeEqual needs equal lengths; a guess of another length still costs one comparison.
  if (a.length !== b.length) {
    timingSafeEqual(b, b)
    return false
  }
  return timingSafeEqual(a, b)
}

function methodNotAllowed(res: ServerResponse, allow: string): DashboardError {
  res.setHeader('allow', allow)
  return new DashboardError(405, DashboardErrorCode.METHOD, `Method not allowed here; allowed: ${allow}.`)
}

/** A path segment, URL-decoded and bounded. */
function pathPart(raw: string, what: string, max: number): string {
  const decoded = decodeSafe(raw)
  if (decoded === undefined || decoded.length === 0 || decoded.length > max || hasControlCharacter(decoded)) {
    throw new DashboardError(
      400,
      DashboardErrorCode.BAD_REQUEST,
      `The ${what} must be 1 to ${max} characters, URL-encoded, without control characters.`,
    )
  }
  return decoded
}

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}

/** The entry named by `?name=` (URL-encoded), bounded as a path's. */
function entryOf(query: string): string {
  const name = new URLSearchParams(query).get('name')
  if (name === null || name.length === 0 || name.length > MAX_ENTRY_LENGTH || hasControlCharacter(name)) {
    throw new DashboardError(
      400,
      DashboardErrorCode.BAD_REQUEST,
      `The entry name (?name=) must be 1 to ${MAX_ENTRY_LENGTH} characters, URL-encoded, without control characters.`,
    )
  }
  return name
}

/** Control and format characters (bidi overrides among them), separators, lone surrogates. */
const UNSAFE_TEXT = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu

/** Who a change is recorded as: the `actor` option's answer, each unsafe character replaced, at most 128. */
function actorText(value: unknown): string {
  const text = String(value).replace(UNSAFE_TEXT, '\uFFFD').slice(0, 128)
  return text === '' ? 'dashboard' : text
}

/** `?since=T` (whole seconds): only the seconds after T are wanted. */
function sinceOf(query: string): number | undefined {
  const since = new URLSearchParams(query).get('since')
  if (since === null) return undefined
  if (!/^\d{1,12}$/.test(since)) {
    throw new DashboardError(
      400,
      DashboardErrorCode.BAD_REQUEST,
      'since must be whole seconds since the epoch.',
    )
  }
  return Number(since)
}

/**
 * Reads a JSON body of at most `max` bytes; nothing is parsed until all of it has arrived within the bound.
 * A body a framework already parsed (Express's `express.json()` before the dashboard) is taken as it is.
 */
async function readJsonBody(req: IncomingMessage, res: ServerResponse, max: number): Promise<unknown> {
  const type = req.headers['content-type'] ?? ''
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new DashboardError(415, DashboardErrorCode.MEDIA_TYPE, 'An edit is sent as application/json.')
  }
  const tooLarge = () => {
    // The rest of the body is discarded unread and the connection closes after the answer.
    res.setHeader('connection', 'close')
    return new DashboardError(413, DashboardErrorCode.TOO_LARGE, `An edit is at most ${max} bytes.`)
  }
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > max) {
    req.resume()
    throw tooLarge()
  }
  const parsed = req as IncomingMessage & { body?: unknown }
  if (req.readableEnded && parsed.body !== undefined) {
    if (Buffer.byteLength(JSON.stringify(parsed.body) ?? '') > max) throw tooLarge()
    return parsed.body
  }
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= max) return void chunks.push(chunk)
      req.off('data', onData)
      req.off('end', onEnd)
      req.resume()
      reject(tooLarge())
    }
    const onEnd = () => resolve(Buffer.concat(chunks).toString('utf8'))
    req.on('data', onData)
    req.once('end', onEnd)
    req.once('error', reject)
  })
  try {
    return JSON.parse(text)
  } catch {
    throw new DashboardError(400, DashboardErrorCode.BAD_REQUEST, 'The body is not valid JSON.')
  }
}

function send(res: ServerResponse, status: number, type: string, body: Buffer): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': String(body.length) })
  res.end(body)
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, 'application/json; charset=utf-8', Buffer.from(JSON.stringify(value)))
}

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  sendJson(res, status, { code, message })
}
