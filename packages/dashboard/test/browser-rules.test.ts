/**
 * The limit tables' cards in a real headless Chromium: each rule read back in words beside its text, in
 * its own units (a rule named `tokens` counts tokens: "token rules like any rule"). The dashboard serves a
 * `RedisLimitTable` on a redis-server of the suite's own, as `sluice dashboard` does; no process publishes
 * statistics here (browser.test.ts has them).
 */
import type { IncomingMessage } from 'node:http'
import { type Access, dashboard } from '@sluice/dashboard'
import { RedisLimitTable } from '@sluice/redis'
import { Redis } from 'ioredis'
import type { Browser, BrowserContext } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { launchChromium, type Watched, watchedPage } from './chromium.ts'
import { closeServers, serve } from './http.ts'

const ROLE = 'x-test-role'
const TABLE = 'plans'

let redis: RedisServer
let client: Redis
let table: RedisLimitTable
let browser: Browser
let base: string
const contexts: BrowserContext[] = []

async function open(role: Access): Promise<Watched> {
  const context = await browser.newContext({
    extraHTTPHeaders: { [ROLE]: role },
    viewport: { width: 1440, height: 900 },
  })
  contexts.push(context)
  const watched = await watchedPage(context)
  await watched.page.goto(`${base}/`)
  return watched
}

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis({ host: redis.host, port: redis.port })
  table = await RedisLimitTable.open({ client, name: TABLE })
  const access = (req: IncomingMessage): Access => {
    const role = req.headers[ROLE]
    return role === 'write' || role === 'read' ? role : 'none'
  }
  base = await serve(dashboard({ access, tables: { [TABLE]: table } }))
  browser = await launchChromium()
})

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {})
  await browser?.close()
  await table?.close()
  client?.disconnect()
  await closeServers()
  await stopAll()
})

describe('rules in words on the tables’ cards', () => {
  it('shows a token rule in tokens, whatever its kind, and every other rule in its own units', async () => {
    await table.set('*', [
      { kind: 'fixedWindow', limit: 60, windowMs: 60_000, name: 'requests' },
      { kind: 'slidingWindow', limit: 90_000, windowMs: 60_000, buckets: 10, name: 'tokens' },
    ])
    await table.set('batch', [
      { kind: 'tokenBucket', capacity: 1_000_000, refillPerSecond: 5000, name: 'tokens' },
      { kind: 'concurrency', limit: 4, leaseMs: 60_000 },
    ])
    await table.set('stream', [
      { kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 },
      { kind: 'slidingLog', limit: 100, windowMs: 1000 },
    ])
    await table.set('free', null)
    const { page, errors } = await open('read')
    const card = page.locator('.card.table[data-table="plans"]')
    const words = (entry: string) => card.locator(`tr[data-entry="${entry}"] .figure`).allTextContents()
    await expect.poll(() => words('*')).toEqual(['60 requests / 1m', '90,000 tokens / 1m'])
    expect(await card.locator('tr[data-entry="*"] .rules').textContent()).toBe(
      'fixedWindow:60/1m@requests slidingWindow:90000/1m@tokens',
    )
    expect(await words('batch')).toEqual(['1,000,000 tokens, refilled 5000/s', '4 at once'])
    expect(await words('stream')).toEqual(['5 / s, waiting up to 2s', '100 / 1s'])
    expect(await words('free')).toEqual([])
    expect(await card.locator('thead th').allTextContents()).toEqual(['entry', 'rules', 'in words'])
    expect(errors).toEqual([])
  })
})
