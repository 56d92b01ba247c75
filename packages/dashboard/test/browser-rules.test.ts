/**
 * The limit tables' cards in a real headless Chromium: each rule read back in words beside its text, in
 * its own units (a rule named `tokens` counts tokens: "token rules like any rule"), a quota with when its
 * period ends in the rule's own zone; and the form's quota row, which builds the rule's text with core's
 * checks and shows a refusal's code. The dashboard serves a `RedisLimitTable` on a redis-server of the
 * suite's own, as `sluice dashboard` does; no process publishes statistics here (browser.test.ts has
 * them). The page's clock is set (playwright's `page.clock`), so the period ends shown are exact.
 */
import type { IncomingMessage } from 'node:http'
import { type Access, dashboard } from '@sluice/dashboard'
import { RedisLimitTable } from '@sluice/redis'
import { Redis } from 'ioredis'
import type { Browser, BrowserContext, Page } from 'playwright-core'
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
/** The process warnings about table entries sluice cannot read. */
const unreadable: string[] = []
const onWarning = (w: Error & { code?: string }) => {
  if (w.code === 'SLUICE_TABLE_ENTRY') unreadable.push(w.message)
}

/** Saturday 28 November 2026, noon UTC: the page's clock unless a test sets another. */
const NOON = new Date('2026-11-28T12:00:00Z')

async function open(role: Access, now: Date = NOON): Promise<Watched> {
  const context = await browser.newContext({
    extraHTTPHeaders: { [ROLE]: role },
    viewport: { width: 1440, height: 900 },
  })
  contexts.push(context)
  // Date.now() and new Date() answer `now` on the page; its timers (the poll) run as usual.
  const watched = await watchedPage(context, (page: Page) => page.clock.setFixedTime(now))
  await watched.page.goto(`${base}/`)
  return watched
}

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis({ host: redis.host, port: redis.port })
  process.on('warning', onWarning)
  // Written around sluice, before the table is opened: a quota of a zone Intl does not know. The table
  // leaves it out (with a SLUICE_TABLE_ENTRY warning); the page shows the rest.
  await client.hset(
    `sluice:table:{${TABLE}}`,
    'MARS',
    JSON.stringify([{ kind: 'quota', limit: 5, per: 'day', timeZone: 'Mars/Olympus' }]),
  )
  await client.set(`sluice:table:{${TABLE}}:version`, '1')
  table = await RedisLimitTable.open({ client, name: TABLE })
  const access = (req: IncomingMessage): Access => {
    const role = req.headers[ROLE]
    return role === 'write' || role === 'read' ? role : 'none'
  }
  base = await serve(dashboard({ access, tables: { [TABLE]: table } }))
  browser = await launchChromium()
})

