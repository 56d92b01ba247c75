/**
 * @module The examples as their users run them: `node examples/<name>/<script>` (or another runtime's
 * binary) in a child process with its own environment, on a free port. Every process started here leads a
 * process group of its own, and ending it ends the group: the process and every child it started (a
 * redis-server, workers, the runtime behind a package manager's shell shim). `stopExamples()` (call it in
 * `afterAll`) ends what is still running, as the test process's exit does, failing that.
 * The scripts import the built packages from the example's node_modules, so `pnpm build` comes first.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))

const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) signalGroup(child.pid!, 'SIGKILL')
})

/** Sends `signal` to the process group `pid` leads; false when no process of it is left. */
function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal)
    return true
  } catch {
    return false
  }
}

/**
 * Resolves once no process of the group `pid` leads is left, sending SIGKILL to what remains (a child that
 * ignored SIGTERM, or one its parent left behind when it died).
 */
async function groupGone(pid: number): Promise<void> {
  for (let i = 0; signalGroup(pid, 0); i++) {
    if (i % 50 === 49) signalGroup(pid, 'SIGKILL')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

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
  /**
   * SIGTERM to its process group, then SIGKILL after `graceMs`; resolves with the exit code once it and every
   * process of its group have exited.
   */
  stop(graceMs?: number): Promise<number | null>
}

/** Starts `node <script>` from the repository root, with `env` added to this process's environment. */
export function run(
  script: string,
  args: string[] = [],
  env: Record<string, string | undefined> = {},
): Running {
  return start(process.execPath, [script, ...args], env)
}

/**
 * Starts `command` from the repository root, with `env` added to this process's environment, as the leader
 * of a process group of its own: stopping it ends the group, whatever `command` started.
 */
export function start(
  command: string,
  args: string[] = [],
  env: Record<string, string | undefined> = {},
): Running {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
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
    child.once('exit', (code) => resolve(code))
  })
  const pid = child.pid!
  return {
    pid,
    output: () => text,
    exited,
    async stop(graceMs = 5000) {
      signalGroup(pid, 'SIGTERM')
      const force = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs)
      const code = await exited
      clearTimeout(force)
      await groupGone(pid)
      live.delete(child)
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

/** Kills every process started here that is still running, with every child it started. */
export async function stopExamples(): Promise<void> {
  await Promise.all(
    [...live].map(async (child) => {
      signalGroup(child.pid!, 'SIGKILL')
      await groupGone(child.pid!)
    }),
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
