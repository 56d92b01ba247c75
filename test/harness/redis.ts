/**
 * @module Real Redis servers for the Redis suites: standalone servers and a 3 + 3 cluster, each on free
 * ports in its own temp dir, with no persistence. Every process started here is tracked and killed in
 * `stopAll()` (call it in `afterAll`) and, failing that, when the test process exits. Never a fake Redis:
 * when `redis-server` is missing the harness throws, so the suite fails instead of passing vacuously.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
const HOST = '127.0.0.1'

/** One redis-server process that can be stopped, killed and started again on the same port. */
export interface RedisServer {
  readonly host: string
  readonly port: number
  /** The running process's pid, or undefined while it is down. */
  readonly pid: number | undefined
  /** Stops it gracefully (SHUTDOWN NOSAVE semantics: nothing is persisted) and waits for the exit. */
  stop(): Promise<void>
  /** SIGKILLs it and waits for the exit. */
  kill(): Promise<void>
  /** Starts it again on the same port; it comes back empty. */
  start(): Promise<void>
  /** Runs one command through redis-cli and returns its raw output. */
  cli(...args: string[]): Promise<string>
}

export interface RedisCluster {
  readonly masters: readonly RedisServer[]
  readonly replicas: readonly RedisServer[]
  readonly nodes: readonly RedisServer[]
  /** `{ host, port }` of every node, for client configuration. */
  readonly startupNodes: readonly { host: string; port: number }[]
}

const live = new Set<ChildProcess>()
const dirs = new Set<string>()
let checked = false

function killAllSync(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL')
    } catch {}
  }
  live.clear()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  dirs.clear()
}

process.once('exit', killAllSync)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAllSync()
    process.exit(128)
  })
}

function requireRedis(): void {
  if (checked) return
  for (const bin of ['redis-server', 'redis-cli']) {
    const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' })
    if (probe.error !== undefined || probe.status !== 0) {
      throw new Error(
        `${bin} is not on PATH. The Redis suites start real Redis servers: install Redis >= 7 ` +
          '(e.g. `apt-get install redis-server redis-tools`, or run `bash dev.sh test`).',
      )
    }
  }
  checked = true
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, HOST, () => server.close(() => resolve(true)))
  })
}

const taken = new Set<number>()

/** A free port whose cluster bus port (port + 10000) is free too. */
async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000)
    if (taken.has(port) || taken.has(port + 10_000)) continue
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) {
      taken.add(port)
      taken.add(port + 10_000)
      return port
    }
  }
  throw new Error('No free port pair found for redis-server.')
}

/** Resolves when a PING on `port` answers PONG; rejects after `timeoutMs`. */
async function waitForPing(port: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: HOST, port })
      let data = ''
      socket.setTimeout(500)
      socket.once('connect', () => socket.write('PING\r\n'))
      socket.on('data', (chunk) => {
        data += chunk.toString()
        if (data.includes('\r\n')) {
          socket.destroy()
          resolve(data.startsWith('+PONG'))
        }
      })
      socket.once('error', () => resolve(false))
      socket.once('timeout', () => {
        socket.destroy()
        resolve(false)
      })
    })
    if (ok) return
    if (Date.now() > until) throw new Error(`redis-server on port ${port} did not answer PING in time.`)
    await sleep(20)
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

class Server implements RedisServer {
  readonly host = HOST
  readonly port: number
  readonly #args: string[]
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  #log = ''

  constructor(port: number, args: string[]) {
    this.port = port
    this.#args = args
  }

  get pid(): number | undefined {
    return this.#child?.pid
  }

