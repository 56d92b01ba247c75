/**
 * Real Nest apps, on both platforms, answering real HTTP requests through `SluiceModule` and its guard:
 * the module's limit, each route counting on its own, method over class over module, skips, the
 * exception and the filters that see it, headers, and what the guard says at init.
 */
import {
  type ArgumentsHost,
  Catch,
  Controller,
  type ExceptionFilter,
  Get,
  Module,
  Param,
  Req,
  type Type,
} from '@nestjs/common'
import { APP_FILTER } from '@nestjs/core'
import { type Decision, ErrorCode, fixedWindow, InvalidOptionError, slidingLog } from '@sluice/core'
import { afterEach, describe, expect, it } from 'vitest'
import {
  RateLimit,
  RateLimitedException,
  SkipRateLimit,
  SluiceModule,
  type SluiceModuleOptions,
} from '../src/index.ts'
import { clocked, platforms, type Running, start, statuses } from './support.ts'

const running: Running[] = []
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()))
})

type Counted = { rateLimit?: Decision }

@Controller('a')
class AController {
  @Get()
  a(@Req() req: Counted) {
    return { ok: true, remaining: req.rateLimit?.remaining ?? null, allowed: req.rateLimit?.allowed ?? null }
  }

  @Get('other')
  other() {
    return { ok: true }
  }

  @Get('items/:id')
  item(@Param('id') id: string) {
    return { id }
  }
}

@Controller('pay')
@RateLimit({ key: { header: ['x-biz-type'] } })
class PayController {
  @Get()
  @RateLimit({ rules: [slidingLog({ limit: 1, windowMs: 60_000 })] })
  pay() {
    return { ok: true }
  }

  @Get('list')
  list() {
    return { ok: true }
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return { ok: true }
  }
}

@Controller('open')
@RateLimit(false)
class OpenController {
  @Get()
  open() {
    return { ok: true }
  }

  @Get('limited')
  @RateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })] })
  limited() {
    return { ok: true }
  }
}

/** A controller whose subclass inherits its routes: the subclass counts on its own. */
@Controller('base')
class BaseController {
  @Get()
  base() {
    return { ok: true }
  }
}

@Controller('derived')
class DerivedController extends BaseController {}

/** A controller named ItemsController at `path`: two of them share a class name, as a v1 and a v2 do. */
function itemsController(path: string) {
  @Controller(path)
  class ItemsController {
    @Get()
    list() {
      return { ok: true }
    }
  }
  return ItemsController
}

function appModule(options: SluiceModuleOptions, controllers: Type<unknown>[], providers: unknown[] = []) {
  @Module({ imports: [SluiceModule.forRoot(options)], controllers, providers: providers as never[] })
  class AppModule {}
  return AppModule
}

async function run(platform: (typeof platforms)[number], module: Type<unknown>): Promise<Running> {
  const r = await start(platform, module)
  running.push(r)
  return r
}

