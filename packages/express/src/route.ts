/**
 * @module The route template of an Express request, mount paths included: `GET /t/:tenant/pay` for a
 * request to `/T/acme/pay` under `app.use('/t/:tenant', router)`. Express hands a middleware the route's
 * own template (`req.route.path`) but only the raw text its mounts matched (`req.baseUrl`: `/T/acme`),
 * whose letter case and parameter values are the client's to choose, so a key or a metrics label built
 * from it would be a new one for every case and value. The mounts' templates are read from the routers
 * themselves: the chain of mount layers leading to the route (or to the middleware), found once, then
 * matched against `req.baseUrl` per request to pick among chains when the same router is mounted twice.
 */

/** A router's layer, as both Express 4 (`regexp`, `keys`) and Express 5 (`rawPath`, `match`) keep it. */
interface Layer {
  readonly route?: unknown
  readonly handle?: unknown
  /** Express 5: the path the layer was given (a string, a RegExp or a list of these). */
  readonly rawPath?: unknown
  /** Express 5: the matched text and the pattern of the list's entry that matched, or false. */
  readonly match?: (path: string) => { readonly path: string; readonly pattern: unknown } | false
  /** Express 4: the layer's path compiled, with its parameter names. */
  readonly regexp?: RegExp & { readonly fast_slash?: boolean }
  readonly keys?: readonly { readonly name: string | number }[]
}

/** Mount layers from the app's router down to the router holding the target. */
type Chain = readonly Layer[]

/** An app as this module reads it: its router (Express 4 `_router`, Express 5 `router`), and where it is mounted. */
interface App {
  readonly _router?: unknown
  readonly router?: unknown
  readonly parent?: unknown
  readonly mountpath?: unknown
}

/** What a route template is read for: the matched route, or the middleware itself when no route matched. */
type Target = object

/** Chains found per target and app router. Both are objects of the app's own making: bounded by its code. */
const chainsFound = new WeakMap<Target, WeakMap<object, readonly Chain[]>>()

/** Deepest nesting of routers searched; an app nests a handful. */
const MAX_DEPTH = 32

/**
 * The template of the path `req.baseUrl` matched: `''` when nothing is mounted, `/t/:tenant` under
 * `app.use('/t/:tenant', router)`. Undefined when no chain of mounts to `target` matches (a router
 * mounted in a way this module cannot read); the caller then falls back to the raw text.
 */
export function mountTemplate(
  req: { readonly baseUrl: string; readonly app?: unknown },
  target: Target,
): string | undefined {
  const raw = req.baseUrl
  if (raw === '' || raw === undefined) return ''
  const app = req.app as App | undefined
  const router = app === undefined ? undefined : routerOf(app)
  if (app === undefined || router === undefined) return undefined
  const prefix = app.parent === undefined ? '' : appPrefix(app)
  if (prefix === undefined) return undefined
  let byRouter = chainsFound.get(target)
  if (byRouter === undefined) {
    byRouter = new WeakMap()
    chainsFound.set(target, byRouter)
  }
  const known = byRouter.get(router)
  const found = known === undefined ? undefined : templateOf(known, raw, app.parent !== undefined)
  if (found !== undefined) return prefix + found
  // Not searched yet, or the app mounted more since: search again.
  const chains = chainsTo(router, target)
  byRouter.set(router, chains)
  const template = templateOf(chains, raw, app.parent !== undefined)
  return template === undefined ? undefined : prefix + template
}

/**
 * The template of the first chain whose mounts match `raw` in full. In a sub-app, `raw` begins with what
 * the parent apps matched: the chain must match what is left after it, tried from the shortest such part.
 */
function templateOf(chains: readonly Chain[], raw: string, subApp: boolean): string | undefined {
  for (const chain of chains) {
    if (!subApp) {
      const whole = chainTemplate(chain, raw)
      if (whole !== undefined) return whole
      continue
    }
    for (let at = raw.indexOf('/', 1); ; at = raw.indexOf('/', at + 1)) {
      const rest = chainTemplate(chain, at < 0 ? '' : raw.slice(at))
      if (rest !== undefined) return rest
      if (at < 0) break
    }
  }
  return undefined
}

/** The chain's templates joined, when its mounts match exactly `raw`, one after the other. */
function chainTemplate(chain: Chain, raw: string): string | undefined {
  let rest = raw
  let template = ''
  for (const layer of chain) {
    const matched = layerTemplate(layer, rest)
    if (matched === undefined) return undefined
    template += matched.template
    rest = rest.slice(matched.length)
  }
  return rest === '' || rest === '/' ? template : undefined
}

