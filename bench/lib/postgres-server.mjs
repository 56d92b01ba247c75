/**
 * @module A PostgreSQL server of the bench's own: initdb into a temp dir (as the `postgres` user when run
 * as root: initdb refuses root), started on a free port with its socket in that dir, never the machine's
 * server; `stop()` kills it and its backends and removes the dir.
 */
import { execFileSync, spawn } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

function binDir() {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin')
  throw new Error(
    'PostgreSQL server binaries are not in /usr/lib/postgresql/*/bin (apt-get install postgresql).',
  )
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

export async function startPostgres(settings = []) {
  const bin = binDir()
  const who =
    process.getuid?.() === 0
      ? {
          uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
          gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
        }
      : {}
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-pg-'))
  if (who.uid !== undefined) chownSync(dir, who.uid, who.gid)
  execFileSync(
    join(bin, 'initdb'),
    ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync'],
    {
      stdio: 'pipe',
      ...who,
    },
  )
  const port = await freePort()
  const args = ['-D', join(dir, 'data'), '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1']
  for (const s of settings) args.push('-c', s)
  const child = spawn(join(bin, 'postgres'), args, { detached: true, stdio: 'ignore', ...who })
  const stop = () => {
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', stop)
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  for (let i = 0; ; i++) {
    const client = new pg.Client({ connectionString: url })
    try {
      await client.connect()
      const version = (await client.query('SHOW server_version')).rows[0].server_version
      await client.end()
      return { url, version, stop }
    } catch (error) {
      if (i > 300) throw error
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}
