/**
 * Installing sluice as every Node library is installed: a local Verdaccio (scripts/registry.mjs) serves the
 * @sluice scope only, `pnpm release` publishes every package under packages/ to it, and in fresh folders
 * outside the repository npm installs each package by its README's install line (plain names; npm resolves
 * sluice's own dependencies from the registry, everything else from npm's). Then a tiny app per adapter
 * answers 429 at its limit, as ES modules and as CommonJS (NestJS in TypeScript, strict, `nodenext`), the
 * Redis store shares one limit between two processes, the metrics and dashboard packages run, and
 * `npx @sluice/cli --help` prints the command's usage.
 * One folder per package, reused by its apps.
 */
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { publishAll, startRegistry } from '../scripts/registry.mjs'
import { ROOT } from './examples-harness.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

const exec = promisify(execFile)
// Generous bounds for npm, a build and a registry under load: they only stop a hung run, and assert nothing.
const SLOW = 900_000

/** The packages `pnpm release` publishes: every one under packages/ that is not private. */
const PACKAGES = readdirSync(join(ROOT, 'packages'))
  .filter((folder) => existsSync(join(ROOT, 'packages', folder, 'package.json')))
  .map((folder) => ({
    folder,
    manifest: JSON.parse(readFileSync(join(ROOT, 'packages', folder, 'package.json'), 'utf8')),
  }))
  .filter(({ manifest }) => manifest.private !== true)

/** A package's install line, the first line of its README's first code block, without its comment. */
function installLine(folder: string): string[] {
  const readme = readFileSync(join(ROOT, 'packages', folder, 'README.md'), 'utf8')
  const line = /^# [^\n]+\n+```sh\n([^\n]*)/.exec(readme)?.[1] ?? ''
  return line.replace(/#.*$/, '').trim().split(/\s+/)
}

let scratch = ''
let registry: Awaited<ReturnType<typeof startRegistry>> | undefined
let released = ''
let npmEnv: NodeJS.ProcessEnv = {}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'sluice-registry-'))
  registry = await startRegistry({ dir: join(scratch, 'registry') })
  npmEnv = { ...process.env, NPM_CONFIG_USERCONFIG: registry.npmrc }
  released = await publishAll(registry.url, registry.npmrc)
}, SLOW)

afterAll(async () => {
  await stopAll()
  await registry?.stop()
  if (scratch !== '') await rm(scratch, { recursive: true, force: true })
})

/** Runs npm (or npx) in `dir` as a user of the local registry; resolves with its stdout. */
async function npm(dir: string, args: string[], command = 'npm'): Promise<string> {
  const { stdout } = await exec(command, args, { cwd: dir, env: npmEnv, timeout: SLOW, maxBuffer: 16 << 20 })
  return stdout
}

/** A fresh folder outside the repository with the package's install line (and `extra`) installed in it. */
async function installed(folder: string, extra: string[] = [], type = 'module'): Promise<string> {
  const dir = join(scratch, `app-${folder}`)
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: `app-${folder}`, private: true, type }))
  const [npmWord, installWord, ...names] = installLine(folder)
  expect(`${npmWord} ${installWord}`).toBe('npm install')
  await npm(dir, ['install', '--no-audit', '--no-fund', '--loglevel=error', ...names, ...extra])
  return dir
}

/** Runs `node file` in `dir`; resolves with what it printed, trimmed. */
async function node(dir: string, file: string): Promise<string> {
  const { stdout } = await exec(process.execPath, [file], { cwd: dir, timeout: SLOW })
  return stdout.trim()
}

/**
 * Every server app ends with this: three requests to itself at a limit of two a minute (a sliding log, so no
 * window edge falls between them), then the statuses.
 * `server` is a listening node:http server.
 */
const PROBE = `
async function probe(server) {
  const url = 'http://127.0.0.1:' + server.address().port + '/'
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch(url)).status)
  console.log(statuses.join(','))
  process.exit(0)
}
`
const RULES = "rules: ['slidingLog:2/1m']"

/** One app as ESM and as CommonJS: `imports` per format, then the same body. */
function bothFormats(imports: { esm: string; cjs: string }, body: string): { esm: string; cjs: string } {
  return {
    esm: `${imports.esm}\n${PROBE}\nawait (async () => {\n${body}\n})()\n`,
    cjs: `${imports.cjs}\n${PROBE}\n;(async () => {\n${body}\n})()\n`,
  }
}

