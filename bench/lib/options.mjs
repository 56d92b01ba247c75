/**
 * @module A bench script's command line, read one way by every script: `--name value` options and `--name`
 * switches.
 */
const args = process.argv.slice(2)

/** The value after `--name`, or `fallback` when the option is not given. */
export function option(name, fallback) {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? fallback : args[i + 1]
}

/** `option`, as a number. */
export function numberOption(name, fallback) {
  return Number(option(name, fallback))
}

/** Whether the switch `--name` is given. */
export function flag(name) {
  return args.includes(`--${name}`)
}
