import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/** Tests import every workspace package from its TypeScript source; child processes use the builds. */
const packages = fileURLToPath(new URL('./packages/', import.meta.url))

/**
 * One alias per entry point of each package under packages/, read from its package.json `exports`, so a new
 * package or subpath needs no line here: `@sluice/NAME` is `src/index.ts`, and `@sluice/NAME/SUB` is
 * `src/SUB/index.ts` or else `src/SUB.ts`.
 */
function sourceAliases(): { find: RegExp; replacement: string }[] {
  const aliases: { find: RegExp; replacement: string }[] = []
  const exactly = (id: string) => new RegExp(`^${id.replace(/[/.]/g, '\\$&')}$`)
  for (const dir of readdirSync(packages)) {
    const manifest = `${packages}${dir}/package.json`
    if (!existsSync(manifest)) continue
    const { name, exports } = JSON.parse(readFileSync(manifest, 'utf8')) as {
      name: string
      exports?: Record<string, unknown>
    }
    for (const subpath of Object.keys(exports ?? {})) {
      if (subpath === '.') {
        aliases.push({ find: exactly(name), replacement: `${packages}${dir}/src/index.ts` })
      } else if (subpath !== './package.json') {
        const sub = subpath.slice(2)
        const folder = `${packages}${dir}/src/${sub}/index.ts`
        aliases.push({
          find: exactly(`${name}/${sub}`),
          replacement: existsSync(folder) ? folder : `${packages}${dir}/src/${sub}.ts`,
        })
      }
    }
  }
  return aliases
}

/**
 * Suites that start many processes or a cluster and measure what a loaded machine does to them (prefetch
 * across 4 processes, failover, Redis killed and paused): run alone, after the others.
 */
const SERIAL = [
  'packages/redis/test/redis-prefetch-processes.test.ts',
  'packages/redis/test/redis-prefetch-reset.test.ts',
  'packages/redis/test/redis-processes.test.ts',
  'packages/postgres/test/postgres-processes.test.ts',
  'packages/redis/test/redis-faults.test.ts',
  'packages/postgres/test/postgres-faults.test.ts',
  'packages/redis/test/redis-cluster.test.ts',
  'test/reliability-cluster.test.ts',
  'test/reliability-faults.test.ts',
  'test/examples-many-processes.test.ts',
]
const serial = process.env.SLUICE_TESTS === 'serial'

export default defineConfig({
  resolve: {
    alias: sourceAliases(),
  },
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    include: serial ? SERIAL : ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    exclude: serial ? [] : [...SERIAL, '**/node_modules/**'],
    testTimeout: 20_000,
    // One file at a time: many suites bound what Redis and the event loop do (a store's 100 ms timeout, a
    // queue's spacing), and files run side by side on a 2-core machine broke those bounds. The SERIAL suites,
    // which load the machine themselves, run last (`SLUICE_TESTS=serial vitest run`).
    maxWorkers: 1,
    hookTimeout: 60_000,
  },
})
