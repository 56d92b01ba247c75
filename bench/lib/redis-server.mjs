/**
 * @module A redis-server of the bench's own, on a free loopback port, in a temp dir, with no
 * persistence; never the Redis on 6379. Stopped by `stop()`, and killed if the bench exits first.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const HOST = '127.0.0.1'

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, HOST, () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

function ping(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port })
    let data = ''
    socket.setTimeout(500)
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      data += chunk
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
}

/** The installed redis-server's version, e.g. "7.0.15", or throws with how to install it. */
export function redisVersion() {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' })
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      'redis-server is not on PATH: apt-get install redis-server (or run `bash dev.sh test` once).',
    )
  }
  return /v=(\S+)/.exec(probe.stdout)?.[1] ?? probe.stdout.trim()
}

/** Starts redis-server on a free port; resolves with `{ host, port, pid, stop() }` once it answers PING. */
export async function startRedis() {
  redisVersion()
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-redis-'))
  const child = spawn(
    'redis-server',
    [
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
      '--logfile',
      '',
    ],
    { stdio: 'ignore' },
  )
  const kill = () => child.kill('SIGKILL')
  process.once('exit', kill)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const until = Date.now() + 10_000
  while (!(await ping(port))) {
    if (child.exitCode !== null || Date.now() > until)
      throw new Error(`redis-server on ${port} did not start`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return {
    host: HOST,
    port,
    pid: child.pid,
    async stop() {
      process.off('exit', kill)
      child.kill('SIGTERM')
      const forced = setTimeout(kill, 3000)
      await exited
      clearTimeout(forced)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** An ioredis client of the bench's redis-server on `port`, ready (the cases' own connection, not a subject's). */
export async function connectIoredis(port) {
  const { Redis } = createRequire(import.meta.url)('ioredis')
  const client = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  await new Promise((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', reject)
  })
  return client
}

/** redis-server's CPU seconds so far (user + system, INFO cpu): what it spent, whoever else ran. */
export async function redisCpu(admin) {
  const info = await admin.info('cpu')
  const field = (name) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)[1])
  return field('used_cpu_user') + field('used_cpu_sys')
}

/**
 * Script calls and their total µs inside Redis since the last CONFIG RESETSTAT, and the commands the scripts
 * ran (every other command counted, but for the connections' own: INFO, CONFIG, CLIENT, HELLO, SELECT).
 */
export async function scriptStats(admin) {
  const info = await admin.info('commandstats')
  let calls = 0
  let usec = 0
  let inner = 0
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
    if (/^(evalsha|eval|fcall)$/.test(m[1])) {
      calls += Number(m[2])
      usec += Number(m[3])
    } else if (!/^(info|config|client|hello|select|script)/.test(m[1])) inner += Number(m[2])
  }
  return { calls, usec, inner }
}
