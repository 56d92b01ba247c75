import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Decision, Limiter } from '@sluice/core'
import {
  type ExpressRateLimitOptions,
  type RateLimitMiddleware,
  type RequestRateLimit,
  rateLimit,
} from '@sluice/express'
import type { Request, RequestHandler, Response } from 'express'
import { build } from 'tsup'
import ts from 'typescript'
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest'
import { declarationCompilerOptions, packageBuild } from '../../../tsup.base.ts'

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))

describe('types', () => {
  it('types req.rateLimit, the options and the middleware from the source', () => {
    expectTypeOf<Request['rateLimit']>().toEqualTypeOf<RequestRateLimit | undefined>()
    expectTypeOf(rateLimit).parameter(0).toEqualTypeOf<ExpressRateLimitOptions>()
    expectTypeOf<RateLimitMiddleware>().toExtend<RequestHandler>()
    expectTypeOf<RateLimitMiddleware['limiter']>().toEqualTypeOf<Limiter<Request>>()
    expectTypeOf<NonNullable<ExpressRateLimitOptions['onLimited']>>().toEqualTypeOf<
      (req: Request, res: Response, decision: Decision) => void | Promise<void>
    >()
    expectTypeOf<NonNullable<ExpressRateLimitOptions['skip']>>().parameter(0).toEqualTypeOf<Request>()
  })

  describe('the built declarations', () => {
    let dir: string | undefined
    afterAll(async () => {
      if (dir !== undefined) await rm(dir, { recursive: true, force: true })
    })

    // What a user writes. Each @ts-expect-error must be an error: were the types `any`, it would not be.
    const consumer = `
import express, { type Request } from 'express'
import { fixedWindow } from '@sluice/core'
import { type Decision, type ExpressRateLimitOptions, rateLimit } from '@sluice/express'

const app = express()
const options: ExpressRateLimitOptions = {
  rules: [fixedWindow({ limit: 1, windowMs: 1000 })],
  key: { header: ['x-biz-type', 'x-channel'] },
  onLimited: (req, res, decision) => {
    res.status(429).json({ rule: decision.rule, path: req.path })
  },
}
const limit = rateLimit(options)
app.post('/pay', limit, (req: Request, res) => {
  const decision: Decision | undefined = req.rateLimit
  res.json({ remaining: req.rateLimit?.remaining, decision })
  void req.rateLimit?.settle({ tokens: 1200 })
})
app.get('/', (req) => {
  // @ts-expect-error the decision is absent when no limit counted the request
  req.rateLimit.remaining
})
// @ts-expect-error an option sluice does not have
rateLimit({ rules: [], windowMs: 1000 })
limit.limiter.peek('PAYMENT:ALIPAY')
`

    it('carry the req.rateLimit augmentation, for ESM and CJS users', { timeout: 60_000 }, async () => {
      dir = await mkdtemp(join(tmpdir(), 'sluice-express-types-'))
      await build({
        ...packageBuild,
        entry: [here('../src/index.ts')],
        outDir: dir,
        format: ['esm', 'cjs'],
        dts: {
          only: true,
          compilerOptions: { ...declarationCompilerOptions, rootDir: here('../src') },
        },
        tsconfig: here('../tsconfig.json'),
        external: ['@sluice/core', 'express'],
        sourcemap: false,
        clean: false,
        silent: true,
      })
      // The consumer resolves express and @sluice/core as the package itself does.
      await symlink(here('../node_modules'), join(dir, 'node_modules'), 'dir')
      await writeFile(join(dir, 'package.json'), '{ "type": "module" }')
      const dts = await readFile(join(dir, 'index.d.ts'), 'utf8')
      expect(dts).toMatch(/declare global \{\s+namespace Express \{\s+interface Request \{/)
      expect(await readFile(join(dir, 'index.d.cts'), 'utf8')).toBe(dts)

      let previous: ts.Program | undefined
      for (const types of ['index.d.ts', 'index.d.cts']) {
        const file = join(dir, `consumer-${types.replaceAll('.', '-')}.ts`)
        await writeFile(file, consumer)
        const program = ts.createProgram({
          rootNames: [file],
          oldProgram: previous,
          options: {
            strict: true,
            noEmit: true,
            target: ts.ScriptTarget.ES2022,
            module: ts.ModuleKind.NodeNext,
            moduleResolution: ts.ModuleResolutionKind.NodeNext,
            types: ['node'],
            // Library files are taken as they are; what counts is whether the consumer compiles against them.
            skipLibCheck: true,
            allowImportingTsExtensions: true,
            paths: {
              '@sluice/express': [join(dir, types)],
              '@sluice/core': [here('../../core/src/index.ts')],
            },
          },
        })
        previous = program
        const diagnostics = ts
          .getPreEmitDiagnostics(program)
          .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
        expect(diagnostics, types).toEqual([])
      }
    })
  })
})