/** What a mount layer matches at the start of `rest`: its raw length and its template. */
function layerTemplate(layer: Layer, rest: string): { length: number; template: string } | undefined {
  if (typeof layer.match === 'function' && 'rawPath' in layer) {
    const match = rest === '' ? layer.match('/') : layer.match(rest)
    if (match === false) return undefined
    const length = rest === '' ? 0 : match.path.length
    return { length, template: textOf(match.pattern) }
  }
  const regexp = layer.regexp
  if (regexp === undefined) return undefined
  if (regexp.fast_slash === true) return { length: 0, template: '' }
  const match = regexp.exec(rest === '' ? '/' : rest)
  if (match === null || match.index !== 0) return undefined
  return { length: rest === '' ? 0 : match[0].length, template: express4Template(regexp, layer.keys) }
}

/** A mount pattern as text, without a trailing `/` (`'/'` is the root, `''`). */
function textOf(pattern: unknown): string {
  const text = typeof pattern === 'string' ? pattern : String(pattern)
  return text.endsWith('/') ? text.slice(0, -1) : text
}

/** The tail path-to-regexp 0.1 (Express 4) gives a mount: an optional `/`, then a `/` or the end. */
const MOUNT_TAIL = '\\/?(?=\\/|$)'
/** A `:name` segment as path-to-regexp 0.1 compiles it. */
const PARAMETER = /\(\?:\\\/\(\[\^\/\]\+\?\)\)/g
/** Anything but escaped literals left after the parameters are read: the template is not plain. */
const PATTERN_SYNTAX = /[()[\]{}*+?|^$.]/

/**
 * Express 4 keeps no text of a mount path, only its regular expression. A plain one (literal segments
 * and `:name` parameters) reads back as its template; anything else (a RegExp mount, a list of paths,
 * `*`, optional parts) is named by its regular expression, which is just as fixed per mount.
 */
const express4Templates = new WeakMap<RegExp, string>()

function express4Template(regexp: RegExp, keys: Layer['keys']): string {
  let template = express4Templates.get(regexp)
  if (template === undefined) {
    template = readExpress4(regexp.source, keys ?? []) ?? String(regexp)
    express4Templates.set(regexp, template)
  }
  return template
}

function readExpress4(source: string, keys: NonNullable<Layer['keys']>): string | undefined {
  if (!source.startsWith('^') || !source.endsWith(MOUNT_TAIL)) return undefined
  let read = 0
  const body = source
    .slice(1, -MOUNT_TAIL.length)
    .replace(PARAMETER, () => `\\/:${String(keys[read++]?.name ?? '')}`)
  if (read !== keys.length || PATTERN_SYNTAX.test(body.replace(/\\./g, ''))) return undefined
  return textOf(body.replace(/\\(.)/g, '$1'))
}

/** Every chain of mount layers from `router` to a layer holding `target` (a route, or a middleware). */
function chainsTo(router: object, target: Target): Chain[] {
  const chains: Chain[] = []
  const visit = (stack: unknown, chain: Layer[], seen: Set<object>) => {
    if (!Array.isArray(stack) || chain.length > MAX_DEPTH) return
    for (const layer of stack as Layer[]) {
      if (layer === null || typeof layer !== 'object') continue
      if (layer.route !== undefined) {
        if (layer.route === target) chains.push(chain)
        continue
      }
      const handle = layer.handle as (((...args: never[]) => unknown) & { stack?: unknown }) | undefined
      // A middleware's own mount path is part of `req.baseUrl` as it runs.
      if (handle === target) chains.push([...chain, layer])
      else if (typeof handle === 'function' && Array.isArray(handle.stack) && !seen.has(handle)) {
        seen.add(handle)
        visit(handle.stack, [...chain, layer], seen)
        seen.delete(handle)
      }
    }
  }
  visit((router as { stack?: unknown }).stack, [], new Set([router]))
  return chains
}

function routerOf(app: App): object | undefined {
  const router = app._router ?? app.router
  return typeof router === 'function' || (router !== null && typeof router === 'object')
    ? (router as object)
    : undefined
}

/**
 * The templates of a sub-app's mounts (`app.mountpath`) up to the outermost app, joined. Routers between
 * apps are not seen here; undefined when a mount path is not a single string.
 */
function appPrefix(app: App): string | undefined {
  let prefix = ''
  for (let at: App | undefined = app; at?.parent !== undefined; at = at.parent as App) {
    if (typeof at.mountpath !== 'string') return undefined
    prefix = textOf(at.mountpath) + prefix
  }
  return prefix
}
