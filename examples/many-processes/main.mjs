/**
 * The whole demonstration in one command: a Redis, the workers of server.mjs sharing one limit through
 * it, one burst at all of them (burst.mjs), the result, then everything this script started is stopped.
 * Redis is REDIS_URL when set; otherwise a throwaway redis-server (no persistence) on a free port, when
 * `redis-server` is on PATH.
 *
 * Run: node examples/many-processes/main.mjs
 * Environment: REDIS_URL, WORKERS (default 4), LIMIT (default 50), REQUESTS (default 200).
 */
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createConnection, createServer } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { burst, table } from './burst.mjs'

const children = []
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

let redisUrl = process.env.REDIS_URL
if (!redisUrl) {
  if (spawnSync('redis-server', ['--version']).error) {
    console.error('No REDIS_URL, and no redis-server on PATH to start one. Install Redis, or set REDIS_URL.')
    process.exit(2)
  }
  const port = await freePort()
  const redis = start('redis-server', [
    ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  ])
  await until(() => answersPing(port), `redis-server on port ${port}`)
  redisUrl = `redis://127.0.0.1:${port}`
  console.log(`started redis-server (pid ${redis.pid}) at ${redisUrl}`)
}

const port = await freePort()
const server = start(process.execPath, [fileURLToPath(new URL('./server.mjs', import.meta.url))], {
  ...process.env,
  PORT: String(port),
  REDIS_URL: redisUrl,
})
let serverOutput = ''
server.stdout.on('data', (chunk) => {
  serverOutput += chunk
  process.stdout.write(chunk)
})
server.stderr.pipe(process.stderr)
await until(() => serverOutput.includes(`on http://localhost:${port}`), 'the workers')

const result = await burst(`http://127.0.0.1:${port}`, Number(process.env.REQUESTS ?? 200))
console.log(`\n${table(result)}\n`)

for (const child of children.reverse()) {
  child.kill('SIGTERM')
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit')
}
children.length = 0
console.log('stopped the workers and everything else this script started')
process.exitCode = result.exact ? 0 : 1

function start(command, args, env = process.env) {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  return child
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

function answersPing(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => {
      socket.destroy()
      resolve(data.toString().startsWith('+PONG'))
    })
    socket.once('error', () => resolve(false))
  })
}

/** Polls `ready` until it holds; gives up, stopping everything, after 15 s. */
async function until(ready, what) {
  for (const deadline = Date.now() + 15_000; !(await ready()); await sleep(25)) {
    if (Date.now() > deadline) {
      console.error(`${what} did not come up within 15 s.`)
      process.exit(1)
    }
  }
}
