/**
 * @module A small argument reader for the `sluice` subcommands: `--name value`, `--name=value`, `--flag`,
 * and positionals. A positional may start with `-` (the spec `-1`): only `--` names an option.
 */
import { InvalidOptionError } from '@sluice/core'

export interface Args {
  readonly positionals: readonly string[]
  readonly options: ReadonlyMap<string, string | true>
}

/** Reads `argv`; `valued` options take a value, `flags` none. Anything else after `--` is an error. */
export function readArgs(argv: readonly string[], valued: readonly string[], flags: readonly string[]): Args {
  const positionals: string[] = []
  const options = new Map<string, string | true>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1))
      break
    }
    if (arg === '-h') {
      options.set('help', true)
      continue
    }
    if (!arg.startsWith('--')) {
      positionals.push(arg)
      continue
    }
    const eq = arg.indexOf('=')
    const name = arg.slice(2, eq < 0 ? undefined : eq)
    if (flags.includes(name) && eq < 0) options.set(name, true)
    else if (valued.includes(name)) {
      const value = eq < 0 ? argv[++i] : arg.slice(eq + 1)
      if (value === undefined) throw new InvalidOptionError(`--${name}`, value, 'a value')
      options.set(name, value)
    } else {
      throw new InvalidOptionError(
        arg,
        undefined,
        `one of ${[...valued, ...flags].map((o) => `--${o}`).join(', ')}`,
      )
    }
  }
  return { positionals, options }
}
