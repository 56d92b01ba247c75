/**
 * @module The examples as their users run them: `node examples/<name>/<script>` in a child process with
 * its own environment, on a free port. Every process started here is tracked, and killed by
 * `stopExamples()` (call it in `afterAll`) or, failing that, when the test process exits.
 * The scripts import the built packages from the example's node_modules, so `pnpm build` comes first.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))

const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

/** A port nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0))
    })
  })
}

/** A running example script. */
export interface Running {
  readonly pid: number
  /** Everything it has printed so far, stdout and stderr interleaved. */
  output(): string
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  readonly exited: Promise<number | null>
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code once it has exited. */
  stop(graceMs?: number): Promise<number | null>
}

/** Starts `node <script>` from the repository root, with `env` added to this process's environment. */
export function run(
  script: string,
  args: string[] = [],
  env: Record<string, string | undefined> = {},
): Running {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  live.add(child)
  let text = ''
  child.stdout!.on('data', (chunk) => {
    text += chunk
  })
  child.stderr!.on('data', (chunk) => {
    text += chunk
  })
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child)
      resolve(code)
    })
  })
  return {
    pid: child.pid!,
    output: () => text,
    exited,
    async stop(graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited
      child.kill('SIGTERM')
      const force = setTimeout(() => child.kill('SIGKILL'), graceMs)
      const code = await exited
      clearTimeout(force)
      return code
    },
  }
}

/**
 * Waits until the process's output matches `pattern`; resolves with the match. Rejects with the output
 * so far when the process exits first or `timeoutMs` passes.
 */
export async function waitFor(
  running: Running,
  pattern: RegExp,
  timeoutMs = 15_000,
): Promise<RegExpMatchArray> {
  const until = Date.now() + timeoutMs
  let exited = false
  void running.exited.then(() => {
    exited = true
  })
  for (;;) {
    const match = running.output().match(pattern)
    if (match !== null) return match
    if (exited || Date.now() > until) {
      throw new Error(
        `${exited ? 'Exited' : 'Timed out'} before printing ${pattern}. Output:\n${running.output()}`,
      )
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Starts an example server on a free port and waits for its "on http://localhost:<port>" line. */
export async function startServer(
  script: string,
  env: Record<string, string | undefined> = {},
): Promise<Running & { url: string }> {
  const port = await freePort()
  const running = run(script, [], { PORT: String(port), ...env })
  await waitFor(running, new RegExp(`on http://localhost:${port}\\b`))
  return Object.assign(running, { url: `http://127.0.0.1:${port}` })
}

/** Kills every process started here that is still running. */
export async function stopExamples(): Promise<void> {
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once('exit', () => resolve())
          child.kill('SIGKILL')
        }),
    ),
  )
  live.clear()
}

/** Whether a process with this pid is running (and not a zombie of ours). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export interface Reply {
  status: number
  headers: Headers
  /** The body parsed as JSON when it is JSON, else `{}`. */
  body: Record<string, unknown>
  text: string
  /** When the reply arrived, in ms after the request was sent. */
  tookMs: number
}

/** One request, its body read to the end. */
export async function request(url: string, init: RequestInit = {}): Promise<Reply> {
  const started = performance.now()
  const res = await fetch(url, init)
  const text = await res.text()
  return {
    status: res.status,
    headers: res.headers,
    body: /json/.test(res.headers.get('content-type') ?? '')
      ? (JSON.parse(text) as Record<string, unknown>)
      : {},
    text,
    tookMs: performance.now() - started,
  }
}

/** `n` of the same request at once. */
export function many(n: number, url: string, init: RequestInit = {}): Promise<Reply[]> {
  return Promise.all(Array.from({ length: n }, () => request(url, init)))
}

/** How many replies had each status, e.g. `{ 200: 3, 429: 7 }`. */
export function statuses(replies: readonly Reply[]): Record<number, number> {
  const out: Record<number, number> = {}
  for (const r of replies) out[r.status] = (out[r.status] ?? 0) + 1
  return out
}
