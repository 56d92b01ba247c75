/**
 * The shared Fetch and Hono suites (runtimes/suite.ts) on Node, in this process, on the memory store and
 * on a real redis-server through ioredis and node-redis; then the same suites under Bun and Deno, from their npm packages
 * (`bun`, `deno`), in child processes on the builds, on the memory store and on Redis (ioredis on both,
 * node-redis too on Deno). A runtime that cannot start fails its test.
 */
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'
import { node } from './runtimes/node.ts'
import { type StoreKind, type StoreSource, storeSource } from './runtimes/stores.ts'
import { clearOfMinuteEdge, fetchCases, honoCases } from './runtimes/suite.ts'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const cases = [...fetchCases, ...honoCases]

let redis: RedisServer
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(stopAll)

describe.each<StoreKind>(['memory', 'ioredis', 'node-redis'])('on Node, %s store', (kind) => {
  let source: StoreSource
  beforeAll(async () => {
    source = await storeSource(kind, redis.port)
  })
  afterAll(() => source.close())
  it.each(cases.map((c, i) => [c.name, c, i] as const))('%s', async (_name, test, i) => {
    await clearOfMinuteEdge()
    await test.run(node, source.store(), `node-${kind}-${i}`)
  })
})

/** Runs run.ts under `command`, answering its exit code and output. */
function runUnder(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args, join(here, 'runtimes', 'run.ts')], {
      cwd: here,
      env: {
        ...process.env,
        SLUICE_TEST_REDIS_PORT: String(redis.port),
        DENO_NO_UPDATE_CHECK: '1',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk
    })
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output }))
  })
}

/** The binary an npm package installs, resolved from the repository's root devDependencies. */
function binary(name: 'bun' | 'deno'): string {
  return join(root, 'node_modules', '.bin', name)
}

/**
 * Deno's `request.signal` aborts after every successful response unless the process opts out of that
 * legacy behaviour (`--unstable-no-legacy-abort`, or `"unstable": ["no-legacy-abort"]` in deno.json), and
 * in that mode Deno prints a notice, once per process, to any code that reads the signal, as sluice does
 * to see a client leave. The docs tell Deno users to opt out; the suite runs Deno both ways.
 */
const DENO_LEGACY_NOTICE = /^Deno\.serve: request\.signal aborts on successful responses \(legacy behavior\)/

describe.each([
  { runtime: 'bun', binary: 'bun', args: [] as string[], stores: ['memory', 'ioredis'], notice: undefined },
  {
    runtime: 'deno',
    binary: 'deno',
    args: ['run', '-A', '--unstable-no-legacy-abort'],
    stores: ['memory', 'ioredis', 'node-redis'],
    notice: undefined,
  },
  {
    runtime: 'deno in its legacy-abort mode',
    binary: 'deno',
    args: ['run', '-A'],
    stores: ['memory', 'ioredis', 'node-redis'],
    notice: DENO_LEGACY_NOTICE,
  },
] as const)('under $runtime', ({ binary: name, args, stores, notice }) => {
  const prints = notice === undefined ? 'prints nothing else' : "prints only Deno's notice besides"
  it(`runs every Fetch and Hono case on ${stores.join(', ')}, and ${prints}`, {
    timeout: 180_000,
  }, async () => {
    const { code, output } = await runUnder(binary(name), [...args])
    const lines = output.split('\n')
    const passed = lines.filter((line) => line.startsWith(`ok ${name} `))
    expect(
      lines.filter((line) => line.startsWith('not ok')),
      output,
    ).toEqual([])
    expect(passed).toHaveLength(cases.length * stores.length)
    // No notice of the runtime's about how sluice uses it, but the one Deno's legacy mode prints to all.
    const other = lines.filter((line) => line !== '' && !line.startsWith('ok '))
    expect(other.filter((line) => notice === undefined || !notice.test(line))).toEqual([])
    expect(code).toBe(0)
  })
})
