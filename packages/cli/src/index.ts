/**
 * The `sluice` command's building blocks. Limit specs as an operator types them (`slidingLog:100/1s`,
 * `tokenBucket:50+10/s`, ...) are read by core's one rule grammar, `parseRuleSpec` in `@sluice/core`; the
 * names below are re-exported as they were, deprecated, for one release. The command itself is the
 * package's `sluice` bin. Re-exports only.
 *
 * @module @sluice/cli
 */
export { parseDuration, parseSpec, parseSpecs, SPEC_FORMS } from '@sluice/dashboard'
