/**
 * @module The range of figures in which every rule decides in bounded time and stays exact.
 *
 * Waits, spans and unit counts are doubles. Below 2^53 every whole number is exact, and a figure of at
 * most 2^50 leaves three bits of headroom: an estimate such as `ceil(deficit / rate)` is then off from
 * the exact answer by at most one step, so the fix-up loops that settle it run at most `FIXUP_STEPS`
 * times. Factories reject figures outside this range with an `InvalidOptionError`; beyond it a wait of
 * `x` ms and one of `x + 1` ms can be the same double, and a loop stepping from one to the other would
 * never end.
 */

/** The longest wait (ms) or the most units a rule may have to reckon with. About 35,700 years in ms. */
export const MAX_FIGURE = 2 ** 50

/**
 * The most steps a fix-up loop takes. Within `MAX_FIGURE` one suffices; the cap makes the bound hold by
 * construction too, for state written under other rules (state identity ignores rates and capacities).
 * The Lua scripts use the same cap, so both stores stop at the same answer.
 */
export const FIXUP_STEPS = 2

/** The largest whole number whose thousandths are exact doubles: a token bucket's level is kept in thousandths. */
export const MAX_THOUSANDTHS = Math.floor(Number.MAX_SAFE_INTEGER / 1000)

/**
 * A counting kind's `maxCost` (see kind.ts): a consume brings at most what the rule can ever admit, its
 * `limit`; a penalty at most `MAX_FIGURE`, which keeps both stores' figures exact and a Redis key's expiry a
 * whole number Redis takes (past about 1e17 ms Lua writes it in exponent notation).
 */
export function countingMaxCost(rule: { readonly limit: number }, penalty: boolean): number {
  return penalty ? MAX_FIGURE : rule.limit
}

/** A counting kind's `tooCostly`: why a cost above `countingMaxCost` is refused. */
export function countingTooCostly(
  rule: { readonly limit: number; readonly name: string },
  penalty: boolean,
): string {
  return penalty ? PENALTY_RANGE : `rule ${rule.name} can never admit more than ${rule.limit}`
}

/** Why a penalty above `MAX_FIGURE` is refused. */
const PENALTY_RANGE = 'expected an integer from 1 to 2^50'
