/**
 * The parts of a request's life the guard shares with the other adapters, in real Nest apps on both
 * platforms: a queued request held inside the guard (and stopped when its client leaves), `countWhen`,
 * concurrency released when the response ends or its client leaves, channels with the route template,
 * `forRootAsync`, and a feature module guarded with `@UseGuards(SluiceGuard)`.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import {
  Controller,
  Get,
  Module,
  NotFoundException,
  Param,
  Req,
  Res,
  type Type,
  UseGuards,
} from '@nestjs/common'
import {
  concurrency,
  type Decision,
  ErrorCode,
  fixedWindow,
  type HttpMessage,
  leakyBucket,
} from '@sluice/core'
import { afterEach, describe, expect, it } from 'vitest'
import { SluiceGuard, SluiceModule, type SluiceModuleOptions } from '../src/index.ts'
import { clocked, platforms, type Running, start, statuses } from './support.ts'

const running: Running[] = []
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()))
})

type Counted = { rateLimit?: Decision }

/** What reached the handlers, and gates a test opens to let a held handler finish. */
const reached: string[] = []
let entered: (() => void) | undefined
let gate: Promise<void> = Promise.resolve()
let closed: Promise<void> = Promise.resolve()

@Controller('life')
class LifeController {
  @Get('fast/:n')
  fast(@Param('n') n: string, @Req() req: Counted) {
    reached.push(n)
    return { n, waitMs: req.rateLimit?.waitMs ?? null }
  }

  @Get('fail')
  fail() {
    throw new NotFoundException()
  }

  @Get('slow')
  async slow(@Res({ passthrough: true }) res: { raw?: NodeJS.EventEmitter } & NodeJS.EventEmitter) {
    const raw = res.raw ?? res
    closed = new Promise((resolve) => raw.once('close', () => setImmediate(resolve)))
    entered?.()
    await gate
    return { ok: true }
  }
}

function appModule(options: SluiceModuleOptions, controllers: Type<unknown>[] = [LifeController]) {
  @Module({ imports: [SluiceModule.forRoot(options)], controllers })
  class AppModule {}
  return AppModule
}

async function run(platform: (typeof platforms)[number], module: Type<unknown>): Promise<Running> {
  const r = await start(platform, module)
  running.push(r)
  return r
}

/** Subscribes to `sluice:http` for the length of `body`. */
async function published(body: () => Promise<void>): Promise<HttpMessage[]> {
  const seen: HttpMessage[] = []
  const listener = (message: unknown) => seen.push(message as HttpMessage)
  subscribe('sluice:http', listener)
  try {
    await body()
  } finally {
    unsubscribe('sluice:http', listener)
  }
  return seen
}