afterAll(async () => {
  process.off('warning', onWarning)
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
    expect(await card.locator('tr[data-entry="MARS"]').count()).toBe(0)
    expect(unreadable[0]).toBe(
      'Limit table "plans" holds 1 entry sluice cannot read ("MARS"); each keeps the last good value this process had, if any.',
    )
    expect(errors).toEqual([])
  })

  it("shows a quota with when its period ends, on the rule's own clock, and again once it has ended", async () => {
    await table.set('pro', [{ kind: 'quota', limit: 10_000, per: 'month', timeZone: 'Europe/Berlin' }])
    await table.set('team', [
      { kind: 'quota', limit: 500, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7 },
    ])
    await table.set('daily', [
      { kind: 'quota', limit: 1000, per: 'day' },
      { kind: 'quota', limit: 1_000_000, per: 'month', timeZone: 'Asia/Tokyo', name: 'tokens' },
    ])
    // 23:59:59 UTC on Saturday: a second before the UTC day ends.
    const { page, errors } = await open('read', new Date('2026-11-28T23:59:59Z'))
    const card = page.locator('.card.table[data-table="plans"]')
    const words = (entry: string) => card.locator(`tr[data-entry="${entry}"] .figure`).allTextContents()
    await expect.poll(() => words('pro')).toEqual(['10,000 / month · resets Dec 1, 00:00 Europe/Berlin'])
    expect(await card.locator('tr[data-entry="pro"] .rules').textContent()).toBe(
      'quota:10000/month@@Europe/Berlin',
    )
    expect(await words('team')).toEqual(['500 / week from Sunday · resets Nov 29, 00:00 America/New_York'])
    expect(await card.locator('tr[data-entry="team"] .rules').textContent()).toBe(
      'quota:500/week-sun@@America/New_York',
    )
    expect(await words('daily')).toEqual([
      '1,000 / day · resets Nov 29, 00:00 UTC',
      '1,000,000 tokens / month · resets Dec 1, 00:00 Asia/Tokyo',
    ])
    // The UTC day ends: the card is drawn again with the next period's end, the table unchanged.
    await page.clock.setFixedTime(new Date('2026-11-29T00:00:00Z'))
    await expect
      .poll(() => words('daily'))
      .toEqual([
        '1,000 / day · resets Nov 30, 00:00 UTC',
        '1,000,000 tokens / month · resets Dec 1, 00:00 Asia/Tokyo',
      ])
    expect(await words('pro')).toEqual(['10,000 / month · resets Dec 1, 00:00 Europe/Berlin'])
    expect(errors).toEqual([])
  })

  it("the form's quota row writes a quota's text with core's checks, and the entry saves", async () => {
    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="plans"]')
    const rules = card.locator('input[name="rules"]')
    const message = card.locator('.message')
    const week = card.locator('select[name="quota-week"]')
    await card.locator('input[name="entry"]').fill('business')
    await card.locator('input[name="quota-limit"]').fill('10000')
    expect(await card.locator('select[name="quota-per"]').inputValue()).toBe('month')
    expect(await week.isDisabled()).toBe(true)
    await card.locator('input[name="quota-zone"]').fill('Europe/Berlin')
    await card.locator('button', { hasText: 'Add quota' }).click()
    expect(await rules.inputValue()).toBe('quota:10000/month@@Europe/Berlin')
    expect(await message.textContent()).toBe(
      'Added quota:10000/month@@Europe/Berlin: save the entry to write it.',
    )
    // A week may start on another day; the zone is written as Intl names it.
    await card.locator('select[name="quota-per"]').selectOption('week')
    expect(await week.isDisabled()).toBe(false)
    await week.selectOption('7')
    await card.locator('input[name="quota-limit"]').fill('500')
    await card.locator('input[name="quota-zone"]').fill('america/new_york')
    // Enter in the row adds the quota; the entry is not saved yet.
    await card.locator('input[name="quota-limit"]').press('Enter')
    expect(await rules.inputValue()).toBe(
      'quota:10000/month@@Europe/Berlin quota:500/week-sun@@America/New_York',
    )
    expect(table.entries().has('business')).toBe(false)
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => message.textContent())
      .toMatch(
        /^Saved business = quota:10000\/month@@Europe\/Berlin quota:500\/week-sun@@America\/New_York \(version \d+\)\.$/,
      )
    expect(JSON.parse(JSON.stringify(table.entries().get('business')))).toEqual([
      { kind: 'quota', limit: 10_000, per: 'month', timeZone: 'Europe/Berlin', weekStartsOn: 1 },
      { kind: 'quota', limit: 500, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7 },
    ])
    await expect
      .poll(() => card.locator('tr[data-entry="business"] .figure').allTextContents())
      .toEqual([
        '10,000 / month · resets Dec 1, 00:00 Europe/Berlin',
        '500 / week from Sunday · resets Nov 29, 00:00 America/New_York',
      ])
    expect(errors).toEqual([])
  })

  it('refuses a quota of an unknown zone, a huge limit or a bad week start with its code, and writes nothing', async () => {
    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="plans"]')
    const rules = card.locator('input[name="rules"]')
    const message = card.locator('.message.error')
    const before = table.version
    await card.locator('input[name="entry"]').fill('hostile')
    // The quota row: core's factory refuses, and the rules field is left as it was.
    await rules.fill('slidingLog:5/1s')
    await card.locator('input[name="quota-limit"]').fill('1000')
    await card.locator('input[name="quota-zone"]').fill('Mars/Olympus')
    await card.locator('button', { hasText: 'Add quota' }).click()
    await expect
      .poll(() => message.textContent())
      .toBe(
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.timeZone: "Mars/Olympus"; expected an IANA time zone name Intl knows, such as Europe/Berlin or UTC.',
      )
    await card.locator('input[name="quota-zone"]').fill('UTC')
    await card.locator('input[name="quota-limit"]').fill('99999999999999999999')
    await card.locator('button', { hasText: 'Add quota' }).click()
    await expect
      .poll(() => message.textContent())
      .toBe(
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.limit: 100000000000000000000; expected an integer >= 1, or -1 for not limited.',
      )
    expect(await rules.inputValue()).toBe('slidingLog:5/1s')
    // Typed as text or JSON: the grammar's and the factory's codes, as the API would answer them.
    const refused: [string, string][] = [
      [
        'quota:1000/day@@Mars/Olympus',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.timeZone: "Mars/Olympus"; expected an IANA time zone name Intl knows, such as Europe/Berlin or UTC.',
      ],
      [
        'quota:99999999999999999999/day',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.limit: 100000000000000000000; expected an integer >= 1, or -1 for not limited.',
      ],
      [
        '{"kind":"quota","limit":500,"per":"week","weekStartsOn":9}',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.weekStartsOn: 9; expected an integer from 1 to 7.',
      ],
      [
        'quota:500/week-xyz',
        'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "quota:500/week-xyz": expected quota:LIMIT/PER[-DAY][@@ZONE], e.g. quota:1000/day, quota:10000/month@@Europe/Berlin, quota:500/week-sun.',
      ],
    ]
    for (const [text, error] of refused) {
      await rules.fill(text)
      await card.locator('button', { hasText: 'Save entry' }).click()
      await expect.poll(() => message.textContent()).toBe(error)
    }
    expect(table.version).toBe(before)
    expect(table.entries().has('hostile')).toBe(false)
    expect(errors).toEqual([])
  })
})
