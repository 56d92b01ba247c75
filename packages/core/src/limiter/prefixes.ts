/**
 * @module Which limiter counts under which prefix, per store and per place (the Redis client a store
 * writes to): two live limiters never share counts unless they share a prefix given on purpose.
 */
import { ErrorCode, SluiceError } from '../errors.ts'
import type { Store, StorePlace } from '../types.ts'

/** Prefixes claimed per store object, and per place (`Store.place`'s owner) for default prefixes. */
const prefixesInUse = new WeakMap<object, Set<string>>()

/**
 * Claims `prefix` on `store` (and in its place, for a prefix left to its default); throws
 * `ERR_SLUICE_PREFIX_COLLISION` when another live limiter holds it. Answers the place claimed, for `unclaimPrefix`.
 */
export function claimPrefix(store: Store, prefix: string, defaulted: boolean): StorePlace | undefined {
  const place = defaulted ? placeOf(store) : undefined
  const inStore = claimsOf(store)
  if (inStore.has(prefix)) {
    throw new SluiceError(
      ErrorCode.PREFIX_COLLISION,
      `Another limiter on this store already uses prefix "${prefix}": give each limiter its own prefix, or share one limiter.`,
    )
  }
  if (place !== undefined) {
    const inPlace = claimsOf(place.owner)
    if (inPlace.has(placed(place, prefix))) {
      throw new SluiceError(
        ErrorCode.PREFIX_COLLISION,
        `Another limiter already counts under the default prefix "${prefix}" on this store's client, in another store: the two would share every count. Give each limiter (each rate-limit middleware) its own prefix, e.g. prefix: 'login'; give two the same prefix only to share their counts.`,
      )
    }
    inPlace.add(placed(place, prefix))
  }
  inStore.add(prefix)
  return place
}

/** A store's place, when it names one an object can stand for (a custom store's odd answer names none). */
function placeOf(store: Store): StorePlace | undefined {
  const place = store.place
  if (place === null || typeof place !== 'object') return undefined
  const { owner, namespace } = place
  const isObject = (typeof owner === 'object' && owner !== null) || typeof owner === 'function'
  return isObject && typeof namespace === 'string' ? place : undefined
}

function claimsOf(owner: object): Set<string> {
  let inUse = prefixesInUse.get(owner)
  if (inUse === undefined) {
    inUse = new Set()
    prefixesInUse.set(owner, inUse)
  }
  return inUse
}

/** A prefix claimed in a place, apart from the same prefix under another store prefix there. */
function placed(place: StorePlace, prefix: string): string {
  return `${place.namespace}\u0000${prefix}`
}

/** Gives up a prefix `claimPrefix` took, so a new limiter may take it. */
export function unclaimPrefix(store: Store, prefix: string, place: StorePlace | undefined): void {
  prefixesInUse.get(store)?.delete(prefix)
  if (place !== undefined) prefixesInUse.get(place.owner)?.delete(placed(place, prefix))
}