for (const platform of platforms) {
  describe(`@sluice/nestjs request life on ${platform.name}`, () => {
    it('holds a queued request inside the guard, then runs it', async () => {
      reached.length = 0
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [leakyBucket({ ratePerSecond: 10, maxQueueMs: 1000 })], store }),
      )
      const first = await app.get('/life/fast/1')
      expect(await first.json()).toEqual({ n: '1', waitMs: 0 })
      // The clock stands still, so the second takes the next slot: 100 ms later, held by the guard.
      const second = await app.get('/life/fast/2')
      expect(second.status).toBe(200)
      expect(await second.json()).toEqual({ n: '2', waitMs: 100 })
      expect(reached).toEqual(['1', '2'])
    })

    it('stops a held request whose client leaves: its handler never runs', async () => {
      reached.length = 0
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 10_000 })], store }),
      )
      await (await app.get('/life/fast/1')).arrayBuffer()
      const leaving = new AbortController()
      const messages = await published(async () => {
        const held = app.get('/life/fast/2', { signal: leaving.signal }).catch(() => undefined)
        // Wait until the guard has decided to hold it (its `queue` message), then leave.
        for (let i = 0; i < 200 && reached.length < 1; i++) await new Promise((r) => setTimeout(r, 5))
        await new Promise((r) => setTimeout(r, 50))
        leaving.abort()
        await held
      })
      expect(messages.map((m) => m.action)).toEqual(['queue'])
      // Queued after the one that left, so its timer fires after the departed request's would have.
      const third = await app.get('/life/fast/3')
      expect(third.status).toBe(200)
      expect(reached).toEqual(['1', '3'])
    })

    it('countWhen: a request it answers false for is refunded once its response is sent', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({
          rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
          store,
          countWhen: (_req, res) => res.statusCode >= 400,
        }),
      )
      expect(await statuses(app, '/life/fast/1', 3)).toEqual([200, 200, 200])
      expect(await statuses(app, '/life/fail', 2)).toEqual([404, 429])
    })

    it('releases a concurrency lease when the response ends, and when its client leaves', async () => {
      const { store } = clocked()
      const app = await run(platform, appModule({ rules: [concurrency({ limit: 1 })], store }))
      // One after another: each lease ends with its response.
      gate = Promise.resolve()
      expect(await statuses(app, '/life/slow', 3)).toEqual([200, 200, 200])
      // One in flight holds the only lease.
      let open!: () => void
      gate = new Promise((resolve) => {
        open = resolve
      })
      const inside = new Promise<void>((resolve) => {
        entered = resolve
      })
      const leaving = new AbortController()
      const first = app.get('/life/slow', { signal: leaving.signal }).catch(() => undefined)
      await inside
      expect((await app.get('/life/slow')).status).toBe(429)
      // Its client leaves before the handler answers: the lease ends with the connection.
      leaving.abort()
      await first
      await closed
      open()
      gate = Promise.resolve()
      entered = undefined
      expect((await app.get('/life/slow')).status).toBe(200)
    })

    it('publishes each decision on sluice:http with the route template and the route prefix', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }),
      )
      const messages = await published(async () => {
        await statuses(app, '/life/fast/1', 1)
        await statuses(app, '/life/fast/2', 1)
      })
      expect(messages.map((m) => [m.action, m.route, m.limiter, m.key])).toEqual([
        ['allow', 'GET /life/fast/:n', 'sluice:LifeController.fast', '127.0.0.1'],
        ['deny', 'GET /life/fast/:n', 'sluice:LifeController.fast', '127.0.0.1'],
      ])
    })

    it('forRootAsync builds the options from injected providers', async () => {
      const LIMIT = Symbol('limit')
      @Module({ providers: [{ provide: LIMIT, useValue: 2 }], exports: [LIMIT] })
      class ConfigModule {}
      const { store } = clocked()
      @Module({
        imports: [
          SluiceModule.forRootAsync({
            imports: [ConfigModule],
            inject: [LIMIT],
            useFactory: async (limit: number) => ({
              rules: [fixedWindow({ limit, windowMs: 60_000 })],
              store,
            }),
          }),
        ],
        controllers: [LifeController],
      })
      class AsyncModule {}
      const app = await run(platform, AsyncModule)
      expect(await statuses(app, '/life/fast/1', 3)).toEqual([200, 200, 429])
    })

    it("forRootAsync's options are checked at init: an invalid one fails the app's start", async () => {
      @Module({
        imports: [
          SluiceModule.forRootAsync({
            useFactory: () => ({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], cost: -1 }),
          }),
        ],
        controllers: [LifeController],
      })
      class BadModule {}
      await expect(start(platform, BadModule)).rejects.toThrow(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'SluiceModule.forRootAsync.cost' }),
      )
      @Module({
        imports: [
          SluiceModule.forRootAsync({
            useFactory: () =>
              ({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], global: false }) as never,
          }),
        ],
      })
      class GlobalInFactory {}
      await expect(start(platform, GlobalInFactory)).rejects.toThrow(
        expect.objectContaining({ option: 'SluiceModule.forRootAsync.global' }),
      )
    })

    it('global: false limits only what says @UseGuards(SluiceGuard), in a feature module too; the global guard beside it counts once', async () => {
      @Controller('feature')
      @UseGuards(SluiceGuard)
      class FeatureController {
        @Get()
        feature() {
          return { ok: true }
        }
      }
      @Controller('free')
      class FreeController {
        @Get()
        free() {
          return { ok: true }
        }
      }
      @Module({ controllers: [FeatureController] })
      class FeatureModule {}
      const rules = [fixedWindow({ limit: 2, windowMs: 60_000 })]
      @Module({
        imports: [SluiceModule.forRoot({ rules, store: clocked().store, global: false }), FeatureModule],
        controllers: [FreeController],
      })
      class OptIn {}
      const app = await run(platform, OptIn)
      expect(await statuses(app, '/feature', 3)).toEqual([200, 200, 429])
      const free = await app.get('/free')
      expect(free.status).toBe(200)
      expect(free.headers.get('ratelimit')).toBeNull()
      expect(await statuses(app, '/free', 3)).toEqual([200, 200, 200])
      @Module({ imports: [SluiceModule.forRoot({ rules, store: clocked().store }), FeatureModule] })
      class Both {}
      const both = await run(platform, Both)
      expect(await statuses(both, '/feature', 3)).toEqual([200, 200, 429])
    })
  })
}
