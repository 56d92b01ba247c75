/**
 * Two Nest apps, one per platform (two "processes": each its own Redis client and RedisStore), share
 * their route limits through one real redis-server: a route's prefix names its controller and handler,
 * so it is the same in both apps. Concurrency leases taken in Redis end with each response.
 */
import 'reflect-metadata'
import { Controller, Get, Module, type Type } from '@nestjs/common'
import { concurrency, fixedWindow } from '@sluice/core'
import { RateLimit, SluiceModule } from '@sluice/nestjs'
import { RedisStore } from '@sluice/redis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { platforms, type Running, start, statuses } from './support.ts'

let server: RedisServer
const running: Running[] = []

beforeAll(async () => {
  server = await startRedis()
})

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()))
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

@Controller('shop')
class ShopController {
  @Get()
  list() {
    return { ok: true }
  }

  @Get('checkout')
  @RateLimit({ rules: [concurrency({ limit: 1 })] })
  checkout() {
    return { ok: true }
  }
}

async function appOn(platform: (typeof platforms)[number]): Promise<Running> {
  const store = new RedisStore({ client: await clientOf('ioredis', server) })
  @Module({
    imports: [
      SluiceModule.forRoot({ rules: [fixedWindow({ limit: 4, windowMs: 60_000 })], store, prefix: 'nest' }),
    ],
    controllers: [ShopController],
  })
  class AppModule {}
  const r = await start(platform, AppModule as Type<unknown>)
  running.push(r)
  return r
}

describe('@sluice/nestjs on a real redis-server', () => {
  it('counts a route once across an Express app and a Fastify app sharing one Redis', async () => {
    await server.cli('FLUSHALL')
    const [express, fastify] = await Promise.all([appOn(platforms[0]), appOn(platforms[1])])
    const seen = []
    for (let i = 0; i < 3; i++) {
      seen.push(...(await statuses(express, '/shop', 1)), ...(await statuses(fastify, '/shop', 1)))
    }
    expect(seen).toEqual([200, 200, 200, 200, 429, 429])
    const denied = await fastify.get('/shop')
    expect(denied.headers.get('ratelimit-policy')).toBe('"4-per-60s";q=4;w=60')
    const keys = (await server.cli('KEYS', '*')).split('\n').filter(Boolean)
    expect(keys.every((key) => key.includes('nest:ShopController.list'))).toBe(true)
  })

  it('ends each concurrency lease in Redis with its response, on both platforms', async () => {
    await server.cli('FLUSHALL')
    const [express, fastify] = await Promise.all([appOn(platforms[0]), appOn(platforms[1])])
    for (let i = 0; i < 3; i++) {
      expect(await statuses(express, '/shop/checkout', 1)).toEqual([200])
      expect(await statuses(fastify, '/shop/checkout', 1)).toEqual([200])
    }
  })
})
