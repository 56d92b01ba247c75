/**
 * A NestJS app (Express platform) limited by @sluice/nestjs, state in memory (one process):
 * - every route: 100 a minute per client IP, each route on its own (`SluiceModule.forRoot`, a global guard);
 *   GET / has this limit alone;
 * - POST /pay: a limit per `bizType + channel` (headers x-biz-type, x-channel) from a table, where a missing
 *   entry or -1 means not limited (`@RateLimit` on the route);
 * - GET /users/:id: 5 a minute per route template, however many ids are asked for (`key: 'route'`);
 * - GET /report: a leaky bucket passing 2 requests a second; a request waits up to 2 s for its turn;
 * - GET /health: `@SkipRateLimit()`, never limited.
 * Build and run from the repository root: pnpm --filter @sluice/example-nestjs build &&
 * node examples/nestjs/dist/main.js (PORT, default 3000).
 */
import 'reflect-metadata'
import { NestFactory } from '@nestjs/core'
import { AppModule } from './app.module.js'

const port = Number(process.env.PORT ?? 3000)
// Behind your own proxy, sluice's 'ip' key needs Express's trust proxy: app.set('trust proxy', 1).
const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] })
try {
  await app.listen(port)
} catch (error) {
  const code = (error as NodeJS.ErrnoException).code
  console.error(
    `Cannot listen on port ${port}: ${code ?? (error as Error).message}. Set PORT to a free port.`,
  )
  process.exit(1)
}
const url = `http://localhost:${port}`
console.log(`sluice nestjs example on ${url}

  # 100 a minute per client IP: the 101st call gets 429
  curl -i ${url}/

  # a payment: 3 a second on ALIPAY, 2 on WECHAT; REFUND/ALIPAY and unknown pairs are not limited
  curl -i -X POST ${url}/pay -H 'x-biz-type: PAYMENT' -H 'x-channel: ALIPAY'

  # one limit for the route, whatever the id: the sixth call in a minute gets 429
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' ${url}/users/$i; done

  # queue-and-wait: 6 at once pass 500 ms apart; the one past a 2 s wait gets 429
  for i in 1 2 3 4 5 6; do curl -s ${url}/report & done; wait

  # not limited, no rate-limit headers
  curl -i ${url}/health`)
