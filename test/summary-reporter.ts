/**
 * @module A vitest reporter that ends a run with one plain line, `N passed, N failed, N skipped`, so CI
 * logs can be read by anything that counts tests, whatever reporter prints above it.
 */
import type { Reporter, TestModule } from 'vitest/node'

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown> = []): void {
    const count = { passed: 0, failed: 0, skipped: 0, pending: 0 }
    for (const module of testModules) {
      const before = count.failed
      for (const test of module.children.allTests()) count[test.result().state]++
      // A file that failed outside its tests (it did not load, or a beforeAll threw and its tests were
      // skipped) has no failed test to count, but it did fail.
      if (module.state() === 'failed' && count.failed === before) count.failed++
    }
    // An error no test caught (an unhandled rejection) fails the run as vitest's exit code says; the line
    // says so too, rather than read as all passed.
    const errors = unhandledErrors.length === 0 ? '' : `, ${unhandledErrors.length} unhandled errors`
    process.stdout.write(
      `\n${count.passed} passed, ${count.failed} failed, ${count.skipped} skipped${errors}\n`,
    )
  }
}
