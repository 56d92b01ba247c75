/**
 * @module The built `sluice` command as a user runs it: a child process, its exit code, stdout and
 * stderr. `pnpm build` comes first (the root `pnpm test` builds).
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const SLUICE_BIN = fileURLToPath(new URL('../../packages/cli/dist/main.js', import.meta.url))

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  /** How long the command ran, in ms. */
  readonly ms: number
}

/** Runs `sluice ...args`; never rejects on a non-zero exit (the code is the result). */
export function sluice(...args: string[]): Promise<CliResult> {
  return sluiceWith({}, ...args)
}

/** Runs `sluice ...args` with more environment variables. */
export function sluiceWith(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  const started = performance.now()
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SLUICE_BIN, ...args],
      { cwd: ROOT, timeout: 20_000, env: { ...process.env, ...env } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null
        resolve({ code, stdout, stderr, ms: performance.now() - started })
      },
    )
  })
}
