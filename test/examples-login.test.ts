/**
 * examples/login as its users run it (`node examples/login/server.mjs`), with its windows shortened through
 * its environment: 5 failed attempts per username + IP, then a block that doubles; successful logins not
 * counted. Then two server processes on one Redis sharing one block.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startServer, stopExamples } from './examples-harness.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

const SERVER = 'examples/login/server.mjs'

/** A 1.5 s window, blocks of 2 s doubling up to 8 s, forgotten after 60 s. */
const FAST = {
  LOGIN_WINDOW_MS: '1500',
  LOGIN_BLOCK_MS: '2000',
  LOGIN_MAX_BLOCK_MS: '8000',
  LOGIN_FORGET_MS: '60000',
}

let redis: RedisServer

beforeAll(async () => {
  redis = await startRedis()
})

afterAll(async () => {
  await stopExamples()
  await stopAll()
})

const login = (url: string, username: string, password: string) =>
  request(`${url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('examples/login', () => {
  it('allows 5 failed attempts per username + IP, then blocks, twice as long the next time; successes do not count', async () => {
    const server = await startServer(SERVER, FAST)
    const { url } = server
    // Successful logins are refunded: any number of them leaves all 5 attempts.
    for (let i = 0; i < 4; i++)
      expect((await login(url, 'alice', 'correct horse battery staple')).status).toBe(200)
    const failures = []
    for (let i = 0; i < 5; i++) failures.push(await login(url, 'alice', 'guess'))
    expect(failures.map((r) => r.status)).toEqual([401, 401, 401, 401, 401])
    expect(failures.map((r) => r.body.remaining)).toEqual([4, 3, 2, 1, 0])
    // The 6th failure begins a block of 2 s (the window would free a place sooner).
    const sixth = await login(url, 'alice', 'guess')
    expect(sixth.status).toBe(429)
    expect(sixth.headers.get('retry-after')).toBe('2')
    expect(sixth.body.detail).toBe('Rate limit 5-per-1500ms exceeded; retry in 2 s.')
    // While blocked, even the right password is refused.
    const blocked = await login(url, 'alice', 'correct horse battery staple')
    expect(blocked.status).toBe(429)
    expect(blocked.body.detail).toBe('Blocked after exceeding rate limit 5-per-1500ms; retry in 2 s.')
    // Another username from the same address is counted apart.
    expect((await login(url, 'bob', 'guess')).status).toBe(401)
    expect((await login(url, 'BOB', 'hunter2')).status).toBe(200)
    // No username: 400, never counted under an empty key.
    expect((await request(`${url}/login`, { method: 'POST' })).status).toBe(400)

    // After the block the window is clear: 5 more attempts, then a second block, twice as long (4 s).
    await sleep(2100)
    const more = []
    for (let i = 0; i < 5; i++) more.push((await login(url, 'alice', 'guess')).status)
    expect(more).toEqual([401, 401, 401, 401, 401])
    const again = await login(url, 'alice', 'guess')
    expect(again.status).toBe(429)
    expect(again.headers.get('retry-after')).toBe('4')
    await server.stop()
  })

  it('shares counts and blocks between two processes on one Redis (REDIS_URL)', async () => {
    // A window long enough that a loaded machine cannot let the first attempt expire mid-test.
    const env = {
      ...FAST,
      LOGIN_WINDOW_MS: '60000',
      LOGIN_BLOCK_MS: '3000',
      REDIS_URL: `redis://${redis.host}:${redis.port}`,
    }
    const one = await startServer(SERVER, env)
    const two = await startServer(SERVER, env)
    expect(one.output()).toContain('(Redis)')
    // Attempts spread over both processes count together.
    const statuses = []
    for (let i = 0; i < 6; i++)
      statuses.push((await login(i % 2 ? two.url : one.url, 'carol', 'guess')).status)
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
    // The block begun on one process is the other's at its next call.
    const other = await login(two.url, 'carol', 'guess')
    expect(other.status).toBe(429)
    expect(other.body.detail).toBe('Blocked after exceeding rate limit 5-per-60s; retry in 3 s.')
    await one.stop()
    await two.stop()
  })
})
