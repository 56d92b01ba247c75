/**
 * Installing sluice before it is published: `bash dev.sh pack` writes a tarball of every package, with its
 * `workspace:` ranges turned into versions, and an app outside the repository installs them with npm (the
 * tarballs, plus the registry for third-party packages) and runs, as ES modules and as CommonJS. Uses the
 * packages' builds, as `bash dev.sh test` leaves them.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core'
import { publint } from 'publint'
import { formatMessage } from 'publint/utils'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ROOT } from './examples-harness.ts'

const run = promisify(execFile)
// Generous bounds for npm and a build under load: they only stop a hung run, and assert nothing.
const SLOW = 600_000

let scratch = ''
let packs = ''
let app = ''
let packed = { stdout: '', stderr: '' }

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'sluice-install-'))
  packs = join(scratch, 'packs')
  app = join(scratch, 'app')
  packed = await run('bash', ['dev.sh', 'pack'], {
    cwd: ROOT,
    env: { ...process.env, SLUICE_PACK_DIR: packs },
    timeout: SLOW,
    maxBuffer: 16 << 20,
  })
}, SLOW)

afterAll(async () => {
  if (scratch !== '') await rm(scratch, { recursive: true, force: true })
})

/** The server every app runs: two requests a minute, written as text, then three requests to itself. */
const server = (load: string) => `${load}
const app = express()
app.use(rateLimit({ rules: ['fixedWindow:2/1m'] }))
app.get('/', (_req, res) => res.send('ok'))
const listening = app.listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + listening.address().port
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await fetch(url)).status)
  console.log(statuses.join(','), typeof parseRuleSpec)
  listening.close()
})
`

describe('an app outside the workspace, installed from the tarballs with npm', () => {
  it('packs from the builds as they are, rebuilding nothing when no input of a build changed', () => {
    // The suite runs after `bash dev.sh test` built what was stale, so every build here is fresh: a
    // staleness check that finds every build stale (as dev.sh test's unconditional build did) rebuilds.
    expect(packed.stdout).not.toContain('Building the packages')
    expect(packed.stdout).toContain('npm install')
  })

  it('gets one tarball per package, each with its internal dependencies as versions', async () => {
    const packages = (await readdir(join(ROOT, 'packages'))).sort()
    const tarballs = (await readdir(packs)).sort()
    expect(tarballs.map((t) => t.replace(/^sluice-(.+)-\d+\.\d+\.\d+\.tgz$/, '$1'))).toEqual(packages)
    for (const tarball of tarballs) {
      const { stdout } = await run('tar', ['-xOzf', join(packs, tarball), 'package/package.json'])
      expect(stdout, tarball).not.toContain('workspace:')
    }
  })

  // The package checks run here, on the tarballs users would install, rather than in every build. Both run
  // in this process, by their libraries: a tool's process per tarball cost half a minute of the suite.
  it(
    'passes publint --strict and are-the-types-wrong (node16 profile): what npm users get resolves, typed, as ESM and CJS',
    async () => {
      const tarballs = (await readdir(packs)).sort()
      const checked: (readonly [string, string[]])[] = []
      for (const tarball of tarballs) {
        const data = await readFile(join(packs, tarball))
        const problems: string[] = []
        // --strict: a warning fails as an error does; a suggestion does not.
        const linted = await publint({ pack: { tarball: new Uint8Array(data).buffer }, strict: true })
        for (const message of linted.messages) {
          if (message.type !== 'suggestion') problems.push(`publint: ${formatMessage(message, linted.pkg)}`)
        }
        // The node16 profile: every resolution but node10's must find the types.
        const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(data)))
        if (analysis.types === false) problems.push('attw: no types')
        else {
          for (const problem of analysis.problems) {
            if (!('resolutionKind' in problem) || problem.resolutionKind !== 'node10') {
              problems.push(`attw: ${JSON.stringify(problem)}`)
            }
          }
        }
        checked.push([tarball, problems])
      }
      expect(checked.filter(([, problems]) => problems.length > 0)).toEqual([])
      expect(checked).toHaveLength(tarballs.length)
    },
    SLOW,
  )

  it(
    'installs @sluice/core and @sluice/express from them and runs, as ESM and as CommonJS',
    async () => {
      const tarballs = await readdir(packs)
      const tarball = (name: string) => join(packs, tarballs.find((t) => t.startsWith(`sluice-${name}-`))!)
      await run('mkdir', ['-p', app])
      await writeFile(join(app, 'package.json'), '{ "name": "scratch-app", "private": true }\n')
      await run(
        'npm',
        [
          'install',
          '--no-audit',
          '--no-fund',
          '--prefer-offline',
          '--loglevel=error',
          tarball('core'),
          tarball('express'),
          'express@5',
        ],
        { cwd: app, timeout: SLOW },
      )
      await writeFile(
        join(app, 'server.mjs'),
        server(
          "import express from 'express'\nimport { rateLimit } from '@sluice/express'\nimport { parseRuleSpec } from '@sluice/core'",
        ),
      )
      await writeFile(
        join(app, 'server.cjs'),
        server(
          "const express = require('express')\nconst { rateLimit } = require('@sluice/express')\nconst { parseRuleSpec } = require('@sluice/core')",
        ),
      )
      for (const script of ['server.mjs', 'server.cjs']) {
        const { stdout } = await run('node', [script], { cwd: app, timeout: SLOW })
        expect(stdout.trim(), script).toBe('200,200,429 function')
      }
    },
    SLOW,
  )
})
