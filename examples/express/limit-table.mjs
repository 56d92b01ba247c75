/**
 * A limit table in memory: entry name -> rules, built from specs (`{ kind, ...the factory's options }`) by
 * the rule factories, so an invalid spec throws their coded error and nothing changes. The shape of
 * DESIGN's `LimitTable`; `createLimitTable` from @sluice/core takes its place once it ships.
 */
import {
  fixedWindow,
  InvalidOptionError,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '@sluice/core'

const factories = { fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket }

function build(specs) {
  if (specs === null) return null
  return specs.map(({ kind, ...options }, i) => {
    if (!Object.hasOwn(factories, kind)) {
      throw new InvalidOptionError(`rules[${i}].kind`, kind, `one of ${Object.keys(factories).join(', ')}`)
    }
    return factories[kind](options)
  })
}

export function memoryLimitTable(initial = {}) {
  const specs = new Map(Object.entries(initial))
  const rules = new Map([...specs].map(([entry, s]) => [entry, build(s)]))
  const trail = []
  let version = 0
  const change = (entry, after, actor) => {
    trail.push({ at: Date.now(), entry, before: specs.get(entry), after, actor })
    if (trail.length > 100) trail.shift()
    version++
  }
  return {
    get version() {
      return version
    },
    /** The rules for `entry` (falling back to `"*"`), or null: not limited. */
    get: (entry) => (rules.has(entry) ? rules.get(entry) : (rules.get('*') ?? null)),
    entries: () => new Map(specs),
    async set(entry, given, { actor } = {}) {
      const built = build(given)
      const copy = given === null ? null : given.map((s) => ({ ...s }))
      change(entry, copy, actor)
      specs.set(entry, copy)
      rules.set(entry, built)
    },
    async delete(entry, { actor } = {}) {
      if (!specs.has(entry)) return
      change(entry, undefined, actor)
      specs.delete(entry)
      rules.delete(entry)
    },
    audit: (count) => trail.slice(-count).reverse(),
  }
}
