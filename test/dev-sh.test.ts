/** What `bash dev.sh` runs for each of its commands, read from the script itself, and what its build does. */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ROOT } from './examples-harness.ts'

const script = readFileSync(join(ROOT, 'dev.sh'), 'utf8')
const command = (name: string) => new RegExp(`^  ${name}\\) (.*) ;;$`, 'm').exec(script)?.[1] ?? ''

describe('dev.sh', () => {
  it('test rebuilds only stale packages (it rebuilt all of them on every run, 57 s with nothing changed)', () => {
    expect(command('test')).toContain('build_if_stale; run_tests')
    expect(command('test')).not.toMatch(/pnpm (test|build|run build)\b/)
    const runTests = /^run_tests\(\) \{\n([\s\S]*?)^\}/m.exec(script)?.[1] ?? ''
    expect(runTests).toContain('pnpm exec vitest run')
    expect(runTests).toContain('SLUICE_TESTS=serial pnpm exec vitest run')
    expect(runTests).not.toMatch(/pnpm (test|build|run build)\b/)
  })

  it('start, and pnpm release through dev.sh build, build only what is stale too', () => {
    expect(command('start')).toContain('build_if_stale')
    expect(command('build')).toBe('build_if_stale')
    const release = readFileSync(join(ROOT, 'scripts', 'release.mjs'), 'utf8')
    expect(release).toContain("execFileSync('bash', ['dev.sh', 'build']")
  })

  it('puts a supported Node first before it runs anything: start, test, setup and registry', () => {
    for (const name of ['start', 'test', 'setup', 'registry']) expect(command(name)).toMatch(/^ensure_node; /)
  })

  it('build finds every package fresh right after a build, @sluice/cli too (a command alone, with no dist/index.js)', {
    timeout: 600_000,
  }, () => {
    execFileSync('bash', ['dev.sh', 'build'], { cwd: ROOT, encoding: 'utf8' })
    expect(execFileSync('bash', ['dev.sh', 'build'], { cwd: ROOT, encoding: 'utf8' })).toBe('')
  })
})
