/**
 * The composed script for long sequences of rules: a call may carry any number of rules, and the
 * generated foot must stay within Lua's limits (200 locals per function) and decide exactly as the memory
 * store does, admitted and denied, with ioredis and node-redis.
 */
import { fixedWindow, MemoryStore, type Rule, slidingLog, tokenBucket } from '@sluice/core'
import { RedisStore } from '@sluice/redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, clientOf, closeClients } from './harness/clients.ts'
import { type RedisServer, startRedis, stopAll } from './harness/redis.ts'

let server: RedisServer

beforeAll(async () => {
  server = await startRedis()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

/** 120 rules of three kinds, named apart (each its own state identity); the tightest admits 2 calls. */
const RULES = Array.from({ length: 120 }, (_, i) => {
  const name = `r${i}`
  if (i % 3 === 0) return fixedWindow({ limit: i + 2, windowMs: 60_000, name })
  if (i % 3 === 1) return slidingLog({ limit: i + 2, windowMs: 60_000, name })
  return tokenBucket({ capacity: i + 2, refillPerSecond: 1, name })
}) as Rule[]

let run = 0

describe.each(CLIENT_KINDS)('RedisStore with 120 rules in one call (%s)', (kind) => {
  it('admits and denies all or nothing, exactly as the memory store', async () => {
    const client = await clientOf(kind, server)
    const now = 1_700_000_000_000 + Math.floor(Math.random() * 1e9)
    const clock = () => now
    const memory = new MemoryStore({ clock, sweepIntervalMs: 0 })
    const redis = new RedisStore({ client, clock, deniedCache: false, timeoutMs: 2000 })
    const prefix = `compose${run++}`
    for (let call = 0; call < 3; call++) {
      const expected = memory.apply(prefix, 'k', RULES, 1, 'consume')
      const actual = await redis.apply(prefix, 'k', RULES, 1, 'consume')
      expect(actual).toEqual(expected)
      expect(actual.every((d) => d.allowed)).toBe(call < 2)
    }
    expect(await redis.apply(prefix, 'k', RULES, 1, 'peek')).toEqual(
      memory.apply(prefix, 'k', RULES, 1, 'peek'),
    )
    memory.close()
  })
})
