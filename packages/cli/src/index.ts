/**
 * The `sluice` command's building blocks, for scripts and tools that read or write limit specs as an
 * operator types them (`slidingLog:100/1s`, `tokenBucket:50+10/s`, ...). The command itself is the
 * package's `sluice` bin. Re-exports only.
 *
 * @module @sluice/cli
 */
export { parseDuration, parseSpec, parseSpecs, SPEC_FORMS } from './spec.ts'
