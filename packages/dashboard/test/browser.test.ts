/**
 * The dashboard in a real headless Chromium (Debian's, at /usr/bin/chromium, driven by playwright-core),
 * against two application processes limited on one redis-server that publish their live statistics
 * there, under a bounded load on loopback. The dashboard reads Redis, as `sluice dashboard` does, and
 * it and both processes open one `RedisLimitTable` there: an edit made on the page reaches the processes
 * through Redis alone.
 *
 * - the page loads with no console error and no CSP violation, and its charts move with the load;
 * - a denied key named like markup is shown as text, and no dialog ever opens;
 * - an instance whose published value is past the bounds is named, with why, beside the healthy ones;
 * - an entry edited in the form reaches the table in Redis, both processes publish its new version, and
 *   their decisions change; the audit trail shows who changed what; a refused edit shows the API's code;
 *   a reader sees no form;
 * - the README's screenshots (docs/dashboard/*.png) are taken here (SLUICE_UPDATE_SCREENSHOTS=1 writes them).
 *
 * Without Chromium this suite fails (it never skips): `bash dev.sh setup` installs it.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseRuleSpecs, type RuleSpec } from '@sluice/core'
import { type Access, dashboard } from '@sluice/dashboard'
import { RedisLimitTable } from '@sluice/redis'
import { Redis } from 'ioredis'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { launchChromium, type Watched, watchedPage } from './chromium.ts'
import { closeServers, send, serve } from './http.ts'

const WORKER = fileURLToPath(new URL('./workers/load.mjs', import.meta.url))
/**
 * The README's screenshots are redrawn with SLUICE_UPDATE_SCREENSHOTS=1; otherwise they are taken all the
 * same, into a temp dir, so a test run leaves the working tree as it was.
 */
const SCREENSHOTS =
  process.env.SLUICE_UPDATE_SCREENSHOTS === '1'
    ? fileURLToPath(new URL('../../../docs/dashboard/', import.meta.url))
    : join(tmpdir(), `sluice-dashboard-screenshots-${process.pid}`)
const XSS_KEY = '<img src=x onerror=alert(1)>'
const ROLE = 'x-test-role'

const TABLE = 'channels'

interface Worker {
  child: ChildProcess
  url: string
  /** The version of the table the process held once it had opened it. */
  version: number
}

async function startWorker(instance: string, redisPort: number) {
  const child = fork(WORKER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting: { kind: string; resolve: (m: Record<string, unknown>) => void }[] = []
  child.on('message', (message: Record<string, unknown>) => {
    const i = waiting.findIndex((w) => w.kind in message)
    if (i >= 0) waiting.splice(i, 1)[0]!.resolve(message)
  })
  const next = (kind: string) =>
    new Promise<Record<string, unknown>>((resolve) => waiting.push({ kind, resolve }))
  const ready = Promise.race([next('ready'), next('error')])
  child.send({ setup: { redisPort, instance, table: TABLE } })
  const answer = await ready
  if (answer.error !== undefined) throw new Error(`worker ${instance} failed: ${answer.error}`)
  return { child, url: `http://127.0.0.1:${answer.port}`, version: answer.version as number } satisfies Worker
}

let redis: RedisServer
let client: Redis
let table: RedisLimitTable
let workers: Worker[] = []
let browser: Browser
let base: string
const contexts: BrowserContext[] = []

async function open(role: Access): Promise<Watched> {
  const context = await browser.newContext({
    extraHTTPHeaders: { [ROLE]: role },
    viewport: { width: 1440, height: 900 },
  })
  contexts.push(context)
  const { page, errors, dialogs } = await watchedPage(context)
  // The mount path without its slash: the page must land on `/sluice/`.
  await page.goto(`${base}/sluice`)
  expect(new URL(page.url()).pathname).toBe('/sluice/')
  return { page, errors, dialogs }
}

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis({ host: redis.host, port: redis.port })
  const initial: Record<string, RuleSpec[] | null> = {
    '*': [{ kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ALIPAY: [{ kind: 'slidingLog', limit: 1000, windowMs: 1000 }],
    REFUND: null,
  }
  // The table in Redis, written before the processes start: versions 1 to 3.
  table = await RedisLimitTable.open({ client, name: TABLE })
  for (const [entry, rules] of Object.entries(initial)) await table.set(entry, rules, { actor: 'setup' })
  workers = await Promise.all([startWorker('worker-1', redis.port), startWorker('worker-2', redis.port)])
  expect(workers.map((w) => w.version)).toEqual([3, 3])
  for (const w of workers) w.child.send({ go: true, maxMs: 60_000 })

  const access = (req: IncomingMessage): Access => {
    const role = req.headers[ROLE]
    return role === 'write' || role === 'read' ? role : 'none'
  }
  base = await serve(dashboard({ access, client, tables: { [TABLE]: table }, basePath: '/sluice' }))
  browser = await launchChromium()
}, 60_000)

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {})
  await browser?.close()
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve) => {
          const kill = setTimeout(() => w.child.kill('SIGKILL'), 3000)
          w.child.once('exit', () => {
            clearTimeout(kill)
            resolve()
          })
          w.child.send({ exit: true })
        }),
    ),
  )
  await table?.close()
  client?.disconnect()
  await closeServers()
  await stopAll()
})