for (const platform of platforms) {
  describe(`@sluice/nestjs on ${platform.name}`, () => {
    it("limits a route by the module's options: 429 with problem details, Retry-After and the draft's headers", async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 2, windowMs: 60_000 })], store }, [AController]),
      )
      const first = await app.get('/a')
      expect(first.status).toBe(200)
      expect(await first.json()).toEqual({ ok: true, remaining: 1, allowed: true })
      expect(first.headers.get('ratelimit-policy')).toBe('"2-per-60s";q=2;w=60')
      expect(first.headers.get('ratelimit')).toBe('"2-per-60s";r=1;t=60')
      expect((await app.get('/a')).status).toBe(200)
      const denied = await app.get('/a')
      expect(denied.status).toBe(429)
      expect(denied.headers.get('content-type')).toMatch(/^application\/problem\+json/)
      expect(denied.headers.get('retry-after')).toBe('60')
      expect(denied.headers.get('ratelimit')).toBe('"2-per-60s";r=0;t=60')
      expect(await denied.json()).toEqual({
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        detail: 'Rate limit 2-per-60s exceeded; retry in 60 s.',
        retryAfter: 60,
      })
    })

    it('counts each route on its own, and a parameterised route by its template', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }, [AController]),
      )
      expect(await statuses(app, '/a', 2)).toEqual([200, 429])
      expect(await statuses(app, '/a/other', 2)).toEqual([200, 429])
      // Two ids, one route: one count.
      expect((await app.get('/a/items/1')).status).toBe(200)
      expect((await app.get('/a/items/2')).status).toBe(429)
    })

    it("merges method over class over module: the class's key, the method's rules, the module's rules where the method gives none", async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 3, windowMs: 60_000 })], store }, [PayController]),
      )
      const alipay = { headers: { 'x-biz-type': 'ALIPAY' } }
      const card = { headers: { 'x-biz-type': 'CARD' } }
      // The method's rules (1 per minute), per the class's key (the biz type).
      expect(await statuses(app, '/pay', 2, alipay)).toEqual([200, 429])
      expect(await statuses(app, '/pay', 1, card)).toEqual([200])
      // The module's rules (3 per minute) under the class's key.
      expect(await statuses(app, '/pay/list', 4, alipay)).toEqual([200, 200, 200, 429])
      // The class's key needs its header: 400 with problem details naming it.
      const missing = await app.get('/pay/list')
      expect(missing.status).toBe(400)
      expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/)
      expect(await missing.json()).toMatchObject({
        status: 400,
        detail: expect.stringContaining('x-biz-type'),
      })
    })

    it('lets a skipped route through with no headers and no count; a method may limit itself in a skipped class', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }, [
          PayController,
          OpenController,
        ]),
      )
      for (let i = 0; i < 3; i++) {
        const res = await app.get('/pay/health')
        expect(res.status).toBe(200)
        expect(res.headers.get('ratelimit')).toBeNull()
        const open = await app.get('/open')
        expect(open.status).toBe(200)
        expect(open.headers.get('ratelimit-policy')).toBeNull()
      }
      expect(await statuses(app, '/open/limited', 2)).toEqual([200, 429])
    })

    it('counts a subclass of a controller apart from its base class', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store }, [
          BaseController,
          DerivedController,
        ]),
      )
      expect(await statuses(app, '/base', 2)).toEqual([200, 429])
      expect(await statuses(app, '/derived', 2)).toEqual([200, 429])
    })

    it('counts two controllers of one class name (a v1 and a v2 ItemsController) each on its own', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 3, windowMs: 60_000 })], store }, [
          itemsController('v1/items'),
          itemsController('v2/items'),
        ]),
      )
      expect(await statuses(app, '/v1/items', 4)).toEqual([200, 200, 200, 429])
      expect(await statuses(app, '/v2/items', 4)).toEqual([200, 200, 200, 429])
      // Two counts, one per controller.
      expect(store.size).toBe(2)
    })

    it('throws RateLimitedException, which an exception filter of the app sees and answers', async () => {
      const seen: unknown[] = []
      @Catch(RateLimitedException)
      class Filter implements ExceptionFilter {
        catch(exception: RateLimitedException, host: ArgumentsHost) {
          seen.push(exception)
          const res = host.switchToHttp().getResponse()
          const body = JSON.stringify({ slowDown: exception.decision.retryAfterMs })
          if (platform.name === 'fastify') res.code(503).header('content-type', 'application/json').send(body)
          else res.status(503).type('application/json').send(body)
        }
      }
      const { store } = clocked()
      const module = appModule(
        { rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store },
        [AController],
        [{ provide: APP_FILTER, useClass: Filter }],
      )
      const app = await run(platform, module)
      await app.get('/a')
      const denied = await app.get('/a')
      expect(denied.status).toBe(503)
      expect(await denied.json()).toEqual({ slowDown: 60_000 })
      // The rate-limit headers were on the response before the filter answered.
      expect(denied.headers.get('retry-after')).toBe('60')
      expect(seen).toHaveLength(1)
      const exception = seen[0] as RateLimitedException
      expect(exception).toBeInstanceOf(RateLimitedException)
      expect(exception.getStatus()).toBe(429)
      expect(exception.code).toBe(ErrorCode.RATE_LIMITED)
      expect(exception.message).toBe('Rate limit 1-per-60s exceeded; retry in 60 s.')
      expect(exception.headers['Retry-After']).toBe('60')
    })

    it('sends the limit headers as asked: legacy X-RateLimit-* beside the draft, none with headers: false', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule(
          { rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store, headers: { legacy: true } },
          [AController],
        ),
      )
      const res = await app.get('/a')
      expect(res.headers.get('x-ratelimit-limit')).toBe('5')
      expect(res.headers.get('x-ratelimit-remaining')).toBe('4')
      expect(res.headers.get('ratelimit')).toBe('"5-per-60s";r=4;t=60')
      const quiet = await run(
        platform,
        appModule(
          { rules: [fixedWindow({ limit: 5, windowMs: 60_000 })], store: clocked().store, headers: false },
          [AController],
        ),
      )
      const plain = await quiet.get('/a')
      expect(plain.status).toBe(200)
      expect(plain.headers.get('ratelimit')).toBeNull()
    })

    it('answers with onLimited when it sends, and with the exception when it only looks', async () => {
      const looked: number[] = []
      const { store } = clocked()
      const answering = await run(
        platform,
        appModule(
          {
            rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
            store,
            onLimited: (_req, res, decision) => {
              looked.push(decision.retryAfterMs)
              if (platform.name === 'fastify') res.code(418).send({ teapot: true })
              else res.status(418).json({ teapot: true })
            },
          },
          [AController],
        ),
      )
      await answering.get('/a')
      const denied = await answering.get('/a')
      expect(denied.status).toBe(418)
      expect(await denied.json()).toEqual({ teapot: true })
      const looking = await run(
        platform,
        appModule(
          {
            rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
            store: clocked().store,
            onLimited: async (_req, _res, decision) => {
              looked.push(decision.retryAfterMs)
            },
          },
          [AController],
        ),
      )
      await looking.get('/a')
      const limited = await looking.get('/a')
      expect(limited.status).toBe(429)
      expect(limited.headers.get('content-type')).toMatch(/^application\/problem\+json/)
      expect(looked).toEqual([60_000, 60_000])
    })

    it('shadow: counts, never denies, sends no headers', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })], store, shadow: true }, [
          AController,
        ]),
      )
      const bodies: { allowed: boolean }[] = []
      for (let i = 0; i < 3; i++) {
        const res = await app.get('/a')
        expect(res.status).toBe(200)
        expect(res.headers.get('ratelimit')).toBeNull()
        bodies.push((await res.json()) as { allowed: boolean })
      }
      // Counted all the same: req.rateLimit shows the second and third would have been denied.
      expect(bodies.map((b) => b.allowed)).toEqual([true, false, false])
    })

    it('blocks a key its rules deny, answered with blockedStatusCode', async () => {
      const { store } = clocked()
      const app = await run(
        platform,
        appModule(
          {
            rules: [fixedWindow({ limit: 1, windowMs: 60_000 })],
            store,
            block: { ms: 600_000 },
            blockedStatusCode: 403,
          },
          [AController],
        ),
      )
      expect(await statuses(app, '/a', 3)).toEqual([200, 403, 403])
      const blocked = await app.get('/a')
      expect(blocked.headers.get('retry-after')).toBe('600')
    })
  })
}

