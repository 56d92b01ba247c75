/**
 * The README and the guides under docs/ cannot drift from the code: every ```ts (or ```typescript) block in
 * them is typechecked against the packages' sources (as tests are, with the same compiler options, and
 * decorators as @sluice/nestjs writes them); every relative link and picture in them and in the packages'
 * READMEs points at a file that exists, and every #anchor at a heading of that file; every docs/ link in the
 * packages' sources (error hints) too; and "On a fresh machine" names exactly the two commands dev.sh runs.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { parseHttpOptions } from '@sluice/core/http'
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

/** Every package's README, by path from the root. */
const PACKAGE_READMES: ReadonlyMap<string, string> = new Map(
  readdirSync(join(ROOT, 'packages'))
    .map((name) => `packages/${name}/README.md`)
    .filter((path) => existsSync(join(ROOT, path)))
    .map((path) => [path, readFileSync(join(ROOT, path), 'utf8')]),
)

/** The fences a TypeScript block may open with; each is typechecked. */
const TS_FENCES = new Set(['```ts', '```typescript'])

/** A page's ```ts blocks, with the line each starts on. */
function tsBlocks(markdown: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (!TS_FENCES.has(lines[i]!.trim())) continue
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
      '@nestjs/common': [typesOf('packages/nestjs/node_modules/@nestjs/common')],
    },
    // As @sluice/nestjs and its users write Nest's decorators; no other block uses decorators.
    experimentalDecorators: true,
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
  it('opens with what sluice is, why over each peer, the install line and a quick start of 10 lines at most', () => {
    const headings = [...README.matchAll(/^## (.+)$/gm)].map((m) => m[1])
    expect(headings.slice(0, 3)).toEqual(['Why sluice over the peers', 'Install', 'Quick start'])
    const why = /## Why sluice over the peers\n([\s\S]*?)\n## /.exec(README)?.[1] ?? ''
    const peers = [...why.matchAll(/^- \*\*(.+?)\*\*/gm)].map((m) => m[1])
    expect(peers).toEqual([
      'express-rate-limit',
      '@fastify/rate-limit',
      'rate-limiter-flexible',
      '@nestjs/throttler',
      'hono-rate-limiter',
    ])
    const install = /## Install\n+```sh\n([^\n]*)/.exec(README)?.[1]
    expect(install).toBe('npm install @sluice/express @sluice/core express')
    const quickStart = tsBlocks(README)[0]!.code.split('\n')
    expect(quickStart.length).toBeLessThanOrEqual(10)
  })

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
    expect(tsBlocks(README)).toHaveLength(1)
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

  it('links only to files and headings that exist, from the README, every guide and every package README', () => {
    let count = 0
    const missing: string[] = []
    for (const [path, markdown] of [...DOCS, ...PACKAGE_READMES]) {
      const targets = [...outsideCode(markdown).matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((target) => !/^[a-z]+:/.test(target))
      count += targets.length
      for (const target of targets) {
        const [file, anchor] = target.split('#') as [string, string | undefined]
        const to = file === '' ? path : normalize(join(dirname(path), file))
        // bench/RESULTS.md is written by the benchmark run, so a page may link to it before it exists.
        if (to === 'bench/RESULTS.md') continue
        const problem = linkProblem(to, anchor)
        if (problem !== undefined) missing.push(`${path}: ${target} (${problem})`)
      }
    }
    expect(count).toBeGreaterThan(50)
    expect(missing).toEqual([])
  })

  it('names only docs pages and headings that exist in error hints, and every hint for a peer names one', () => {
    const links: string[] = []
    for (const file of sourceFiles(join(ROOT, 'packages'))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/\b((?:docs\/[\w-]+|README)\.md)(#[\w-]+)?/g)) {
        links.push(`${m[1]}${m[2] ?? ''}`)
      }
    }
    // The peers' option names each throw with a hint naming the guide that says what sluice takes instead.
    for (const name of [
      'windowMs',
      'limit',
      'max',
      'timeWindow',
      'keyGenerator',
      'handler',
      'standardHeaders',
    ]) {
      let message = ''
      try {
        parseHttpOptions('rateLimit', { [name]: 1 })
      } catch (error) {
        message = (error as Error).message
      }
      const link = /\((docs\/[\w-]+\.md#[\w-]+)\)/.exec(message)?.[1]
      expect(link, `${name}: ${message}`).toBeDefined()
      links.push(link!)
    }
    const missing = links.filter((link) => {
      const [file, anchor] = link.split('#') as [string, string | undefined]
      return linkProblem(file, anchor) !== undefined
    })
    expect(links.length).toBeGreaterThanOrEqual(7)
    expect(missing).toEqual([])
  })
})

/** The markdown outside fenced code blocks (a block's text is code, not links). */
function outsideCode(markdown: string): string {
  return markdown.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1\s*$/gm, '')
}

/**
 * The anchors GitHub gives a page's headings: the heading's text without markup, lower-cased, with
 * punctuation dropped and spaces as hyphens; a repeated one gets -1, -2, …; plus any `<a id>`/`<a name>`.
 */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const [, heading] of outsideCode(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '')
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  for (const [, id] of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id!)
  return anchors
}

/** Why a link to `path` (from the root) and `anchor` is dead, or undefined when it is not. */
function linkProblem(path: string, anchor: string | undefined): string | undefined {
  const file = join(ROOT, path)
  if (!existsSync(file)) return 'no such file'
  if (anchor === undefined || anchor === '') return undefined
  if (statSync(file).isDirectory() || !path.endsWith('.md')) return 'an anchor in a page that has no headings'
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor) ? undefined : `no heading #${anchor}`
}

/** Every .ts file under the packages' src/ folders. */
function sourceFiles(packages: string): string[] {
  return readdirSync(packages)
    .map((name) => join(packages, name, 'src'))
    .filter((src) => existsSync(src))
    .flatMap((src) =>
      readdirSync(src, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => join(src, f)),
    )
}
