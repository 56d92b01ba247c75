/**
 * @module Child processes for the multi-process suites (test/workers/*.mjs), tracked and killed
 * by `stopWorkers()` and on exit, so none outlives a failing test.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

export interface Worker {
  /** Sends `message` and resolves with the worker's next reply (rejects on `{ error }` or exit). */
  ask<T = Record<string, unknown>>(message: object): Promise<T>
  /** The child's pid. */
  readonly pid: number | undefined
  /** How the child ended, or undefined while it runs: `{ code, signal }` as Node reports them. */
  readonly exit: { code: number | null; signal: NodeJS.Signals | null } | undefined
  /** SIGKILLs the child (if it still runs) and resolves once it has exited. */
  kill(): Promise<void>
}

export interface WorkerOptions {
  /** Extra environment variables for the child (added to this process's). */
  env?: Record<string, string>
  /** Node flags for the child, e.g. `['--expose-gc']`. */
  execArgv?: string[]
}

/** Forks `test/workers/<name>` with an IPC channel. */
export function startWorker(name: string, options: WorkerOptions = {}): Worker {
  const path = fileURLToPath(new URL(`../workers/${name}`, import.meta.url))
  const child = fork(path, [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
    ...(options.execArgv === undefined ? {} : { execArgv: options.execArgv }),
  })
  live.add(child)
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exit = { code, signal }
      live.delete(child)
      resolve()
    })
  })
  return {
    get pid() {
      return child.pid
    },
    get exit() {
      return exit
    },
    kill() {
      if (exit === undefined) child.kill('SIGKILL')
      return exited
    },
    ask<T>(message: object): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`worker ${name} exited with ${code}`))
        child.once('exit', onExit)
        child.once('message', (reply: { error?: string }) => {
          child.off('exit', onExit)
          if (reply.error !== undefined) reject(new Error(`worker ${name} failed: ${reply.error}`))
          else resolve(reply as T)
        })
        child.send(message)
      })
    },
  }
}

export function stopWorkers(): void {
  for (const child of live) child.kill('SIGKILL')
  live.clear()
}
