/**
 * @module Names kept one release after they left a surface: each warns once per process, when first used,
 * with a `DeprecationWarning` whose code says which (`node --no-deprecation` silences them, `--throw-deprecation`
 * finds them). A function is wrapped; an object or list is read through a proxy. A constant that is a plain
 * number or string cannot warn at run time: it carries `@deprecated` for editors and type checkers only.
 */

const warned = new Set<string>()

/** Emits the deprecation `code` for `name` once per process. */
export function warnDeprecated(code: string, name: string, message: string): void {
  if (warned.has(name)) return
  warned.add(name)
  const text = `${name} is deprecated: ${message}`
  // Runtimes without Node's process (a browser bundle, an edge worker) get the warning on the console.
  const host = (globalThis as { process?: NodeJS.Process }).process
  if (typeof host?.emitWarning === 'function') host.emitWarning(text, { type: 'DeprecationWarning', code })
  else console.warn(`[${code}] ${text}`)
}

/** `fn`, warning once (under `name`) the first time it is called. */
export function deprecatedFunction<F extends (...args: never[]) => unknown>(
  fn: F,
  code: string,
  name: string,
  message: string,
): F {
  const wrapped = function (this: unknown, ...args: Parameters<F>): ReturnType<F> {
    warnDeprecated(code, name, message)
    return fn.apply(this, args) as ReturnType<F>
  }
  return wrapped as unknown as F
}

/** `value`, warning once (under `name`) the first time one of its properties is read. */
export function deprecatedObject<T extends object>(value: T, code: string, name: string, message: string): T {
  return new Proxy(value, {
    get(target, property, receiver) {
      warnDeprecated(code, name, message)
      return Reflect.get(target, property, receiver)
    },
  })
}
