/** @module Where a command writes: stdout for results (JSON), stderr for errors and help. */
export interface Io {
  out(text: string): void
  err(text: string): void
}

/** Exit codes: 0 done, 1 invalid input, 2 Redis could not be reached. */
export const EXIT = { ok: 0, invalid: 1, unreachable: 2 } as const
