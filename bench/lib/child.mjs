/**
 * @module Runs one measurement in a fresh node process, so no library's JIT state or garbage colours
 * another's numbers. A case script reads its parameters from argv[2] (JSON) and prints one line
 * `RESULT <json>`; `report(result)` in the case does that.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const casesDir = fileURLToPath(new URL('../cases/', import.meta.url))

/** Runs `cases/<name>.mjs` with `params`; resolves with its result object. */
export function runCase(name, params, { nodeArgs = [], timeoutMs = 120_000, env = process.env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, `${casesDir}${name}.mjs`, JSON.stringify(params)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => {
      out += c
    })
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-4000)
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      const line = out.split('\n').find((l) => l.startsWith('RESULT '))
      if (code !== 0 || line === undefined) {
        reject(new Error(`case ${name} ${JSON.stringify(params)} failed (${signal ?? code}):\n${err || out}`))
        return
      }
      resolve(JSON.parse(line.slice(7)))
    })
  })
}

/** In a case: the parameters it was started with. */
export function params() {
  return JSON.parse(process.argv[2] ?? '{}')
}

/** In a case: hands the result to the parent. */
export function report(result) {
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
}
