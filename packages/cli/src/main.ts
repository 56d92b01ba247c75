#!/usr/bin/env node
/**
 * @module The `sluice` command: a small dispatcher from the first argument to its subcommand module
 * (`limits` -> limits.ts, `dashboard` -> dashboard.ts, `postgres` -> postgres.ts). Every error is printed as `CODE: message` on stderr; the exit code says what
 * kind of failure it was (see io.ts).
 */
import { SluiceError, StoreError } from '@sluice/core'
import { DashboardError, DashboardErrorCode } from '@sluice/dashboard'
import { dashboardCommand } from './dashboard.ts'
import { EXIT, type Io } from './io.ts'
import { limits } from './limits.ts'
import { postgresCommand } from './postgres.ts'

/** Subcommands by name. Each takes its arguments and where to write, and resolves with its exit code. */
const COMMANDS: Readonly<Record<string, (argv: readonly string[], io: Io) => Promise<number>>> = {
  limits,
  dashboard: dashboardCommand,
  postgres: postgresCommand,
}

const USAGE = `Usage: sluice <command> [arguments]

Commands:
  limits      read and change a limit table kept in Redis (sluice limits --help)
  dashboard   serve the live dashboard for a Redis: statistics and limit tables (sluice dashboard --help)
  postgres    create the PostgresStore's table and functions (sluice postgres migrate --help)

Exit codes: 0 done, 1 invalid input, 2 Redis (or PostgreSQL) could not be reached.`

export async function main(argv: readonly string[], io: Io): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined) {
    io.err(USAGE)
    return EXIT.invalid
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    // Help asked for is the command's output: stdout, so it pipes into a pager.
    io.out(USAGE)
    return EXIT.ok
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (command === undefined) {
    io.err(`ERR_SLUICE_INVALID_OPTION: Unknown command ${JSON.stringify(name)}.\n\n${USAGE}`)
    return EXIT.invalid
  }
  try {
    return await command(rest, io)
  } catch (error) {
    if (
      error instanceof StoreError ||
      (error instanceof DashboardError && error.code === DashboardErrorCode.UNAVAILABLE)
    ) {
      io.err(`${error.code}: ${error.message}`)
      return EXIT.unreachable
    }
    if (error instanceof SluiceError) {
      io.err(`${error.code}: ${error.message}`)
      return EXIT.invalid
    }
    io.err(`ERR_SLUICE_CLI: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    return EXIT.invalid
  }
}

const io: Io = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}

main(process.argv.slice(2), io).then((code) => {
  process.exitCode = code
})
