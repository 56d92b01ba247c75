/**
 * DNS rebinding: a name the attacker controls (`evil.example`) rebound to the dashboard's address makes the
 * browser treat the dashboard as the attacker's own origin. Over real HTTP with forged `Host` and `Origin`
 * headers on every mount (node:http, Express, Fastify, `startDashboard`), and in headless Chromium with the
 * name mapped to 127.0.0.1: a foreign Host gets no page, no token and no data (421), a write's Origin is
 * compared with the served names, scheme included, and `allowedHosts` names more.
 */
import type { AddressInfo } from 'node:net'
import { InvalidOptionError } from '@sluice/core'
import {
  DashboardErrorCode,
  type DashboardOptions,
  dashboard,
  fastifyDashboard,
  startDashboard,
} from '@sluice/dashboard'
import express from 'express'
import Fastify from 'fastify'
import { chromium } from 'playwright-core'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { closeServers, send, serve } from './http.ts'
import { openTable } from './spy-table.ts'

afterEach(closeServers)
const closing: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const close of closing) await close()
})

const PAYMENT = [{ kind: 'slidingLog', limit: 3, windowMs: 1000 } as const]
const LIFTED = JSON.stringify([{ kind: 'slidingLog', limit: 1_000_000, windowMs: 1000 }])
const write = () => 'write' as const

/** The three mounts and the standalone server, each serving one table under `/sluice/` (or `/`). */
const MOUNTS: [string, (options: DashboardOptions) => Promise<{ base: string; port: number }>][] = [
  [
    'node:http',
    async (options) => {
      const url = await serve(dashboard({ ...options, basePath: '/sluice' }))
      return { base: '/sluice', port: Number(new URL(url).port) }
    },
  ],
  [
    'Express',
    async (options) => {
      const app = express()
      app.use('/sluice', dashboard(options))
      const url = await serve(app)
      return { base: '/sluice', port: Number(new URL(url).port) }
    },
  ],
  [
    'Fastify',
    async (options) => {
      const app = Fastify()
      await app.register(fastifyDashboard, { prefix: '/sluice', ...options })
      await app.listen({ port: 0, host: '127.0.0.1' })
      closing.push(() => app.close())
      return { base: '/sluice', port: (app.server.address() as AddressInfo).port }
    },
  ],
  [
    'startDashboard',
    async (options) => {
      const running = await startDashboard({ ...options, port: 0 })
      closing.push(() => running.close())
      return { base: '', port: Number(new URL(running.url).port) }
    },
  ],
]

/** A request to 127.0.0.1:port whose Host (and other headers) say what the test says. */
const at = (port: number, path: string) => `http://127.0.0.1:${port}${path}`

