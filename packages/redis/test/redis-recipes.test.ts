/**
 * The README's Redis recipes, as written there, started while Redis is down: the server starts at once,
 * serves by `onStoreError` while Redis is away, never crashes, and decides in Redis once it is up, with
 * nothing restarted. (A recipe that awaited `'ready'` blocked start-up for ever; a node-redis client with
 * no `'error'` listener crashed the process when Redis died.)
 */
import { createLimiter, type Decision, slidingLog } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, describe, expect, it } from 'vitest'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

afterAll(stopAll)

const recipes = {
  ioredis(server: RedisServer, log: (error: Error) => void) {
    const client = new Redis({
      port: server.port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    })
    client.on('error', log)
    return { client, close: () => client.disconnect() }
  },
  'node-redis'(server: RedisServer, log: (error: Error) => void) {
    const client = createClient({
      url: `redis://127.0.0.1:${server.port}`,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: (retries) => Math.min(retries * 100, 1000) },
    })
    client.on('error', log)
    client.connect().catch(log)
    return { client, close: () => client.destroy() }
  },
}

describe.each(Object.keys(recipes) as (keyof typeof recipes)[])('the %s recipe', (kind) => {
  it('starts while Redis is down, serves by policy without crashing, then decides in Redis', async () => {
    const server = await startRedis()
    await server.stop()
    const logged: string[] = []
    const { client, close } = recipes[kind](server, (error) => logged.push(error.message))
    try {
      const limiter = createLimiter({
        rules: [slidingLog({ limit: 2, windowMs: 60_000 })],
        store: new RedisStore({ client: client as never, timeoutMs: 200 }),
        onStoreError: 'deny',
        prefix: `recipe-${kind}`,
      })
      // Redis down: answered by the policy, at once, and the process keeps going.
      const whileDown: Decision[] = []
      for (let i = 0; i < 3; i++) {
        whileDown.push(await limiter.consume('k'))
        await sleep(200)
      }
      expect(whileDown.map((d) => d.reason)).toEqual(['store-error', 'store-error', 'store-error'])
      expect(logged.length).toBeGreaterThan(0)
      // Redis up: decided in Redis within a few seconds, exactly.
      await server.start()
      let decided: Decision | undefined
      for (let i = 0; i < 100 && decided?.reason !== 'rules'; i++) {
        await sleep(100)
        decided = await limiter.peek('k')
      }
      expect(decided?.reason).toBe('rules')
      const calls = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
      expect(calls.map((d) => `${d.allowed} ${d.reason}`)).toEqual([
        'true rules',
        'true rules',
        'false rules',
      ])
    } finally {
      close()
    }
  })
})
