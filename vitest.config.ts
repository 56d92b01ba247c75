import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/** Tests import every workspace package from its TypeScript source; child processes use the builds. */
const packages = fileURLToPath(new URL('./packages/', import.meta.url))

/**
 * Suites that start many processes or a cluster and measure what a loaded machine does to them (prefetch
 * across 4 processes, failover, Redis killed and paused): run alone, after the others.
 */
const SERIAL = [
  'packages/redis/test/redis-prefetch-processes.test.ts',
  'packages/redis/test/redis-prefetch-reset.test.ts',
  'packages/redis/test/redis-processes.test.ts',
  'packages/redis/test/redis-faults.test.ts',
  'packages/redis/test/redis-cluster.test.ts',
  'test/reliability-cluster.test.ts',
  'test/reliability-faults.test.ts',
  'test/examples-many-processes.test.ts',
]
const serial = process.env.SLUICE_TESTS === 'serial'

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@sluice\/core\/(http|store)$/, replacement: `${packages}core/src/$1/index.ts` },
      { find: /^@sluice\/core\/options$/, replacement: `${packages}core/src/options.ts` },
      {
        find: /^@sluice\/(core|redis|express|fastify|koa|node|nestjs|fetch|hono|metrics|dashboard)$/,
        replacement: `${packages}$1/src/index.ts`,
      },
    ],
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
