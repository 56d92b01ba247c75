/**
 * @module One case's counted calls under callgrind, for the benches that count instructions
 * (core-instructions.mjs, redis-client-instructions.mjs). The case prints READY once warm and DONE after its
 * counted calls, waiting for a line on stdin after each: counting is off until READY (`--instr-atstart=no`),
 * switched on then, and dumped at DONE, so only the counted calls are counted (all threads).
 *
 * Node runs with `--no-concurrent-recompilation`: the optimizing compiler then works on the main thread, when
 * a function turns hot, and not on a helper thread that callgrind's one-thread-at-a-time scheduling slows
 * apart from the calls. Without it, a function compiled late ran its counted calls in baseline code in some
 * runs and not in others (sluice's fixed window read from 1,748 to 2,117 instructions a call). With it, each
 * function is compiled at the same call in every run (1,712 and 1,713). It is the same compiler, run sooner.
 */
import { spawn, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** Stops the bench with a clear line when valgrind is not installed. */
export function needValgrind(bench) {
  if (spawnSync('valgrind', ['--version']).error !== undefined) {
    console.error(`${bench} needs valgrind: apt-get install valgrind`)
    process.exit(1)
  }
}

/**
 * The window of a counted case's subjects (lib/subjects.mjs, `WINDOW_MS`): a day, so that no window ends among
 * the counted calls unless they run across midnight UTC.
 */
const DAY_MS = 86_400_000

function control(argv) {
  const r = spawnSync('callgrind_control', argv, { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`callgrind_control ${argv.join(' ')}: ${r.stderr || r.stdout}`)
}

/**
 * The instructions of one run of `caseFile` with `params` (JSON on its command line), its sluice packages
 * from `snapshotDir`, node given `nodeArgs` besides; dumps are written in `dir` and removed. `label` names
 * the run in errors.
 */
export function countedInstructions(dir, caseFile, params, snapshotDir, label, nodeArgs = []) {
  const out = join(dir, `cg-${process.hrtime.bigint()}`)
  const argv = [
    '--tool=callgrind',
    '--instr-atstart=no',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}.%p`,
    process.execPath,
    '--expose-gc',
    '--no-concurrent-recompilation',
    ...nodeArgs,
    caseFile,
    JSON.stringify(params),
  ]
  return new Promise((done, reject) => {
    const child = spawn('valgrind', argv, {
      env: { ...process.env, SLUICE_BENCH_SNAPSHOT: snapshotDir, SLUICE_BENCH_WINDOW_MS: String(DAY_MS) },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-2000)
    })
    let said = ''
    child.stdout.on('data', (c) => {
      said += c
      if (said.includes('READY\n')) {
        said = said.replace('READY\n', '')
        control(['-i', 'on', String(child.pid)])
        child.stdin.write('go\n')
      }
      if (said.includes('DONE\n')) {
        said = said.replace('DONE\n', '')
        control(['-d', String(child.pid)])
        child.stdin.write('end\n')
      }
    })
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${label}: ${err}`))
      // The dump (part 1) holds what was counted from READY to DONE; the final one, what came after.
      const prefix = out.slice(dir.length + 1)
      const part = readdirSync(dir).find((f) => f.startsWith(prefix) && f.endsWith('.1'))
      if (part === undefined) return reject(new Error(`${label}: no dump`))
      const sum = Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, part), 'utf8'))[1])
      for (const f of readdirSync(dir).filter((f) => f.startsWith(prefix))) rmSync(join(dir, f))
      done(sum)
    })
  })
}