/** The `d` of a limiter's chart areas: changes when the series it draws changes. */
function chartOf(page: Page, limiter: string): Promise<string> {
  return page
    .locator(`.card.limiter[data-limiter="${limiter}"] svg.chart`)
    .evaluate((svg) => [...svg.querySelectorAll('path')].map((p) => p.getAttribute('d')).join('|'))
}

describe('the dashboard in Chromium', () => {
  it('loads with no console error or CSP violation; every instance is listed and the charts move', async () => {
    const { page, errors, dialogs } = await open('write')
    await page.locator('.card.limiter[data-limiter="api"] path.area.denied').waitFor({ timeout: 15_000 })
    await expect
      .poll(() => page.locator('#instances tbody tr').allTextContents(), { timeout: 10_000 })
      .toEqual([
        expect.stringMatching(/^worker-1.*table version\s*3$/),
        expect.stringMatching(/^worker-2.*table version\s*3$/),
      ])
    const before = await chartOf(page, 'api')
    await expect.poll(() => chartOf(page, 'api'), { timeout: 5000 }).not.toBe(before)
    for (const limiter of ['api', 'report', 'search', 'login', 'busy']) {
      await expect(page.locator(`.card.limiter[data-limiter="${limiter}"]`).count()).resolves.toBe(1)
    }
    // Queued (the leaky bucket holds requests) and shadow (a shadowed limit) are drawn too.
    await page.locator('.card.limiter[data-limiter="report"] path.area.queued').waitFor({ timeout: 10_000 })
    await page.locator('.card.limiter[data-limiter="search"] path.area.shadow').waitFor({ timeout: 10_000 })
    // Requests an overload guard shed are drawn as denied, on the card of the limit they came through
    // (issue 31): `busy` denies nothing by its rules.
    await page.locator('.card.limiter[data-limiter="busy"] path.area.denied').waitFor({ timeout: 10_000 })
    // The busiest denier comes first.
    const first = await page.locator('.card.limiter').first().getAttribute('data-limiter')
    expect(first).toBe('api')
    expect(errors).toEqual([])
    expect(dialogs).toEqual([])
  })

  it('shows a denied key named like markup as text, and no dialog fires', async () => {
    const { page, errors, dialogs } = await open('read')
    const key = page.locator('.card.limiter[data-limiter="api"] .keys .key', { hasText: XSS_KEY })
    await key.first().waitFor({ timeout: 15_000 })
    expect(await key.first().textContent()).toBe(XSS_KEY)
    expect(await page.locator('img[src="x"]').count()).toBe(0)
    expect(await page.locator('main img').count()).toBe(0)
    await sleep(1500)
    expect(dialogs).toEqual([])
    expect(errors).toEqual([])
  })

  it("an entry edited in the form reaches the table in Redis and changes both processes' decisions", async () => {
    const pay = async (w: Worker) =>
      (await fetch(`${w.url}/pay`, { method: 'POST', headers: { 'x-channel': 'ALIPAY' } })).status
    // Before: ALIPAY allows 1000 a second; six payments through both processes all pass.
    const before = []
    for (let i = 0; i < 3; i++) for (const w of workers) before.push(await pay(w))
    expect(before).toEqual([200, 200, 200, 200, 200, 200])

    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="channels"]')
    // The trail the setup wrote, newest first.
    await expect
      .poll(() => card.locator('.trail li').allTextContents())
      .toEqual([
        expect.stringMatching(/v3REFUND\(none\) → -1setup$/),
        expect.stringMatching(/v2ALIPAY\(none\) → slidingLog:1000\/1ssetup$/),
        expect.stringMatching(/v1\*\(none\) → slidingLog:100\/1ssetup$/),
      ])
    await card.locator('tr[data-entry="ALIPAY"] button', { hasText: 'edit' }).click()
    expect(await card.locator('input[name="entry"]').inputValue()).toBe('ALIPAY')
    expect(await card.locator('input[name="rules"]').inputValue()).toBe('slidingLog:1000/1s')

    // A refused edit shows the API's coded error, and nothing is written.
    await card.locator('input[name="rules"]').fill('fixedWindow:0/1m')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => card.locator('.message.error').textContent())
      .toMatch(/^ERR_SLUICE_INVALID_OPTION: Invalid option fixedWindow.limit: 0/)
    // Text outside the grammar is refused with the grammar's code.
    await card.locator('input[name="rules"]').fill('slidingLog:3')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => card.locator('.message.error').textContent())
      .toBe(
        'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "slidingLog:3": expected slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s.',
      )
    expect(table.version).toBe(3)

    // Named rules in the grammar: two sliding logs of one window, told apart by their names.
    await card.locator('input[name="rules"]').fill('slidingLog:3/1m slidingLog:50/1m@burst')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => card.locator('.message.ok').textContent())
      .toBe('Saved ALIPAY = slidingLog:3/1m slidingLog:50/1m@burst (version 4).')
    const edited = [
      { kind: 'slidingLog', limit: 3, windowMs: 60_000 },
      { kind: 'slidingLog', limit: 50, windowMs: 60_000, name: 'burst' },
    ]
    expect(JSON.parse(JSON.stringify(table.entries().get('ALIPAY')))).toEqual(edited)
    await expect
      .poll(() => card.locator('tr[data-entry="ALIPAY"] .rules').textContent())
      .toBe('slidingLog:3/1m slidingLog:50/1m@burst')
    // The audit trail, from Redis: who changed what, from what to what.
    await expect
      .poll(() => card.locator('.trail li').first().textContent())
      .toMatch(
        /v4ALIPAYslidingLog:1000\/1s → slidingLog:3\/1m slidingLog:50\/1m@burstdashboard 127\.0\.0\.1$/,
      )
    const audit = (await table.audit(1))[0]!
    expect(audit).toMatchObject({ version: 4, change: 'set', entry: 'ALIPAY', actor: 'dashboard 127.0.0.1' })
    const api = await send(`${base}/sluice/api/tables/channels`, { headers: { [ROLE]: 'read' } })
    expect(api.json.entries).toContainEqual({ entry: 'ALIPAY', rules: edited })

    // Both processes follow the table in Redis: each publishes version 4, as the API and the page show.
    await expect
      .poll(
        async () => {
          const stats = await send(`${base}/sluice/api/stats`, { headers: { [ROLE]: 'read' } })
          return (stats.json.instances as { instance: string; meta: { tableVersion: number } }[])
            .map((i) => [i.instance, i.meta.tableVersion])
            .sort()
        },
        { timeout: 5000 },
      )
      .toEqual([
        ['worker-1', 4],
        ['worker-2', 4],
      ])
    await expect
      .poll(() => page.locator('#instances tbody tr').allTextContents(), { timeout: 5000 })
      .toEqual([expect.stringMatching(/table version\s*4$/), expect.stringMatching(/table version\s*4$/)])
    // And decide by the new entry, sharing its 3 a minute through Redis.
    const after = []
    for (let i = 0; i < 3; i++) for (const w of workers) after.push(await pay(w))
    expect(after).toEqual([200, 200, 200, 429, 429, 429])
    expect(errors.filter((e) => !e.includes('400 (Bad Request)'))).toEqual([])
  })

  it('shows hostile names as text one can read: a bidi override visible, a 100 KB name cut (issue 25 item 14)', async () => {
    // A publisher that writes to Redis directly (publishStats bounds its own name): a bidi override that
    // would show "exe.txt" reversed, then 100,000 characters. Past a publisher's 200 characters the
    // instance is skipped, and named cut at 200 (issue 45 item 1).
    const shown = 'evil\\u{202E}txt.exe'
    const name = `evil\u202Etxt.exe${'x'.repeat(100_000)}`
    const snapshot = { at: Date.now(), seconds: 60, limiters: {}, instance: name, meta: {} }
    await client.set(`sluice:stats:instance:${name}`, JSON.stringify(snapshot), 'EX', 30)
    await client.zadd('sluice:stats:instances', Date.now(), name)
    try {
      const { page, errors } = await open('read')
      const row = page.locator('#instances tbody tr', { hasText: shown })
      await row.waitFor({ timeout: 10_000 })
      expect(await row.locator('td').first().textContent()).toBe(`${shown}${'x'.repeat(187)}…`)
      expect(await row.locator('td').nth(1).textContent()).toBe(
        'skipped: its name is longer than 200 characters',
      )
      // The row stays within the page's width (a 100 KB name made a 48,000 px row).
      expect(await row.evaluate((tr) => tr.getBoundingClientRect().width)).toBeLessThanOrEqual(1440)
      expect(errors).toEqual([])
    } finally {
      await client.del(`sluice:stats:instance:${name}`)
      await client.zrem('sluice:stats:instances', name)
    }
  })

  it('shows the healthy instances beside one whose value would crash it, named with why (issue 45 item 1)', async () => {
    // A value naming 60,000 limiters (709 KB) ran `api/stats` out of heap.
    const limiters: Record<string, object> = {}
    for (let i = 0; i < 60_000; i++) limiters[`l${i}`] = {}
    const snapshot = { at: Date.now(), seconds: 60, limiters, instance: 'wide', meta: {} }
    await client.set('sluice:stats:instance:wide', JSON.stringify(snapshot), 'EX', 30)
    await client.zadd('sluice:stats:instances', Date.now(), 'wide')
    try {
      const { page, errors } = await open('read')
      await expect
        .poll(() => page.locator('#instances tbody tr').allTextContents(), { timeout: 10_000 })
        .toEqual([
          'wideskipped: it names 60000 limiters, past the bound of 1000',
          expect.stringMatching(/^worker-1/),
          expect.stringMatching(/^worker-2/),
        ])
      expect(await page.locator('#instances tbody tr.skipped').count()).toBe(1)
      await page.locator('.card.limiter[data-limiter="api"]').waitFor({ timeout: 10_000 })
      expect(await page.locator('.card.limiter').count()).toBeLessThan(10)
      expect(errors).toEqual([])
    } finally {
      await client.del('sluice:stats:instance:wide')
      await client.zrem('sluice:stats:instances', 'wide')
    }
  })

  it("edits and deletes entries named '.' and '..', which a URL path cannot carry (issue 25 item 14, issue 45 item 4)", async () => {
    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="channels"]')
    try {
      for (const entry of ['.', '..']) {
        await card.locator('input[name="entry"]').fill(entry)
        await card.locator('input[name="rules"]').fill('slidingLog:7/1s')
        await card.locator('button', { hasText: 'Save entry' }).click()
        await expect
          .poll(() => card.locator('.message').textContent())
          .toMatch(
            new RegExp(`^Saved ${entry.replaceAll('.', '\\.')} = slidingLog:7/1s \\(version \\d+\\)\\.$`),
          )
        expect(JSON.parse(JSON.stringify(table.entries().get(entry)))).toEqual([
          { kind: 'slidingLog', limit: 7, windowMs: 1000 },
        ])
        await expect
          .poll(() => card.locator(`tr[data-entry="${entry}"] .rules`).textContent())
          .toBe('slidingLog:7/1s')
      }
      // And from their rows (issue 45 item 4): edit fills the form with the entry, delete removes it.
      for (const entry of ['.', '..']) {
        await card.locator('input[name="entry"]').fill('')
        await card.locator(`tr[data-entry="${entry}"] button`, { hasText: 'edit' }).click()
        expect(await card.locator('input[name="entry"]').inputValue()).toBe(entry)
        await card.locator('input[name="rules"]').fill('slidingLog:9/1s')
        await card.locator('button', { hasText: 'Save entry' }).click()
        await expect
          .poll(() => card.locator(`tr[data-entry="${entry}"] .rules`).textContent())
          .toBe('slidingLog:9/1s')
        await card.locator('button', { hasText: 'Delete entry' }).click()
        await expect
          .poll(() => card.locator('.message').textContent())
          .toMatch(new RegExp(`^Deleted ${entry.replaceAll('.', '\\.')} \\(version \\d+\\)\\.$`))
        await expect.poll(() => card.locator(`tr[data-entry="${entry}"]`).count()).toBe(0)
        expect(table.entries().has(entry)).toBe(false)
      }
      expect(errors).toEqual([])
    } finally {
      for (const entry of ['.', '..']) await table.delete(entry, { actor: 'test' })
    }
  })

  it("reads and writes every rule kind by core's grammar, served to the page (warmUp's comma included)", async () => {
    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="channels"]')
    const text = 'warmUp:100/s,30sx4~1s concurrency:10~30s slidingWindow:600/1m/6@minute tokenBucket:50+10/s'
    try {
      await card.locator('input[name="entry"]').fill('KINDS')
      await card.locator('input[name="rules"]').fill(text)
      await card.locator('button', { hasText: 'Save entry' }).click()
      await expect
        .poll(() => card.locator('.message').textContent())
        .toMatch(/^Saved KINDS = (.+) \(version \d+\)\.$/)
      expect(await card.locator('.message').textContent()).toContain(` = ${text} (`)
      expect(JSON.parse(JSON.stringify(table.entries().get('KINDS')))).toEqual(
        JSON.parse(JSON.stringify(parseRuleSpecs(text.split(' ')))),
      )
      await expect.poll(() => card.locator('tr[data-entry="KINDS"] .rules').textContent()).toBe(text)
      // The edit button gives the text back as the grammar writes it.
      await card.locator('tr[data-entry="KINDS"] button', { hasText: 'edit' }).click()
      expect(await card.locator('input[name="rules"]').inputValue()).toBe(text)
      expect(errors).toEqual([])
    } finally {
      await table.delete('KINDS', { actor: 'test' })
    }
  })

  it('shows a reader the tables with no form', async () => {
    const { page, errors } = await open('read')
    const card = page.locator('.card.table[data-table="channels"]')
    await card.locator('tr[data-entry="ALIPAY"]').waitFor()
    expect(await page.locator('form').count()).toBe(0)
    expect(await card.locator('button').count()).toBe(0)
    expect(await card.locator('.readonly').textContent()).toContain('Read-only')
    expect(await page.locator('#access-badge').textContent()).toBe('read only')
    expect(errors).toEqual([])
  })

  it('takes the screenshots in the README', async () => {
    // A quota among the channels' entries, read in words with when its month ends in its zone.
    await table.set(
      'SETTLEMENT',
      [{ kind: 'quota', limit: 10_000, per: 'month', timeZone: 'Asia/Shanghai' }],
      {
        actor: 'setup',
      },
    )
    const { page, errors } = await open('write')
    await page.locator('#range button', { hasText: '1 min' }).click()
    // Enough seconds of load for the charts to show its shape.
    await page.locator('.card.limiter[data-limiter="api"] path.area.denied').waitFor({ timeout: 15_000 })
    await sleep(8000)
    mkdirSync(SCREENSHOTS, { recursive: true })
    await page.setViewportSize({ width: 1440, height: 1280 })
    await sleep(1100)
    await page.screenshot({ path: join(SCREENSHOTS, 'limiters.png') })
    const card = page.locator('.card.table[data-table="channels"]')
    await card.locator('input[name="entry"]').fill('WECHAT')
    await card.locator('input[name="rules"]').fill('tokenBucket:0+5/s')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await card.locator('.message.error').waitFor()
    await card.scrollIntoViewIfNeeded()
    await page
      .locator('main > section')
      .nth(2)
      .screenshot({ path: join(SCREENSHOTS, 'instances.png') })
    await card.screenshot({ path: join(SCREENSHOTS, 'tables.png') })
    expect(errors.filter((e) => !e.includes('400 (Bad Request)'))).toEqual([])
  })
})