describe.each(MOUNTS)('DNS rebinding (%s)', (_, mount) => {
  it('a rebound Host gets no page, no token and no data, and cannot lift a limit', async () => {
    const table = openTable({ 'PAYMENT:ALIPAY': PAYMENT })
    const { base, port } = await mount({ access: write, tables: { channels: table } })
    const evil = `evil.example:${port}`
    for (const path of [
      `${base}/`,
      `${base}/assets/app.js`,
      `${base}/api/stats`,
      `${base}/api/tables/channels`,
    ]) {
      const reply = await send(at(port, path), { headers: { host: evil } })
      expect(reply.status, path).toBe(421)
      expect(reply.json.code).toBe(DashboardErrorCode.HOST)
      expect(reply.text).not.toContain('sluice-csrf')
      expect(reply.text).not.toContain('PAYMENT')
    }
    // The token of the real page, carried by a write that names the rebound host as Host and Origin.
    const page = await send(at(port, `${base}/`))
    const csrf = /<meta name="sluice-csrf" content="([^"]+)">/.exec(page.text)![1]!
    const put = await send(at(port, `${base}/api/tables/channels/entries/PAYMENT%3AALIPAY`), {
      method: 'PUT',
      headers: {
        host: evil,
        origin: `http://${evil}`,
        'sec-fetch-site': 'same-origin',
        'content-type': 'application/json',
        'x-sluice-csrf': csrf,
      },
      body: LIFTED,
    })
    expect(put.status).toBe(421)
    expect(table.calls).toEqual([])
    expect(table.get('PAYMENT:ALIPAY')).toMatchObject([{ limit: 3 }])
  })

  it('serves the loopback names with its port only; a write from another origin or scheme is refused', async () => {
    const table = openTable({ 'PAYMENT:ALIPAY': PAYMENT })
    const { base, port } = await mount({ access: write, tables: { channels: table } })
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      expect((await send(at(port, `${base}/api/tables`), { headers: { host } })).status, host).toBe(200)
    }
    for (const host of [
      `127.0.0.1:${port + 1}`,
      'localhost',
      `localhost.evil.example:${port}`,
      `10.0.0.1:${port}`,
      `localhost:${port}@evil.example`,
    ]) {
      expect((await send(at(port, `${base}/api/tables`), { headers: { host } })).status, host).toBe(421)
    }
    const page = await send(at(port, `${base}/`))
    const csrf = /<meta name="sluice-csrf" content="([^"]+)">/.exec(page.text)![1]!
    const writeFrom = (origin: string) =>
      send(at(port, `${base}/api/tables/channels/entries/A`), {
        method: 'PUT',
        headers: { origin, 'content-type': 'application/json', 'x-sluice-csrf': csrf },
        body: LIFTED,
      })
    for (const origin of [
      `http://evil.example:${port}`,
      `https://127.0.0.1:${port}`,
      `http://127.0.0.1:${port + 1}`,
      'null',
    ]) {
      const refused = await writeFrom(origin)
      expect(refused.status, origin).toBe(403)
      expect(refused.json.code).toBe(DashboardErrorCode.CROSS_ORIGIN)
    }
    expect(table.calls).toEqual([])
    expect((await writeFrom(`http://localhost:${port}`)).status).toBe(200)
  })

  it('answers for the names allowedHosts gives, and takes writes from them', async () => {
    const table = openTable()
    const { base, port } = await mount({
      access: write,
      tables: { channels: table },
      allowedHosts: ['ops.example.com', 'admin.example.com:2'],
    })
    expect((await send(at(port, `${base}/`), { headers: { host: 'ops.example.com' } })).status).toBe(200)
    expect((await send(at(port, `${base}/`), { headers: { host: 'ops.example.com:9' } })).status).toBe(200)
    expect((await send(at(port, `${base}/`), { headers: { host: 'admin.example.com:1' } })).status).toBe(421)
    const page = await send(at(port, `${base}/`), { headers: { host: 'ops.example.com' } })
    const csrf = /<meta name="sluice-csrf" content="([^"]+)">/.exec(page.text)![1]!
    const put = await send(at(port, `${base}/api/tables/channels/entries/A`), {
      method: 'PUT',
      headers: {
        host: 'ops.example.com',
        origin: 'http://ops.example.com',
        'content-type': 'application/json',
        'x-sluice-csrf': csrf,
      },
      body: LIFTED,
    })
    expect(put.status).toBe(200)
  })
})

it('rejects an allowedHosts entry that is not a host name', () => {
  for (const bad of ['http://ops.example.com', 'ops example', '*', 5, 'a/b']) {
    expect(() => dashboard({ access: write, allowedHosts: [bad as string] })).toThrow(InvalidOptionError)
  }
  expect(() => dashboard({ access: write, allowedHosts: 'ops.example.com' as never })).toThrow(
    /dashboard.allowedHosts/,
  )
})

describe('DNS rebinding in Chromium', () => {
  it('a page served under a rebound name cannot read the token nor change a table', async () => {
    const table = openTable({ 'PAYMENT:ALIPAY': PAYMENT })
    const url = await serve(dashboard({ access: write, tables: { channels: table }, basePath: '/sluice' }))
    const port = new URL(url).port
    // evil.example resolves to the dashboard's address, as a rebound name does.
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--host-resolver-rules=MAP evil.example 127.0.0.1'],
    })
    try {
      const page = await browser.newPage()
      const landing = await page.goto(`http://evil.example:${port}/sluice/`)
      expect(landing?.status()).toBe(421)
      // The attacker's script, running at http://evil.example:PORT: same origin as far as the browser knows.
      const outcome = await page.evaluate(async () => {
        const html = await (await fetch('/sluice/')).text()
        const token = /<meta name="sluice-csrf" content="([^"]*)">/.exec(html)?.[1] ?? ''
        const put = await fetch('/sluice/api/tables/channels/entries/PAYMENT%3AALIPAY', {
          method: 'PUT',
          headers: { 'content-type': 'application/json', 'x-sluice-csrf': token },
          body: JSON.stringify([{ kind: 'slidingLog', limit: 1_000_000, windowMs: 1000 }]),
        })
        const stats = await fetch('/sluice/api/stats')
        return { token, put: put.status, stats: stats.status }
      })
      expect(outcome).toEqual({ token: '', put: 421, stats: 421 })
      expect(table.calls).toEqual([])
      // The real page, under its own name, still works in the same browser.
      const own = await page.goto(`http://localhost:${port}/sluice/`)
      expect(own?.status()).toBe(200)
      expect(await page.locator('meta[name="sluice-csrf"]').getAttribute('content')).not.toBe('')
    } finally {
      await browser.close()
    }
  }, 90_000)
})