const ADAPTER_APPS: Record<string, { extra?: string[]; esm: string; cjs: string }> = {
  express: bothFormats(
    {
      esm: "import express from 'express'\nimport { rateLimit } from '@sluice/express'",
      cjs: "const express = require('express')\nconst { rateLimit } = require('@sluice/express')",
    },
    `const app = express()
app.use(rateLimit({ ${RULES} }))
app.get('/', (_req, res) => res.send('ok'))
const server = app.listen(0, '127.0.0.1', () => probe(server))`,
  ),
  fastify: bothFormats(
    {
      esm: "import Fastify from 'fastify'\nimport { sluice } from '@sluice/fastify'",
      cjs: "const Fastify = require('fastify')\nconst { sluice } = require('@sluice/fastify')",
    },
    `const app = Fastify()
await app.register(sluice, { ${RULES} })
app.get('/', async () => 'ok')
await app.listen({ port: 0, host: '127.0.0.1' })
await probe(app.server)`,
  ),
  koa: bothFormats(
    {
      esm: "import Koa from 'koa'\nimport { rateLimit } from '@sluice/koa'",
      cjs: "const Koa = require('koa')\nconst { rateLimit } = require('@sluice/koa')",
    },
    `const app = new Koa()
app.use(rateLimit({ ${RULES} }))
app.use((ctx) => {
  ctx.body = 'ok'
})
const server = app.listen(0, '127.0.0.1', () => probe(server))`,
  ),
  node: bothFormats(
    {
      esm: "import { createServer } from 'node:http'\nimport { withRateLimit } from '@sluice/node'",
      cjs: "const { createServer } = require('node:http')\nconst { withRateLimit } = require('@sluice/node')",
    },
    `const server = createServer(withRateLimit({ ${RULES} }, (_req, res) => res.end('ok')))
server.listen(0, '127.0.0.1', () => probe(server))`,
  ),
  hono: {
    extra: ['@hono/node-server'],
    ...bothFormats(
      {
        esm: "import { serve } from '@hono/node-server'\nimport { getConnInfo } from '@hono/node-server/conninfo'\nimport { rateLimit } from '@sluice/hono'\nimport { Hono } from 'hono'",
        cjs: "const { serve } = require('@hono/node-server')\nconst { getConnInfo } = require('@hono/node-server/conninfo')\nconst { rateLimit } = require('@sluice/hono')\nconst { Hono } = require('hono')",
      },
      `const app = new Hono()
app.use(rateLimit({ ${RULES}, getConnInfo }))
app.get('/', (c) => c.text('ok'))
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => probe(server))`,
    ),
  },
  // A Request -> Response handler, as a Next.js route handler or Bun.serve calls it.
  fetch: bothFormats(
    {
      esm: "import { fetchLimit } from '@sluice/fetch'",
      cjs: "const { fetchLimit } = require('@sluice/fetch')",
    },
    `const limit = fetchLimit({ ${RULES} })
const statuses = []
for (let i = 0; i < 3; i++) {
  const response = await limit.handle(new Request('http://localhost/'), { ip: '203.0.113.7' }, () => new Response('ok'))
  statuses.push(response.status)
}
console.log(statuses.join(','))`,
  ),
}

/** The NestJS app, in TypeScript compiled strict with `nodenext` (CommonJS, as Nest apps are). */
const NEST_APP = `import 'reflect-metadata'
import type { AddressInfo } from 'node:net'
import { Controller, Get, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { SluiceModule } from '@sluice/nestjs'

@Controller()
class HelloController {
  @Get()
  hello(): string {
    return 'ok'
  }
}

@Module({ imports: [SluiceModule.forRoot({ ${RULES} })], controllers: [HelloController] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: false })
  await app.listen(0, '127.0.0.1')
  const { port } = app.getHttpServer().address() as AddressInfo
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch(\`http://127.0.0.1:\${port}/\`)).status)
  console.log(statuses.join(','))
  process.exit(0)
}
void main()
`
const NEST_TSCONFIG = {
  compilerOptions: {
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    experimentalDecorators: true,
    types: ['node'],
    outDir: 'dist',
  },
  include: ['main.ts'],
}

