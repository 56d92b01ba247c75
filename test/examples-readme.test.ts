/**
 * The README and the guides under docs/ cannot drift from the code: every ```ts block in them is
 * typechecked against the packages' sources (as tests are, with the same compiler options), every relative
 * link and picture in them points at a file that exists, and "On a fresh machine" names exactly the two
 * commands dev.sh runs.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { ROOT } from './examples-harness.ts'

const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

/** The README and every guide under docs/, by path from the root. */
const DOCS: ReadonlyMap<string, string> = new Map(
  [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ].map((path) => [path, readFileSync(join(ROOT, path), 'utf8')]),
)

/** The README's ```ts blocks, with the line each starts on. */
function tsBlocks(markdown: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end]!.trim() !== '```') end++
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n') })
    i = end
  }
  return blocks
}

/** A peer's type entry point, the very file the packages' own sources resolve. */
function typesOf(packageDir: string): string {
  const dir = realpathSync(join(ROOT, packageDir))
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { types?: string }
  return join(dir, manifest.types ?? 'index.d.ts')
}

/** Typechecks `sources` (virtual files under test/, ESM by test/package.json); returns the errors in them. */
function typecheck(sources: Map<string, string>): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.tests.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'))
      },
    },
  )!
  const options: ts.CompilerOptions = {
    ...config.options,
    noEmit: true,
    paths: {
      ...config.options.paths,
      // The peers, from the packages that depend on them: a README reader installs them next to sluice.
      express: [typesOf('packages/express/node_modules/@types/express')],
      fastify: [typesOf('packages/fastify/node_modules/fastify')],
      ioredis: [typesOf('packages/redis/node_modules/ioredis')],
      redis: [typesOf('packages/redis/node_modules/redis')],
    },
  }
  const host = ts.createCompilerHost(options)
  const { getSourceFile, fileExists, readFile } = host
  host.fileExists = (name) => sources.has(name) || fileExists.call(host, name)
  host.readFile = (name) => sources.get(name) ?? readFile.call(host, name)
  host.getSourceFile = (name, language, ...rest) => {
    const text = sources.get(name)
    return text === undefined
      ? getSourceFile.call(host, name, language, ...rest)
      : ts.createSourceFile(name, text, language, true)
  }
  const program = ts.createProgram([...sources.keys()], options, host)
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file !== undefined && sources.has(d.file.fileName))
    .map((d) => {
      const { line, character } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0)
      return `${d.file!.fileName}:${line + 1}:${character + 1} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
    })
}

describe('README.md', () => {
  it('starts with the two commands a fresh machine needs', () => {
    const section = /## On a fresh machine\n([\s\S]*?)\n## /.exec(README)?.[1] ?? ''
    const commands = /```sh\n([\s\S]*?)```/
      .exec(section)?.[1]
      ?.trim()
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
    expect(commands).toEqual(['bash dev.sh start', 'bash dev.sh test'])
    // `start` is the Express example on the in-memory store, as the README says.
    const scripts = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts
    expect(scripts.start).toContain('node examples/express/server.mjs')
  })

  it('has only code blocks that typecheck against the current API, and so do the guides', {
    timeout: 120_000,
  }, () => {
    expect(tsBlocks(README).length).toBeGreaterThanOrEqual(3)
    const sources = new Map<string, string>()
    const where = new Map<string, string>()
    let count = 0
    for (const [path, markdown] of DOCS) {
      for (const block of tsBlocks(markdown)) {
        // `export {}` keeps each block a module of its own even when it imports nothing.
        const name = join(ROOT, 'test', `readme-block-${++count}.ts`)
        sources.set(name, `${block.code}\nexport {}\n`)
        where.set(name, `${path}:${block.line}`)
      }
    }
    expect(count).toBeGreaterThanOrEqual(10)
    const errors = typecheck(sources).map((error) => {
      const [file, line] = error.split(':')
      const [path, start] = where.get(file!)!.split(':')
      return `${path}:${Number(start) + Number(line) - 1} ${error.slice(error.indexOf(' ') + 1)}`
    })
    expect(errors).toEqual([])
  })

  it('links only to files that exist, from the README and from every guide', () => {
    let count = 0
    const missing: string[] = []
    for (const [path, markdown] of DOCS) {
      const targets = [...markdown.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((target) => !/^[a-z]+:/.test(target) && !target.startsWith('#'))
        .map((target) => join(dirname(path), target.split('#')[0]!))
      count += targets.length
      // bench/RESULTS.md is written by the benchmark run, so a page may link to it before it exists.
      for (const t of targets) {
        if (t !== 'bench/RESULTS.md' && !existsSync(join(ROOT, t))) missing.push(`${path}: ${t}`)
      }
    }
    expect(count).toBeGreaterThan(5)
    expect(missing).toEqual([])
  })
})
