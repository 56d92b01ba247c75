/**
 * @module Real PostgreSQL servers for the Postgres suites: each one initdb'd into its own temp dir and
 * started on a free port with its socket in that dir, never the machine's server on 5432. The postmaster
 * leads its own process group, so `stopAll()` (call it in `afterAll`; it also runs when the test process
 * exits) kills it with every backend. As root, initdb and the server run as the `postgres` user (initdb
 * refuses root). When the binaries are missing the harness throws: the suite fails, it never skips.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

const HOST = '127.0.0.1'

/** One PostgreSQL server that can be stopped (immediate shutdown) and started again on the same port. */
export interface PostgresServer {
  readonly host: string
  readonly port: number
  /** `postgres://postgres@127.0.0.1:PORT/postgres`. */
  readonly url: string
  /** Stops it as `pg_ctl stop -m immediate` does (SIGQUIT to the postmaster) and waits for the exit. */
  stop(): Promise<void>
  /** Starts it again on the same port, with its data. */
  start(): Promise<void>
  /** Runs one statement on a connection of its own and returns the rows. */
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>
}

/** The directory of the newest installed PostgreSQL's binaries. */
export function postgresBin(): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  for (const v of versions) {
    const bin = join(root, v, 'bin')
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'postgres'))) return bin
  }
  throw new Error(
    'PostgreSQL server binaries (initdb, postgres) are not in /usr/lib/postgresql/*/bin. The Postgres ' +
      'suites start real servers: install them (e.g. `apt-get install postgresql`).',
  )
}

const live = new Set<ChildProcess>()
const dirs = new Set<string>()

function killAllSync(): void {
  for (const child of live) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
    } catch {}
  }
  live.clear()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  dirs.clear()
}

process.once('exit', killAllSync)

/** The uid and gid to run the server as: the `postgres` user's when this process is root. */
function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  return { uid, gid }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, HOST, () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })
}

class Server implements PostgresServer {
  readonly host = HOST
  readonly port: number
  readonly url: string
  readonly #bin: string
  readonly #dir: string
  readonly #owner: { uid: number; gid: number } | undefined
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  #log = ''

  constructor(bin: string, dir: string, port: number, owner: { uid: number; gid: number } | undefined) {
    this.#bin = bin
    this.#dir = dir
    this.port = port
    this.#owner = owner
    this.url = `postgres://postgres@${HOST}:${port}/postgres`
  }

  async start(): Promise<void> {
    const child = spawn(
      join(this.#bin, 'postgres'),
      [
        '-D',
        join(this.#dir, 'data'),
        '-p',
        String(this.port),
        '-k',
        this.#dir,
        '-c',
        `listen_addresses=${HOST}`,
      ],
      { detached: true, stdio: ['ignore', 'ignore', 'pipe'], ...this.#owner },
    )
    this.#log = ''
    child.stderr!.on('data', (chunk) => {
      this.#log = (this.#log + chunk.toString()).slice(-4000)
    })
    live.add(child)
    this.#child = child
    this.#exited = new Promise((resolve) =>
      child.once('exit', () => {
        live.delete(child)
        resolve()
      }),
    )
    const until = Date.now() + 30_000
    for (;;) {
      try {
        await this.query('SELECT 1')
        return
      } catch (error) {
        if (child.exitCode !== null || Date.now() > until) {
          throw new Error(`postgres on port ${this.port} did not start: ${String(error)}\n${this.#log}`)
        }
        await new Promise((r) => setTimeout(r, 50))
      }
    }
  }

  async stop(): Promise<void> {
    const child = this.#child
    if (child?.pid === undefined) return
    this.#child = undefined
    process.kill(child.pid, 'SIGQUIT')
    await this.#exited
    // Backends end when their postmaster does; none may be left to hold the port.
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
  }

  async query<R>(text: string, values?: unknown[]): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2000 })
    await client.connect()
    try {
      return (await client.query(text, values)).rows as R[]
    } finally {
      await client.end()
    }
  }
}

/** initdb into a new temp dir, then a server on a free port. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBin()
  const who = owner()
  const dir = mkdtempSync(join(tmpdir(), 'sluice-pg-'))
  dirs.add(dir)
  if (who !== undefined) chownSync(dir, who.uid, who.gid)
  execFileSync(
    join(bin, 'initdb'),
    ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'],
    { stdio: 'pipe', ...who },
  )
  const server = new Server(bin, dir, await freePort(), who)
  await server.start()
  return server
}

/** Kills every server started here and removes their dirs. */
export async function stopAll(): Promise<void> {
  killAllSync()
}
