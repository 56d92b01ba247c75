/**
 * @module The bounds of published statistics, in one place. What one process may publish is bounded by
 * construction (`liveStats` and `publishStats` refuse a configuration past these), and a reader enforces the
 * same numbers on whatever it finds in Redis (`readPublishedStats` skips a value past them unread or unused),
 * so a dashboard holds and sends a bounded amount whatever any publisher wrote.
 */

/** The bounds; every figure is per published value (one process's snapshot) unless it says otherwise. */
export const STATS_BOUNDS = {
  /** Points of every series in one snapshot: limiters × seconds of history (300 s of 120 limiters). */
  points: 36_000,
  /** Limiters in one snapshot (`liveStats({ maxLimiters })` at most). */
  limiters: 1000,
  /** Most denied keys in one snapshot: limiters × `topKeys`. */
  deniedKeys: 4000,
  /** Characters kept of a denied key; a longer key is recorded cut, ending in `…`. */
  keyLength: 128,
  /** Bytes of one snapshot's `meta` as JSON. */
  metaBytes: 4096,
  /** Bytes of one published value as JSON: what one process writes per `intervalMs` (default 1 s). */
  valueBytes: 4 * 1024 * 1024,
  /**
   * Bytes one read (one dashboard poll) fetches over every instance, the most recent first: a dozen
   * processes at every bound, or some sixty publishing 900 s of 10 limiters.
   */
  readBytes: 32 * 1024 * 1024,
} as const

/** A denied key as recorded and published: at most `STATS_BOUNDS.keyLength` characters. */
export function boundedKey(key: string): string {
  return key.length <= STATS_BOUNDS.keyLength ? key : `${key.slice(0, STATS_BOUNDS.keyLength - 1)}…`
}
