/**
 * @module A local npm registry (Verdaccio, the repository's pinned devDependency) that serves the @sluice
 * packages and nothing else: no uplink, so an install that finds a @sluice package found one published
 * here, and every other package comes from the registry npm is configured with (`@sluice:registry` points
 * npm at this one for the scope only). Used by the registry test and by `bash dev.sh registry`:
 *
 *   node scripts/registry.mjs [--port 4873] [--host 127.0.0.1] [--storage .registry]
 *
 * starts it, publishes every package with `pnpm release` pointed at it, prints the install line, and serves
 * until interrupted.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const USER = 'sluice'

/** The Verdaccio configuration: storage and accounts under `dir`, the @sluice scope only, no uplink. */
function config(dir) {
  return `storage: ${JSON.stringify(join(dir, 'storage'))}
auth:
  htpasswd:
    file: ${JSON.stringify(join(dir, 'htpasswd'))}
packages:
  '@sluice/*':
    access: $all
    publish: $authenticated
    unpublish: $authenticated
web:
  enable: false
log:
  type: stdout
  format: json
  level: warn
`
}

/**
 * Starts Verdaccio on `host:port` (port 0: a free one) with its state in `dir`, and an account that may
 * publish. Resolves once it answers, with its URL, an npm user configuration (`npmrc`, in `dir`) holding
 * the account's token and `@sluice:registry`, and `stop()`, which ends the server's process group.
 */
export async function startRegistry({ dir, host = '127.0.0.1', port = 0 }) {
  mkdirSync(dir, { recursive: true })
  const configFile = join(dir, 'config.yaml')
  writeFileSync(configFile, config(dir))
  const listen = port === 0 ? `${host}:${await freePort(host)}` : `${host}:${port}`
  const child = spawn(
    process.execPath,
    [join(ROOT, 'node_modules/verdaccio/bin/verdaccio'), '--config', configFile, '--listen', listen],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  )
  let output = ''
  child.stdout.on('data', (chunk) => {
    output += chunk
  })
  child.stderr.on('data', (chunk) => {
    output += chunk
  })
  const stop = () =>
    new Promise((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done()
      child.once('exit', () => done())
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {
        done()
      }
    })
  const url = `http://${listen}/`
  try {
    await answering(url, child, () => output)
    const token = await account(url)
    const npmrc = join(dir, 'npmrc')
    const hostPath = url.replace(/^http:/, '')
    writeFileSync(npmrc, `@sluice:registry=${url}\n${hostPath}:_authToken=${token}\n`)
    return { url, npmrc, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/** A port nothing listens on right now. */
async function freePort(host) {
  const { createServer } = await import('node:net')
  return new Promise((done, fail) => {
    const server = createServer()
    server.once('error', fail)
    server.listen(0, host, () => {
      const { port } = server.address()
      server.close(() => done(port))
    })
  })
}

/** Resolves when the registry answers its ping; rejects with its output if it exits first. */
async function answering(url, child, output) {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`Verdaccio exited (${child.exitCode}):\n${output()}`)
    try {
      if ((await fetch(new URL('-/ping', url))).ok) return
    } catch {
      // Not listening yet.
    }
    await new Promise((done) => setTimeout(done, 100))
  }
}

/** Creates the publishing account (or logs in to it) and answers its token. */
async function account(url) {
  const password = 'sluice-local-registry'
  const response = await fetch(new URL(`-/user/org.couchdb.user:${USER}`, url), {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: USER, password }),
  })
  const body = await response.json()
  if (typeof body.token !== 'string') {
    throw new Error(`Verdaccio gave no token (${response.status}): ${JSON.stringify(body)}`)
  }
  return body.token
}

/** Publishes every package to `registry` with `pnpm release`, as npm user `npmrc`; resolves with its output. */
export function publishAll(registry, npmrc) {
  return new Promise((done, fail) => {
    const child = spawn('pnpm', ['-s', 'release', '--registry', registry], {
      cwd: ROOT,
      env: { ...process.env, NPM_CONFIG_USERCONFIG: npmrc },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (chunk) => {
      output += chunk
    })
    child.stderr.on('data', (chunk) => {
      output += chunk
    })
    child.once('exit', (code) =>
      code === 0 ? done(output) : fail(new Error(`pnpm release exited ${code}:\n${output}`)),
    )
  })
}

async function main() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '4873' },
      host: { type: 'string', default: '127.0.0.1' },
      storage: { type: 'string', default: join(ROOT, '.registry') },
    },
  })
  const registry = await startRegistry({
    dir: resolve(values.storage),
    host: values.host,
    port: Number(values.port),
  })
  process.once('SIGINT', () => registry.stop().then(() => process.exit(0)))
  process.once('SIGTERM', () => registry.stop().then(() => process.exit(0)))
  try {
    process.stdout.write(await publishAll(registry.url, registry.npmrc))
  } catch (error) {
    console.error(error.message)
    await registry.stop()
    process.exit(1)
  }
  console.log(`\nsluice's packages are served at ${registry.url} (Ctrl-C stops it). In your app:\n`)
  console.log(`  npm install --@sluice:registry=${registry.url} @sluice/core @sluice/express express\n`)
  console.log(
    `(any adapter in place of express; \`npm config set @sluice:registry ${registry.url}\` makes it stick)`,
  )
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
