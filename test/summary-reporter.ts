/**
 * @module A vitest reporter that ends a run with one plain line, `N passed, N failed, N skipped`, so CI
 * logs can be read by anything that counts tests, whatever reporter prints above it.
 */
import type { Reporter, TestModule } from 'vitest/node'

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const count = { passed: 0, failed: 0, skipped: 0, pending: 0 }
    for (const module of testModules) {
      for (const test of module.children.allTests()) count[test.result().state]++
      // A file that failed to load has no tests to count, but it did fail.
      if (module.state() === 'failed' && !module.children.size) count.failed++
    }
    process.stdout.write(`\n${count.passed} passed, ${count.failed} failed, ${count.skipped} skipped\n`)
  }
}