describe('sluice from a registry, installed with plain names', () => {
  it('publishes every public package under packages/ with pnpm release, each after its sluice dependencies', () => {
    const order = [...released.matchAll(/^published (@sluice\/[\w-]+)@(\S+) /gm)].map((m) => m[1]!)
    expect([...order].sort()).toEqual(PACKAGES.map((p) => p.manifest.name).sort())
    for (const { manifest } of PACKAGES) {
      const sluiceDeps = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }).filter(
        (name) => name.startsWith('@sluice/'),
      )
      for (const dep of sluiceDeps) {
        expect(order.indexOf(dep), `${dep} before ${manifest.name}`).toBeLessThan(
          order.indexOf(manifest.name),
        )
      }
    }
  })

  it('serves the @sluice scope only: any other package is refused there (npm fetched those from its own registry)', async () => {
    expect((await fetch(new URL('@sluice%2fcore', registry!.url))).status).toBe(200)
    expect((await fetch(new URL('express', registry!.url))).status).toBe(401)
  })

  it.each(Object.keys(ADAPTER_APPS))(
    'installs @sluice/%s by its README line and answers 429 at the limit, as ESM and as CommonJS',
    async (adapter) => {
      const app = ADAPTER_APPS[adapter]!
      const dir = await installed(adapter, app.extra)
      await writeFile(join(dir, 'app.mjs'), app.esm)
      await writeFile(join(dir, 'app.cjs'), app.cjs)
      expect(await node(dir, 'app.mjs')).toBe('200,200,429')
      expect(await node(dir, 'app.cjs')).toBe('200,200,429')
    },
    SLOW,
  )

  it(
    'installs @sluice/nestjs by its README line; an app in TypeScript (strict, nodenext) compiles and answers 429 at the limit',
    async () => {
      const dir = await installed(
        'nestjs',
        ['@nestjs/platform-express', 'typescript', '@types/node'],
        'commonjs',
      )
      await writeFile(join(dir, 'main.ts'), NEST_APP)
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(NEST_TSCONFIG))
      await exec(process.execPath, [join(dir, 'node_modules/typescript/bin/tsc'), '-p', dir], {
        timeout: SLOW,
      })
      expect(await node(dir, 'dist/main.js')).toBe('200,200,429')
    },
    SLOW,
  )

  it(
    'installs @sluice/redis by its README line; processes one after another on one Redis share one limit, as ESM and as CommonJS',
    async () => {
      const redis: RedisServer = await startRedis()
      const dir = await installed('redis')
      const app = (load: string) => `${load}
const client = new Redis({ host: '127.0.0.1', port: ${redis.port}, enableOfflineQueue: false })
client.once('ready', async () => {
  const limiter = createLimiter({ ${RULES}, store: new RedisStore({ client }) })
  const decision = await limiter.consume('shared')
  console.log(decision.allowed)
  client.disconnect()
})
`
      await writeFile(
        join(dir, 'app.mjs'),
        app(
          "import { createLimiter } from '@sluice/core'\nimport { RedisStore } from '@sluice/redis'\nimport { Redis } from 'ioredis'",
        ),
      )
      await writeFile(
        join(dir, 'app.cjs'),
        app(
          "const { createLimiter } = require('@sluice/core')\nconst { RedisStore } = require('@sluice/redis')\nconst { Redis } = require('ioredis')",
        ),
      )
      // One limit of two a minute across the processes: the third call, from either, is denied.
      expect([await node(dir, 'app.mjs'), await node(dir, 'app.cjs'), await node(dir, 'app.mjs')]).toEqual([
        'true',
        'true',
        'false',
      ])
    },
    SLOW,
  )

  it(
    'installs @sluice/metrics and @sluice/dashboard by their README lines; they count and serve, as ESM and as CommonJS',
    async () => {
      const metrics = await installed('metrics')
      const count = (load: string) => `${load}
const stats = liveStats()
const limiter = createLimiter({ ${RULES}, prefix: 'app' })
;(async () => {
  for (let i = 0; i < 3; i++) await limiter.consume('k')
  const series = stats.snapshot().limiters.app.series
  console.log(series.reduce((n, s) => n + s.allowed, 0), series.reduce((n, s) => n + s.denied, 0))
})()
`
      await writeFile(
        join(metrics, 'app.mjs'),
        count("import { createLimiter } from '@sluice/core'\nimport { liveStats } from '@sluice/metrics'"),
      )
      await writeFile(
        join(metrics, 'app.cjs'),
        count(
          "const { createLimiter } = require('@sluice/core')\nconst { liveStats } = require('@sluice/metrics')",
        ),
      )
      expect(await node(metrics, 'app.mjs')).toBe('2 1')
      expect(await node(metrics, 'app.cjs')).toBe('2 1')

      const dashboard = await installed('dashboard')
      const serve = (load: string) => `${load}
const server = createServer(dashboard({ access: () => 'read' }))
server.listen(0, '127.0.0.1', async () => {
  const page = await fetch('http://127.0.0.1:' + server.address().port + '/')
  console.log(page.status, page.headers.get('content-type'), (await page.text()).includes('<html'))
  process.exit(0)
})
`
      await writeFile(
        join(dashboard, 'app.mjs'),
        serve("import { createServer } from 'node:http'\nimport { dashboard } from '@sluice/dashboard'"),
      )
      await writeFile(
        join(dashboard, 'app.cjs'),
        serve(
          "const { createServer } = require('node:http')\nconst { dashboard } = require('@sluice/dashboard')",
        ),
      )
      expect(await node(dashboard, 'app.mjs')).toBe('200 text/html; charset=utf-8 true')
      expect(await node(dashboard, 'app.cjs')).toBe('200 text/html; charset=utf-8 true')
    },
    SLOW,
  )

  it(
    'runs npx @sluice/cli --help in an empty folder, fetching the command from the registry',
    async () => {
      const dir = join(scratch, 'npx')
      await mkdir(dir, { recursive: true })
      // A cache of its own: npx must fetch this run's @sluice/cli, never one an earlier run left.
      const help = await npm(
        dir,
        ['--yes', '--cache', join(scratch, 'npx-cache'), '@sluice/cli', '--help'],
        'npx',
      )
      expect(help).toContain('Usage: sluice <command>')
      expect(help).toContain('limits')
      expect(help).toContain('dashboard')
    },
    SLOW,
  )
})
