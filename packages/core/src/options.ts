/**
 * The option checks of every sluice package: public options become resolved config once, at construction.
 * Each check throws `InvalidOptionError` naming the option and the value; nothing falls back silently.
 * sluice's own packages (the Redis store, metrics, the dashboard, the CLI) import these from
 * `@sluice/core/options`, so an option is checked in the same words and with the same code wherever it is read.
 *
 * @module @sluice/core/options
 */
import { InvalidOptionError } from './errors.ts'
import type { Store } from './types.ts'

/**
 * Reads a public options object, the one policy every sluice factory follows: it must be a plain object
 * (not null, not an array); every own name must be one of `known`, whatever its value (a typo such as
 * `windowMS` never passes as a default, even set to `undefined`, and an own `__proto__` is as unknown as any
 * other name); inherited properties are not read. Returns a null-prototype copy without the `undefined`
 * values, so an explicit `undefined` never wipes a default. `where` names the object in errors:
 * `createLimiter`, `rateLimit`, `slidingLog`, so a bad name reads `createLimiter.prefixx`.
 * `undefined` options read as `{}` unless `required`.
 */
export function readOptions<T extends object>(
  where: string,
  options: T | undefined,
  known: readonly string[],
  required = false,
): Partial<T> {
  const out = Object.create(null) as Partial<T>
  if (options === undefined && !required) return out
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError(where, options, 'an options object')
  }
  for (const name of Object.keys(options)) {
    const value = (options as Record<string, unknown>)[name]
    if (!known.includes(name)) {
      throw new InvalidOptionError(`${where}.${name}`, value, `one of the known options: ${known.join(', ')}`)
    }
    if (value !== undefined) (out as Record<string, unknown>)[name] = value
  }
  return out
}

/**
 * `value`, or `fallback` when the option was not given. Unlike `??`, an explicit `null` is kept so
 * that validation rejects it instead of silently applying the default.
 */
export function given<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value
}

/** A safe integer `>= min`. */
export function integerOption(
  option: string,
  value: unknown,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const expected =
      max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`
    throw new InvalidOptionError(option, value, expected)
  }
  return value
}

/** The longest delay a Node timer holds (2^31 - 1 ms); a longer one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647

/** A string of 1 to `max` characters (any characters: a name shown back to the user, a stats key prefix). */
export function stringOption(option: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new InvalidOptionError(option, value, `a string of 1 to ${max} characters`)
  }
  return value
}

/** A finite number `> 0`. */
export function positiveOption(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionError(option, value, 'a finite number > 0')
  }
  return value
}

/** A limit: a safe integer >= 1, or -1 for "not limited". */
export function limitOption(option: string, value: unknown): number {
  if (value === -1) return -1
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidOptionError(option, value, 'an integer >= 1, or -1 for not limited')
  }
  return value
}

/** A function. */
export function functionOption<F>(option: string, value: unknown): F {
  if (typeof value !== 'function') throw new InvalidOptionError(option, value, 'a function')
  return value as F
}

/** A boolean. */
export function booleanOption(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, value, 'true or false')
  return value
}

const PRINTABLE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/

/**
 * A short printable ASCII string (no quotes or backslashes), safe inside header values and Redis keys.
 * Used for rule names and limiter prefixes.
 */
export function labelOption(option: string, value: unknown, extraForbidden = ''): string {
  if (
    typeof value !== 'string' ||
    value.length > 128 ||
    !PRINTABLE.test(value) ||
    /["\\]/.test(value) ||
    [...extraForbidden].some((c) => value.includes(c))
  ) {
    const banned = `" \\${extraForbidden ? ` ${[...extraForbidden].join(' ')}` : ''}`
    throw new InvalidOptionError(option, value, `1 to 128 printable ASCII characters without ${banned}`)
  }
  return value
}

/** `ms` as a compact label: `60s`, `1500ms`. */
export function durationLabel(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

/** Reads a rule factory's options object: required, and only the factory's own names. */
export function ruleOptions<T extends object>(
  where: string,
  options: T | undefined,
  known: readonly string[],
): Partial<T> {
  return readOptions(where, options, known, true)
}

/** Characters a prefix may not hold beyond labelOption's: braces would break the Redis store's hash tags. */
const PREFIX_FORBIDDEN = '{}'

/** A limiter prefix: a label without braces. */
export function prefixOption(option: string, value: unknown): string {
  return labelOption(option, value, PREFIX_FORBIDDEN)
}

/** Whether `value` would pass `prefixOption`, for code that derives prefixes and must stay valid. */
export function isValidPrefix(value: string): boolean {
  try {
    prefixOption('prefix', value)
    return true
  } catch {
    return false
  }
}

/** A store: an object with `apply` and `reset`. */
export function storeOption(option: string, value: unknown): Store {
  const store = value as Partial<Store> | null
  if (
    store === null ||
    typeof store !== 'object' ||
    typeof store.apply !== 'function' ||
    typeof store.reset !== 'function'
  ) {
    throw new InvalidOptionError(option, value, 'a store (an object with apply and reset)')
  }
  return value as Store
}

/** True for a promise or any thenable (a store or a user function may answer either way). */
export function isPromise<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | undefined)?.then === 'function'
}