  async start(): Promise<void> {
    if (this.#child !== undefined) throw new Error(`redis-server on ${this.port} is already running.`)
    const child = spawn('redis-server', this.#args, { stdio: ['ignore', 'pipe', 'pipe'] })
    this.#child = child
    live.add(child)
    this.#log = ''
    child.stdout?.on('data', (c) => {
      this.#log = (this.#log + c.toString()).slice(-4000)
    })
    child.stderr?.on('data', (c) => {
      this.#log = (this.#log + c.toString()).slice(-4000)
    })
    this.#exited = new Promise((resolve) => {
      child.once('exit', () => {
        live.delete(child)
        if (this.#child === child) this.#child = undefined
        resolve()
      })
    })
    const failed = new Promise<never>((_, reject) => {
      child.once('error', (error) => reject(new Error(`redis-server failed to start: ${error.message}`)))
      child.once('exit', (code) =>
        reject(new Error(`redis-server on ${this.port} exited with ${code} while starting:\n${this.#log}`)),
      )
    })
    failed.catch(() => {})
    await Promise.race([waitForPing(this.port, 10_000), failed])
  }

  async stop(): Promise<void> {
    const child = this.#child
    if (child === undefined) return
    child.kill('SIGTERM')
    const forced = setTimeout(() => child.kill('SIGKILL'), 3000)
    await this.#exited
    clearTimeout(forced)
  }

  async kill(): Promise<void> {
    const child = this.#child
    if (child === undefined) return
    child.kill('SIGKILL')
    await this.#exited
  }

  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-h', HOST, '-p', String(this.port), ...args])
    return stdout
  }
}

function baseArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--logfile',
    '',
  ]
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'))
  dirs.add(dir)
  return dir
}

/** Starts a standalone redis-server on a free port. */
export async function startRedis(extraArgs: string[] = []): Promise<RedisServer> {
  requireRedis()
  const port = await freePort()
  const server = new Server(port, [...baseArgs(port, tempDir()), ...extraArgs])
  await server.start()
  return server
}

export interface ClusterOptions {
  /** `cluster-node-timeout`: how long a node may be unreachable before it is failed over. Default 2000. */
  nodeTimeoutMs?: number
  /** More redis-server arguments for every node, e.g. `['--cluster-require-full-coverage', 'no']`. */
  extraArgs?: string[]
}

/** Starts 3 masters and 3 replicas and waits until every node reports `cluster_state:ok`. */
export async function startCluster(options: ClusterOptions = {}): Promise<RedisCluster> {
  requireRedis()
  const dir = tempDir()
  const nodes: Server[] = []
  for (let i = 0; i < 6; i++) {
    const port = await freePort()
    nodes.push(
      new Server(port, [
        ...baseArgs(port, dir),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        String(options.nodeTimeoutMs ?? 2000),
        ...(options.extraArgs ?? []),
      ]),
    )
  }
  await Promise.all(nodes.map((n) => n.start()))
  await run('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((n) => `${HOST}:${n.port}`),
    '--cluster-replicas',
    '1',
    '--cluster-yes',
  ])
  const until = Date.now() + 30_000
  for (const node of nodes) {
    while (!(await node.cli('CLUSTER', 'INFO')).includes('cluster_state:ok')) {
      if (Date.now() > until) throw new Error(`cluster node ${node.port} never reached cluster_state:ok`)
      await sleep(50)
    }
  }
  const masters: Server[] = []
  const replicas: Server[] = []
  for (const node of nodes) {
    const role = await node.cli('ROLE')
    ;(role.startsWith('master') ? masters : replicas).push(node)
  }
  return {
    masters,
    replicas,
    nodes,
    startupNodes: nodes.map((n) => ({ host: HOST, port: n.port })),
  }
}

/** Stops every server the harness started, and removes their temp dirs. */
export async function stopAll(): Promise<void> {
  const children = [...live]
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once('exit', () => resolve())
          child.kill('SIGKILL')
        }),
    ),
  )
  live.clear()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  dirs.clear()
}

/** Calls of `command` Redis has run since its last `CONFIG RESETSTAT`, from `INFO commandstats`. */
export async function commandCalls(server: RedisServer, command: string): Promise<number> {
  const info = await server.cli('INFO', 'commandstats')
  const match = new RegExp(`cmdstat_${command.toLowerCase()}:calls=(\\d+)`).exec(info)
  return match === null ? 0 : Number(match[1])
}
