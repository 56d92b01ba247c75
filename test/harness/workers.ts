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
}

/** Forks `test/workers/<name>` with an IPC channel. */
export function startWorker(name: string): Worker {
  const path = fileURLToPath(new URL(`../workers/${name}`, import.meta.url))
  const child = fork(path, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  live.add(child)
  child.once('exit', () => live.delete(child))
  return {
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
