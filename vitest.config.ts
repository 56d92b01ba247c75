import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/** Tests import every workspace package from its TypeScript source; child processes use the builds. */
const packages = fileURLToPath(new URL('./packages/', import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@sluice\/core\/(http|store)$/, replacement: `${packages}core/src/$1/index.ts` },
      {
        find: /^@sluice\/(core|redis|express|fastify|koa|node|nestjs|fetch|hono|metrics|dashboard|cli)$/,
        replacement: `${packages}$1/src/index.ts`,
      },
    ],
  },
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 20_000,
    // Most suites wait on real servers (redis-server, HTTP, child processes), not on the CPU: three files at a
    // time keep a 2-core machine busy without starving a suite's timers.
    maxWorkers: 3,
    hookTimeout: 60_000,
  },
})