describe('@sluice/nestjs options are checked where they are written', () => {
  it('forRoot throws InvalidOptionError naming the option', () => {
    expect(() =>
      SluiceModule.forRoot({ rules: [fixedWindow({ limit: 1, windowMs: 1000 })], cost: 0 }),
    ).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'SluiceModule.forRoot.cost' }),
    )
    expect(() => SluiceModule.forRoot({ ttl: 60 } as never)).toThrow(InvalidOptionError)
  })

  it('@RateLimit throws as the class is decorated, naming RateLimit.<option>', () => {
    expect(() => RateLimit({ statusCode: 200 })).toThrow(
      expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'RateLimit.statusCode' }),
    )
    expect(() => RateLimit({ limit: 5 } as never)).toThrow(
      expect.objectContaining({ option: 'RateLimit.limit' }),
    )
  })

  for (const platform of platforms) {
    it(`two classes of one name routed alike fail the app's start with ERR_SLUICE_PREFIX_COLLISION on ${platform.name}, rather than share a count`, async () => {
      const resolver = () => {
        @RateLimit({ rules: [fixedWindow({ limit: 1, windowMs: 60_000 })] })
        class ItemsResolver {
          items() {
            return []
          }
        }
        return ItemsResolver
      }
      const refused = start(platform, appModule({ key: 'ip' }, [], [resolver(), resolver()]))
      await expect(refused).rejects.toThrow(
        expect.objectContaining({
          code: ErrorCode.PREFIX_COLLISION,
          message: expect.stringContaining('Two classes named ItemsResolver, routed alike'),
        }),
      )
    })

    it(`a limited route with no rules anywhere fails the app's start on ${platform.name}`, async () => {
      await expect(start(platform, appModule({ key: 'ip' }, [AController]))).rejects.toThrow(
        expect.objectContaining({ code: ErrorCode.INVALID_OPTION, option: 'SluiceModule.forRoot.rules' }),
      )
    })
  }
})
