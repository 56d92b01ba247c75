/**
 * @module The HTTP section's two sides: servers in processes of their own (cases/http-server.mjs), and
 * autocannon driving them from this process, over loopback only, for a fixed time.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const autocannon = require('autocannon')
const serverScript = fileURLToPath(new URL('../cases/http-server.mjs', import.meta.url))

/** Servers still running, killed if the bench exits before stopping them. */
const running = new Set()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Starts a server; resolves with `{ port, pid, stats(), stop() }` once it listens. `wrapper` is a command the
 * server's node runs under (valgrind, for bench/instructions.mjs); `env` the server's environment.
 */
export function startServer(params, { wrapper = [], env = process.env } = {}) {
  return new Promise((resolve, reject) => {
    const argv = [...wrapper, process.execPath, serverScript, JSON.stringify(params)]
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env })
    let err = ''
    child.stderr.on('data', (c) => {
      err = (err + c).slice(-4000)
    })
    const kill = () => child.kill('SIGKILL')
    running.add(child)
    child.once('exit', (code) =>
      reject(new Error(`server ${JSON.stringify(params)} exited (${code}):\n${err}`)),
    )
    let waiting
    child.stdout.on('data', (c) => {
      const stats = /STATS (.*)/.exec(String(c))
      if (stats !== null) waiting?.(JSON.parse(stats[1]))
      const m = /READY (\d+)/.exec(String(c))
      if (m === null) return
      resolve({
        port: Number(m[1]),
        pid: child.pid,
        /** What a server that counts something prints on SIGUSR2 (`STATS <json>`), counting afresh after. */
        stats() {
          return new Promise((done) => {
            waiting = done
            child.kill('SIGUSR2')
          })
        },
        stop() {
          running.delete(child)
          child.removeAllListeners('exit')
          return new Promise((done) => {
            child.once('exit', done)
            child.kill('SIGTERM')
            setTimeout(kill, 3000).unref()
          })
        },
      })
    })
  })
}

/** CPU time (user + system) a process has used, in µs, from /proc (Linux); undefined elsewhere. */
export function cpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    // utime and stime are fields 14 and 15 of stat (12 and 13 after the name), in ticks of 1/100 s.
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
  } catch {
    return undefined
  }
}

/**
 * Requests per second `connections` keep-alive connections get from `server` in `seconds` (and how many
 * requests that was), and the server's CPU time per request (what the server spends, whatever else runs
 * on the machine); throws on any non-2xx.
 */
export async function load(server, seconds, connections) {
  const cpu0 = cpuUs(server.pid)
  const result = await autocannon({ url: `http://127.0.0.1:${server.port}/`, connections, duration: seconds })
  const cpu1 = cpuUs(server.pid)
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `port ${server.port}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    )
  }
  return {
    requests: result.requests.total,
    perSecond: result.requests.total / result.duration,
    serverCpuUsPerRequest: cpu0 === undefined ? Number.NaN : (cpu1 - cpu0) / result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
  }
}
