/**
 * The dashboard in a real headless Chromium (Debian's, at /usr/bin/chromium, driven by playwright-core),
 * against two application processes limited on one redis-server that publish their live statistics
 * there, under a bounded load on loopback. The dashboard reads Redis, as `sluice dashboard` does.
 *
 * - the page loads with no console error and no CSP violation, and its charts move with the load;
 * - a denied key named like markup is shown as text, and no dialog ever opens;
 * - an entry edited in the form reaches the table and changes both processes' decisions; a refused edit
 *   shows the API's code; a reader sees no form;
 * - the README's screenshots (docs/dashboard/*.png) are taken here (SLUICE_UPDATE_SCREENSHOTS=1 writes them).
 *
 * Without Chromium this suite fails (it never skips): `bash dev.sh setup` installs it.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Access, dashboard, type RuleSpec } from '@sluice/dashboard'
import { Redis } from 'ioredis'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'
import { closeServers, send, serve } from './http.ts'
import { type MemoryTable, openTable } from './memory-table.ts'

const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]
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

interface Worker {
  child: ChildProcess
  url: string
  /** The next message of the given kind. */
  next(kind: string): Promise<Record<string, unknown>>
}

async function startWorker(instance: string, redisPort: number, entries: Record<string, RuleSpec[] | null>) {
  const child = fork(WORKER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting: { kind: string; resolve: (m: Record<string, unknown>) => void }[] = []
  child.on('message', (message: Record<string, unknown>) => {
    const i = waiting.findIndex((w) => w.kind in message)
    if (i >= 0) waiting.splice(i, 1)[0]!.resolve(message)
  })
  const next = (kind: string) =>
    new Promise<Record<string, unknown>>((resolve) => waiting.push({ kind, resolve }))
  const ready = Promise.race([next('ready'), next('error')])
  child.send({ setup: { redisPort, instance, entries } })
  const answer = await ready
  if (answer.error !== undefined) throw new Error(`worker ${instance} failed: ${answer.error}`)
  return { child, url: `http://127.0.0.1:${answer.port}`, next } satisfies Worker
}

let redis: RedisServer
let client: Redis
let table: MemoryTable
let workers: Worker[] = []
let browser: Browser
let base: string
const contexts: BrowserContext[] = []

/** What a page did that it must not: console errors, CSP violations, uncaught errors, dialogs. */
interface Watched {
  page: Page
  errors: string[]
  dialogs: string[]
}

async function open(role: Access): Promise<Watched> {
  const context = await browser.newContext({
    extraHTTPHeaders: { [ROLE]: role },
    viewport: { width: 1440, height: 900 },
  })
  contexts.push(context)
  const page = await context.newPage()
  const errors: string[] = []
  const dialogs: string[] = []
  // Run before the page's own script, outside its CSP (an init script is the browser's, not the page's).
  await page.addInitScript(
    "document.addEventListener('securitypolicyviolation', (e) => " +
      "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))",
  )
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text())
  })
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`))
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  // The mount path without its slash: the page must land on `/sluice/`.
  await page.goto(`${base}/sluice`)
  expect(new URL(page.url()).pathname).toBe('/sluice/')
  return { page, errors, dialogs }
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: the browser tests need Debian's Chromium (apt-get install -y chromium; ` +
        '`bash dev.sh setup` installs it).',
    )
  }
  redis = await startRedis()
  client = new Redis({ host: redis.host, port: redis.port })
  const initial: Record<string, RuleSpec[] | null> = {
    '*': [{ kind: 'slidingLog', limit: 100, windowMs: 1000 }],
    ALIPAY: [{ kind: 'slidingLog', limit: 1000, windowMs: 1000 }],
    REFUND: null,
  }
  table = openTable(initial)
  workers = await Promise.all([
    startWorker('worker-1', redis.port, initial),
    startWorker('worker-2', redis.port, initial),
  ])
  // Each change the dashboard makes reaches both processes (with RedisLimitTable, Redis does this).
  table.onChange((entry) => {
    const rules = table.entries().get(entry)
    for (const w of workers) w.child.send({ table: { entry, rules } })
  })
  for (const w of workers) w.child.send({ go: true, maxMs: 60_000 })

  const access = (req: IncomingMessage): Access => {
    const role = req.headers[ROLE]
    return role === 'write' || role === 'read' ? role : 'none'
  }
  base = await serve(dashboard({ access, client, tables: { channels: table }, basePath: '/sluice' }))
  // launch() starts Chromium on a new, empty profile (--user-data-dir in a temp dir) and removes it after.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS })
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
        expect.stringMatching(/^worker-1.*table version\s*0$/),
        expect.stringMatching(/^worker-2.*table version\s*0$/),
      ])
    const before = await chartOf(page, 'api')
    await expect.poll(() => chartOf(page, 'api'), { timeout: 5000 }).not.toBe(before)
    for (const limiter of ['api', 'report', 'search', 'login']) {
      await expect(page.locator(`.card.limiter[data-limiter="${limiter}"]`).count()).resolves.toBe(1)
    }
    // Queued (the leaky bucket holds requests) and shadow (a shadowed limit) are drawn too.
    await page.locator('.card.limiter[data-limiter="report"] path.area.queued').waitFor({ timeout: 10_000 })
    await page.locator('.card.limiter[data-limiter="search"] path.area.shadow').waitFor({ timeout: 10_000 })
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

  it("an entry edited in the form reaches the table and changes both processes' decisions", async () => {
    const pay = async (w: Worker) =>
      (await fetch(`${w.url}/pay`, { method: 'POST', headers: { 'x-channel': 'ALIPAY' } })).status
    // Before: ALIPAY allows 1000 a second; six payments through both processes all pass.
    const before = []
    for (let i = 0; i < 3; i++) for (const w of workers) before.push(await pay(w))
    expect(before).toEqual([200, 200, 200, 200, 200, 200])

    const { page, errors } = await open('write')
    const card = page.locator('.card.table[data-table="channels"]')
    await card.locator('tr[data-entry="ALIPAY"] button', { hasText: 'edit' }).click()
    expect(await card.locator('input[name="entry"]').inputValue()).toBe('ALIPAY')
    expect(await card.locator('input[name="rules"]').inputValue()).toBe('slidingLog:1000/1s')

    // A refused edit shows the API's coded error, and nothing is written.
    await card.locator('input[name="rules"]').fill('fixedWindow:0/1m')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => card.locator('.message.error').textContent())
      .toMatch(/^ERR_SLUICE_INVALID_OPTION: Invalid option fixedWindow.limit: 0/)
    expect(table.version).toBe(0)

    const applied = workers.map((w) => w.next('applied'))
    await card.locator('input[name="rules"]').fill('slidingLog:3/1m')
    await card.locator('button', { hasText: 'Save entry' }).click()
    await expect
      .poll(() => card.locator('.message.ok').textContent())
      .toMatch(/^Saved ALIPAY = slidingLog:3\/1m/)
    // The handler called the table's set with the parsed spec and who did it; the table reads it back.
    expect(table.calls.at(-1)).toEqual({
      method: 'set',
      entry: 'ALIPAY',
      rules: [{ kind: 'slidingLog', limit: 3, windowMs: 60_000 }],
      actor: 'dashboard 127.0.0.1',
    })
    expect(table.entries().get('ALIPAY')).toEqual([{ kind: 'slidingLog', limit: 3, windowMs: 60_000 }])
    await expect
      .poll(() => card.locator('tr[data-entry="ALIPAY"] .rules').textContent())
      .toBe('slidingLog:3/1m')
    await expect.poll(() => card.locator('.trail li').first().textContent()).toContain('ALIPAY')
    const api = await send(`${base}/sluice/api/tables/channels`, { headers: { [ROLE]: 'read' } })
    expect(api.json.entries).toContainEqual({
      entry: 'ALIPAY',
      rules: [{ kind: 'slidingLog', limit: 3, windowMs: 60_000 }],
    })

    // Both processes now decide by the new entry, sharing its 3 a minute through Redis.
    expect((await Promise.all(applied)).map((m) => m.version)).toEqual([1, 1])
    const after = []
    for (let i = 0; i < 3; i++) for (const w of workers) after.push(await pay(w))
    expect(after).toEqual([200, 200, 200, 429, 429, 429])
    // Each process's published meta now says version 1.
    await expect
      .poll(() => page.locator('#instances tbody tr').allTextContents(), { timeout: 5000 })
      .toEqual([expect.stringMatching(/table version\s*1$/), expect.stringMatching(/table version\s*1$/)])
    expect(errors.filter((e) => !e.includes('400 (Bad Request)'))).toEqual([])
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
