import { Controller, Get, HttpCode, Param, Post, Req } from '@nestjs/common'
import { type Decision, leakyBucket, slidingLog } from '@sluice/core'
import { RateLimit, SkipRateLimit } from '@sluice/nestjs'

/** Calls per second to each outside payment channel; -1 or a missing pair: not limited. */
const channels: Record<string, number> = { 'PAYMENT:ALIPAY': 3, 'PAYMENT:WECHAT': 2, 'REFUND:ALIPAY': -1 }

/** The decision the guard left on the request (Express's `req` here, Fastify's `request` on Fastify). */
type Limited = { rateLimit?: Decision }

@Controller()
export class AppController {
  /** The module's limit alone: 100 a minute per client IP. */
  @Get()
  hello(@Req() req: Limited) {
    return { hello: 'world', remaining: req.rateLimit?.remaining ?? null }
  }

  /** Per `bizType + channel` (headers x-biz-type, x-channel), from the table; rules `null`: not limited. */
  @Post('pay')
  @HttpCode(200)
  @RateLimit({
    key: { header: ['x-biz-type', 'x-channel'] },
    rules: (key) => {
      const limit = channels[key]
      return limit === undefined || limit < 0 ? null : [slidingLog({ limit, windowMs: 1000 })]
    },
  })
  pay(@Req() req: Limited) {
    const rules = req.rateLimit?.rules ?? []
    return { paid: true, limitedBy: rules.length > 0 ? (req.rateLimit?.rule ?? null) : null }
  }

  /** 5 a minute for the route, whatever the id (`key: 'route'` is its template, GET /users/:id). */
  @Get('users/:id')
  @RateLimit({ key: 'route', rules: [slidingLog({ limit: 5, windowMs: 60_000 })] })
  user(@Param('id') id: string, @Req() req: Limited) {
    return { id, remaining: req.rateLimit?.remaining ?? null }
  }

  /** 2 a second; a request waits up to 2 s for its turn, held inside the guard, then runs. */
  @Get('report')
  @RateLimit({ rules: [leakyBucket({ ratePerSecond: 2, maxQueueMs: 2000 })] })
  report(@Req() req: Limited) {
    return { report: 'ready', waitedMs: req.rateLimit?.waitMs ?? null }
  }

  /** Never limited, and answered without rate-limit headers. */
  @Get('health')
  @SkipRateLimit()
  health() {
    return { ok: true }
  }
}
