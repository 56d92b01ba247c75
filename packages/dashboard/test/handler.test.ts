/**
 * The dashboard over real HTTP: who may see and change what, and every write that must be refused with
 * nothing written (no access, a reader, another origin, no or a wrong CSRF token, a malformed edit, an
 * oversized body); the page's security headers; the JSON API; mounting in Express, Fastify, `node:http`.
 */
import type { IncomingMessage } from 'node:http'
import { createLimitTable, ErrorCode, InvalidOptionError } from '@sluice/core'
import {
  type Access,
  CONTENT_SECURITY_POLICY,
  DashboardErrorCode,
  type DashboardOptions,
  dashboard,
  fastifyDashboard,
} from '@sluice/dashboard'
import { RedisLimitTable } from '@sluice/redis'
import express from 'express'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { startRedis, stopAll } from '../../../test/harness/redis.ts'
import { closeServers, csrfOf, pageWrite, send, serve } from './http.ts'
import { openTable, type SpyTable } from './spy-table.ts'

afterEach(closeServers)

const ROLE = 'x-test-role'

/** Access by a test header: `x-test-role: write | read`, anything else none. */
const byHeader = (req: IncomingMessage): Access => {
  const role = req.headers[ROLE]
  return role === 'write' || role === 'read' ? role : 'none'
}

interface Setup {
  url: string
  table: SpyTable
  csrf: string
}

async function setup(options: Partial<DashboardOptions> = {}): Promise<Setup> {
  const table = openTable({ 'PAYMENT:ALIPAY': [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }] })
  const url = await serve(dashboard({ access: byHeader, tables: { channels: table }, ...options }))
  const csrf = await csrfOf(`${url}/`, { [ROLE]: 'write' })
  return { url, table, csrf }
}

const entryUrl = (url: string, entry: string, table = 'channels') =>
  `${url}/api/tables/${encodeURIComponent(table)}/entries/${encodeURIComponent(entry)}`

const SPEC = JSON.stringify([{ kind: 'fixedWindow', limit: 5, windowMs: 1000 }])

describe('options', () => {
  it('throws InvalidOptionError without access: the dashboard is never open by default', () => {
    for (const options of [{}, { access: undefined }, { access: 'write' }]) {
      expect(() => dashboard(options as unknown as DashboardOptions)).toThrow(InvalidOptionError)
    }
    try {
      dashboard({} as DashboardOptions)
    } catch (error) {
      expect((error as InvalidOptionError).code).toBe(ErrorCode.INVALID_OPTION)
      expect((error as InvalidOptionError).option).toBe('dashboard.access')
    }
  })

  it('rejects unknown options, tables that are not tables, and a bad basePath', () => {
    const access = () => 'read' as const
    expect(() => dashboard({ access, secondz: 900 } as unknown as DashboardOptions)).toThrow(
      /dashboard.secondz/,
    )
    expect(() => dashboard({ access, tables: { t: {} as never } })).toThrow(/dashboard.tables.t/)
    expect(() => dashboard({ access, basePath: 'sluice' })).toThrow(/dashboard.basePath/)
    expect(() => dashboard({ access, seconds: 5 })).toThrow(/dashboard.seconds/)
  })
})

describe('access', () => {
  it("answers 403 to everything for 'none': page, assets, API, unknown paths, writes", async () => {
    const { url, table } = await setup()
    for (const path of [
      '/',
      '/index.html',
      '/assets/app.js',
      '/assets/app.css',
      '/api/stats',
      '/api/tables',
      '/nope',
    ]) {
      const reply = await send(`${url}${path}`)
      expect(reply.status, path).toBe(403)
      expect(reply.json).toEqual({ code: DashboardErrorCode.FORBIDDEN, message: expect.any(String) })
      expect(reply.text).not.toContain('sluice-csrf')
    }
    const put = await send(entryUrl(url, 'X'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: SPEC,
    })
    expect(put.status).toBe(403)
    expect(table.calls).toEqual([])
  })

  it('treats a policy that throws or answers something else as none', async () => {
    for (const access of [
      () => {
        throw new Error('auth service down')
      },
      () => Promise.reject(new Error('down')),
      () => 'admin' as Access,
    ]) {
      const url = await serve(dashboard({ access }))
      expect((await send(`${url}/api/stats`)).status).toBe(403)
    }
  })

  it('accepts a promise from the policy', async () => {
    const url = await serve(dashboard({ access: async () => 'read' as const }))
    expect((await send(`${url}/api/stats`)).status).toBe(200)
  })

  it('serves the page with a strict CSP and the CSRF token to a writer only', async () => {
    const { url, csrf } = await setup()
    const writer = await send(`${url}/`, { headers: { [ROLE]: 'write' } })
    expect(writer.status).toBe(200)
    expect(writer.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(writer.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY)
    expect(CONTENT_SECURITY_POLICY).toContain(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    )
    expect(writer.headers['x-content-type-options']).toBe('nosniff')
    expect(writer.headers['referrer-policy']).toBe('no-referrer')
    expect(writer.headers['cache-control']).toBe('no-store')
    expect(csrf).toMatch(/^[\w-]{43}$/)
    expect(writer.text).toContain('<meta name="sluice-access" content="write">')
    // No inline script or style in the page: only files served beside it.
    expect(writer.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    expect(writer.text).not.toMatch(/<style|\sstyle=|\son\w+=/)

    const reader = await send(`${url}/`, { headers: { [ROLE]: 'read' } })
    expect(reader.text).toContain('<meta name="sluice-csrf" content="">')
    expect(reader.text).toContain('<meta name="sluice-access" content="read">')

    for (const [path, type] of [
      ['/assets/app.js', 'text/javascript; charset=utf-8'],
      ['/assets/app.css', 'text/css; charset=utf-8'],
      ['/assets/icon.svg', 'image/svg+xml'],
    ] as const) {
      const asset = await send(`${url}${path}`, { headers: { [ROLE]: 'read' } })
      expect(asset.status, path).toBe(200)
      expect(asset.headers['content-type']).toBe(type)
      expect(asset.headers['x-content-type-options']).toBe('nosniff')
    }
  })

  it("serves the page as ES modules, each import one it serves, the rule grammar core's own, bundled", async () => {
    const { url } = await setup()
    const headers = { [ROLE]: 'read' }
    const served = new Map<string, string>()
    const pending = ['app.js']
    while (pending.length > 0) {
      const name = pending.pop()!
      if (served.has(name)) continue
      const asset = await send(`${url}/assets/${name}`, { headers })
      expect(asset.status, name).toBe(200)
      expect(asset.headers['content-type'], name).toBe('text/javascript; charset=utf-8')
      served.set(name, asset.text)
      const imports = /^(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|^import\s*['"]([^'"]+)['"]/gm
      for (const m of asset.text.matchAll(imports)) {
        const from = m[1] ?? m[2]!
        // Only the page's own modules, beside it: no bare name, no other origin.
        expect(from, `${name} imports ${from}`).toMatch(/^\.\/[a-z]+\.js$/)
        pending.push(from.slice(2))
      }
    }
    expect([...served.keys()].sort()).toEqual([
      'api.js',
      'app.js',
      'chart.js',
      'dom.js',
      'figures.js',
      'format.js',
      'grammar.js',
      'stats.js',
      'tables.js',
    ])
    // The grammar is core's, bundled whole: it imports nothing, and reads and writes rules as core does.
    const grammarText = served.get('grammar.js')!
    expect(grammarText).not.toMatch(/^\s*import\b/m)
    const grammar = (await import(
      `data:text/javascript;base64,${Buffer.from(grammarText).toString('base64')}`
    )) as typeof import('@sluice/core')
    const texts = [
      'slidingLog:100/1s',
      'warmUp:100/s,30sx4~1s',
      'slidingWindow:600/1m/6@minute',
      'concurrency:10~30s',
    ]
    const core = await import('@sluice/core')
    expect(JSON.stringify(grammar.parseRuleSpecs(texts))).toBe(JSON.stringify(core.parseRuleSpecs(texts)))
    expect(grammar.parseRuleSpecs(texts).map(grammar.formatRuleSpec)).toEqual(texts)
    expect(() => grammar.parseRuleSpec('slidingLog:3')).toThrow(
      'Invalid rule spec "slidingLog:3": expected slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s.',
    )
  })

  it("uses the configured token, so several processes behind one address accept each other's pages", async () => {
    const csrfToken = 'a'.repeat(20) + '-_'.repeat(10)
    const a = await setup({ csrfToken })
    const b = await setup({ csrfToken })
    expect(a.csrf).toBe(csrfToken)
    const put = await send(entryUrl(b.url, 'X'), {
      method: 'PUT',
      headers: { ...pageWrite(b.url, a.csrf), [ROLE]: 'write' },
      body: SPEC,
    })
    expect(put.status).toBe(200)
    expect(() => dashboard({ access: byHeader, csrfToken: 'short' })).toThrow(/dashboard.csrfToken/)
    expect(() => dashboard({ access: byHeader, csrfToken: `${'a'.repeat(40)}"><script>` })).toThrow(
      /dashboard.csrfToken/,
    )
  })

  it('uses a different token per handler', async () => {
    const a = await setup()
    const b = await setup()
    expect(a.csrf).not.toBe(b.csrf)
    const put = await send(entryUrl(b.url, 'X'), {
      method: 'PUT',
      headers: { ...pageWrite(b.url, a.csrf), [ROLE]: 'write' },
      body: SPEC,
    })
    expect(put.status).toBe(403)
    expect(put.json.code).toBe(DashboardErrorCode.CSRF)
  })
})

describe('writes that are refused, with nothing written', () => {
  const refusals: [
    string,
    (s: Setup) => { headers: Record<string, string>; body?: string; method?: string },
    number,
    string,
  ][] = [
    [
      'no access',
      (s) => ({ headers: pageWrite(s.url, s.csrf), body: SPEC }),
      403,
      DashboardErrorCode.FORBIDDEN,
    ],
    [
      'a reader',
      (s) => ({ headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'read' }, body: SPEC }),
      403,
      DashboardErrorCode.FORBIDDEN,
    ],
    [
      'a reader deleting',
      (s) => ({ method: 'DELETE', headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'read' } }),
      403,
      DashboardErrorCode.FORBIDDEN,
    ],
    [
      'another origin',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', origin: 'http://evil.example' },
        body: SPEC,
      }),
      403,
      DashboardErrorCode.CROSS_ORIGIN,
    ],
    [
      'a cross-site fetch (Sec-Fetch-Site)',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', 'sec-fetch-site': 'cross-site' },
        body: SPEC,
      }),
      403,
      DashboardErrorCode.CROSS_ORIGIN,
    ],
    [
      'a same-site but other-origin fetch',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', 'sec-fetch-site': 'same-site' },
        body: SPEC,
      }),
      403,
      DashboardErrorCode.CROSS_ORIGIN,
    ],
    [
      'an origin of another port',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', origin: 'http://127.0.0.1:1' },
        body: SPEC,
      }),
      403,
      DashboardErrorCode.CROSS_ORIGIN,
    ],
    [
      'no CSRF token',
      (s) => {
        const { 'x-sluice-csrf': _, ...headers } = pageWrite(s.url, s.csrf)
        return { headers: { ...headers, [ROLE]: 'write' }, body: SPEC }
      },
      403,
      DashboardErrorCode.CSRF,
    ],
    [
      'a wrong CSRF token',
      (s) => ({
        // The last character changed: to 'A', or to 'B' when the random token already ends in 'A'.
        headers: {
          ...pageWrite(s.url, `${s.csrf.slice(0, -1)}${s.csrf.endsWith('A') ? 'B' : 'A'}`),
          [ROLE]: 'write',
        },
        body: SPEC,
      }),
      403,
      DashboardErrorCode.CSRF,
    ],
    [
      'a CSRF token of another length',
      (s) => ({ headers: { ...pageWrite(s.url, 'short'), [ROLE]: 'write' }, body: SPEC }),
      403,
      DashboardErrorCode.CSRF,
    ],
    [
      'a delete without the token',
      () => ({ method: 'DELETE', headers: { [ROLE]: 'write' } }),
      403,
      DashboardErrorCode.CSRF,
    ],
    [
      'a body that is not JSON',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: '[{"kind": "fixedWindow",',
      }),
      400,
      DashboardErrorCode.BAD_REQUEST,
    ],
    [
      'a body that is not a list',
      (s) => ({ headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }, body: '{"kind":"fixedWindow"}' }),
      400,
      ErrorCode.INVALID_OPTION,
    ],
    [
      'a spec the factory rejects (limit 0)',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: JSON.stringify([{ kind: 'fixedWindow', limit: 0, windowMs: 1000 }]),
      }),
      400,
      ErrorCode.INVALID_OPTION,
    ],
    [
      'a spec with an unknown option',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: JSON.stringify([{ kind: 'fixedWindow', limit: 5, windowMs: 1000, burst: 2 }]),
      }),
      400,
      ErrorCode.INVALID_OPTION,
    ],
    [
      'a second valid rule after an invalid one',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: JSON.stringify([{ kind: 'slidingLog', limit: 5, windowMs: 1000 }, 'tokenBucket:0+1/s']),
      }),
      400,
      ErrorCode.INVALID_OPTION,
    ],
    [
      'a string that is not in the spec grammar',
      (s) => ({ headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }, body: '["slidingLog:lots"]' }),
      400,
      ErrorCode.INVALID_SPEC,
    ],
    [
      'an unknown kind in the grammar',
      (s) => ({ headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }, body: '["gcra:5/1s"]' }),
      400,
      ErrorCode.INVALID_SPEC,
    ],
    [
      'an unknown kind',
      (s) => ({ headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }, body: '[{"kind":"magic"}]' }),
      400,
      ErrorCode.INVALID_SPEC,
    ],
    [
      'two rules sharing a state identity',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: '["slidingLog:5/1s", "slidingLog:9/1s"]',
      }),
      400,
      ErrorCode.DUPLICATE_RULE,
    ],
    [
      'a body that is not application/json',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', 'content-type': 'text/plain' },
        body: SPEC,
      }),
      415,
      DashboardErrorCode.MEDIA_TYPE,
    ],
    [
      'a body over 64 KiB',
      (s) => ({
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' },
        body: JSON.stringify([{ kind: 'fixedWindow', limit: 5, windowMs: 1000, name: 'x'.repeat(70_000) }]),
      }),
      413,
      DashboardErrorCode.TOO_LARGE,
    ],
  ]

  const JUDGED_BY_THE_TABLE = new Set([
    'a spec the factory rejects (limit 0)',
    'a spec with an unknown option',
    'an unknown kind',
    'two rules sharing a state identity',
  ])

  for (const [what, make, status, code] of refusals) {
    it(`refuses ${what}: ${status} ${code}`, async () => {
      const s = await setup()
      const before = s.table.entries()
      const { method = 'PUT', headers, body } = make(s)
      const reply = await send(entryUrl(s.url, 'PAYMENT:WECHAT'), {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
      })
      expect(reply.status).toBe(status)
      expect(reply.json).toEqual({ code, message: expect.any(String) })
      expect(s.table.version).toBe(0)
      expect(s.table.entries()).toEqual(before)
      // Refused before the table was asked, except what only the table's factories can judge.
      expect(s.table.calls.length).toBe(JUDGED_BY_THE_TABLE.has(what) ? 1 : 0)
    })
  }

  it('refuses a quota of an unknown zone, a huge limit or a bad week start, as text or as a spec: 400, the code naming the option', async () => {
    const s = await setup()
    const headers = { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }
    const zone =
      'Invalid option quota.timeZone: "Mars/Olympus"; expected an IANA time zone name Intl knows, such as Europe/Berlin or UTC.'
    const limit =
      'Invalid option quota.limit: 100000000000000000000; expected an integer >= 1, or -1 for not limited.'
    const cases: [unknown, string, string][] = [
      [['quota:1000/day@@Mars/Olympus'], ErrorCode.INVALID_OPTION, zone],
      [
        [{ kind: 'quota', limit: 1000, per: 'day', timeZone: 'Mars/Olympus' }],
        ErrorCode.INVALID_OPTION,
        zone,
      ],
      [['quota:99999999999999999999/day'], ErrorCode.INVALID_OPTION, limit],
      [
        [{ kind: 'quota', limit: 500, per: 'week', weekStartsOn: 9 }],
        ErrorCode.INVALID_OPTION,
        'Invalid option quota.weekStartsOn: 9; expected an integer from 1 to 7.',
      ],
      [
        [{ kind: 'quota', limit: 500, per: 'fortnight' }],
        ErrorCode.INVALID_OPTION,
        "Invalid option quota.per: \"fortnight\"; expected one of 'hour', 'day', 'week', 'month', 'year'.",
      ],
    ]
    for (const [body, code, message] of cases) {
      const reply = await send(entryUrl(s.url, 'PLAN:FREE'), {
        method: 'PUT',
        headers,
        body: JSON.stringify(body),
      })
      expect([reply.status, reply.json]).toEqual([400, { code, message }])
    }
    expect(s.table.version).toBe(0)
    expect(s.table.entries().has('PLAN:FREE')).toBe(false)
    // And a quota the factory takes is written, its zone as Intl names it.
    const ok = await send(entryUrl(s.url, 'PLAN:FREE'), {
      method: 'PUT',
      headers,
      body: JSON.stringify(['quota:1000/day@@europe/berlin']),
    })
    expect(ok.json.rules).toEqual([
      { kind: 'quota', limit: 1000, per: 'day', timeZone: 'Europe/Berlin', weekStartsOn: 1 },
    ])
  })

  it('refuses a chunked body that grows past the bound while it is read', async () => {
    const s = await setup({ maxBodyBytes: 1024 })
    const { request } = await import('node:http')
    const reply = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(entryUrl(s.url, 'X'), {
        method: 'PUT',
        headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', 'transfer-encoding': 'chunked' },
      })
      req.on('response', (res) => {
        let body = ''
        res.on('data', (c) => {
          body += c
        })
        res.on('end', () => resolve({ status: res.statusCode!, body }))
      })
      req.on('error', reject)
      req.write(`[${'"slidingLog:1/1s",'.repeat(40)}`)
      req.write(`${'"slidingLog:1/1s",'.repeat(40)}`)
      setTimeout(() => req.end('"x"]'), 50)
    })
    expect(reply.status).toBe(413)
    expect(JSON.parse(reply.body).code).toBe(DashboardErrorCode.TOO_LARGE)
    expect(s.table.calls).toEqual([])
  })

  it('refuses entry names that are empty, too long or not URL-decodable', async () => {
    const s = await setup()
    const headers = { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }
    for (const entry of ['x'.repeat(257), '%E0%A4%A', '%00']) {
      const reply = await send(`${s.url}/api/tables/channels/entries/${entry}`, {
        method: 'PUT',
        headers,
        body: SPEC,
      })
      expect(reply.status, entry).toBe(400)
      expect(reply.json.code).toBe(DashboardErrorCode.BAD_REQUEST)
    }
    expect(
      (await send(`${s.url}/api/tables/channels/entries/`, { method: 'PUT', headers, body: SPEC })).status,
    ).toBe(400)
    expect(s.table.calls).toEqual([])
  })

  it('answers 404 for a table it does not have, and 405 for a method a path does not take', async () => {
    const s = await setup()
    const headers = { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }
    const missing = await send(entryUrl(s.url, 'X', 'nope'), { method: 'PUT', headers, body: SPEC })
    expect(missing.status).toBe(404)
    expect(missing.json.code).toBe(DashboardErrorCode.NOT_FOUND)
    expect((await send(`${s.url}/api/tables/__proto__`, { headers })).status).toBe(404)
    const post = await send(entryUrl(s.url, 'X'), { method: 'POST', headers, body: SPEC })
    expect(post.status).toBe(405)
    expect(post.headers.allow).toBe('PUT, DELETE')
    expect((await send(`${s.url}/api/stats`, { method: 'PUT', headers, body: SPEC })).status).toBe(405)
    expect(s.table.calls).toEqual([])
  })
})

describe('writes that are accepted', () => {
  it('sets an entry from specs or short forms, answers it read back, and records the actor', async () => {
    const s = await setup()
    const headers = { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }
    const put = await send(entryUrl(s.url, 'PAYMENT:WECHAT'), {
      method: 'PUT',
      headers,
      body: JSON.stringify(['slidingLog:2/1s', { kind: 'tokenBucket', capacity: 10, refillPerSecond: 1 }]),
    })
    expect(put.status).toBe(200)
    expect(put.json).toEqual({
      table: 'channels',
      version: 1,
      entry: 'PAYMENT:WECHAT',
      rules: [
        { kind: 'slidingLog', limit: 2, windowMs: 1000 },
        { kind: 'tokenBucket', capacity: 10, refillPerSecond: 1 },
      ],
    })
    expect(s.table.get('PAYMENT:WECHAT')!.map((r) => r.name)).toEqual(['2-per-1s', '10-burst-1-per-s'])
    expect(s.table.calls).toEqual([
      { method: 'set', entry: 'PAYMENT:WECHAT', rules: put.json.rules, actor: 'dashboard 127.0.0.1' },
    ])

    // null: not limited; a name with a slash and a colon arrives decoded.
    const free = await send(entryUrl(s.url, 'REFUND/ALIPAY:*'), { method: 'PUT', headers, body: 'null' })
    expect(free.json).toMatchObject({ entry: 'REFUND/ALIPAY:*', rules: null, version: 2 })

    const view = await send(`${s.url}/api/tables/channels`, { headers })
    expect(view.json.version).toBe(2)
    expect(view.json.entries).toEqual([
      { entry: 'PAYMENT:ALIPAY', rules: [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }] },
      { entry: 'PAYMENT:WECHAT', rules: put.json.rules },
      { entry: 'REFUND/ALIPAY:*', rules: null },
    ])
    // createLimitTable keeps no audit trail: none is shown.
    expect(view.json.audit).toEqual([])

    const del = await send(entryUrl(s.url, 'PAYMENT:ALIPAY'), { method: 'DELETE', headers })
    expect(del.json).toEqual({ table: 'channels', version: 3 })
    expect(s.table.entries().has('PAYMENT:ALIPAY')).toBe(false)
    expect(s.table.calls.at(-1)).toEqual({
      method: 'delete',
      entry: 'PAYMENT:ALIPAY',
      actor: 'dashboard 127.0.0.1',
    })

    const list = await send(`${s.url}/api/tables`, { headers })
    expect(list.json).toEqual({ tables: [{ name: 'channels', version: 3, entries: 2 }] })
  })

  it("shows a RedisLimitTable's audit trail: who changed what, from what to what, newest first", async () => {
    const redis = await startRedis()
    const client = new Redis({ host: redis.host, port: redis.port })
    const table = await RedisLimitTable.open({ client, name: 'channels' })
    try {
      await table.set('PAYMENT:ALIPAY', [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }], {
        actor: 'ops:alice',
      })
      const url = await serve(
        dashboard({ access: byHeader, tables: { channels: table }, actor: () => 'ops:bob', auditCount: 3 }),
      )
      const csrf = await csrfOf(`${url}/`, { [ROLE]: 'write' })
      const headers = { ...pageWrite(url, csrf), [ROLE]: 'write' }
      const put = await send(entryUrl(url, 'PAYMENT:ALIPAY'), {
        method: 'PUT',
        headers,
        body: '["slidingLog:5/1s", "fixedWindow:1000/1h"]',
      })
      expect(put.json).toEqual({
        table: 'channels',
        version: 2,
        entry: 'PAYMENT:ALIPAY',
        rules: [
          { kind: 'slidingLog', limit: 5, windowMs: 1000 },
          { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 },
        ],
      })
      expect((await send(entryUrl(url, 'REFUND'), { method: 'PUT', headers, body: '["-1"]' })).status).toBe(
        200,
      )
      expect((await send(entryUrl(url, 'PAYMENT:ALIPAY'), { method: 'DELETE', headers })).json).toEqual({
        table: 'channels',
        version: 4,
      })

      const view = await send(`${url}/api/tables/channels`, { headers: { [ROLE]: 'read' } })
      expect(view.json.version).toBe(4)
      expect(view.json.entries).toEqual([{ entry: 'REFUND', rules: null }])
      // auditCount: 3 of the 4 changes, newest first, in the table's own words.
      expect(view.json.audit).toEqual([
        {
          version: 4,
          time: expect.any(Number),
          change: 'delete',
          entry: 'PAYMENT:ALIPAY',
          before: put.json.rules,
          actor: 'ops:bob',
        },
        {
          version: 3,
          time: expect.any(Number),
          change: 'set',
          entry: 'REFUND',
          after: null,
          actor: 'ops:bob',
        },
        {
          version: 2,
          time: expect.any(Number),
          change: 'set',
          entry: 'PAYMENT:ALIPAY',
          before: [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }],
          after: put.json.rules,
          actor: 'ops:bob',
        },
      ])
      expect(Math.abs(view.json.audit[0].time - Date.now())).toBeLessThan(10_000)
    } finally {
      await table.close()
      client.disconnect()
    }
  })

  it("serves a RedisLimitTable's entries while Redis is away, with auditError instead of a 500 (issue 25 item 13)", async () => {
    const redis = await startRedis()
    // No offline queue: a command while Redis is away fails at once instead of waiting for it.
    const client = new Redis({ host: redis.host, port: redis.port, enableOfflineQueue: false })
    await new Promise((resolve) => client.once('ready', resolve))
    const table = await RedisLimitTable.open({ client, name: 'channels' })
    try {
      await table.set('PAYMENT:ALIPAY', [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }], { actor: 'ops' })
      const url = await serve(dashboard({ access: byHeader, tables: { channels: table } }))
      await redis.stop()
      const view = await send(`${url}/api/tables/channels`, { headers: { [ROLE]: 'read' } })
      expect(view.status).toBe(200)
      expect(view.json).toEqual({
        name: 'channels',
        version: 1,
        entries: [{ entry: 'PAYMENT:ALIPAY', rules: [{ kind: 'slidingLog', limit: 3, windowMs: 1000 }] }],
        audit: [],
        auditError: { code: expect.stringMatching(/^ERR_SLUICE_/), message: expect.any(String) },
      })
    } finally {
      await table.close()
      client.disconnect()
    }
  })

  it('takes a write without Origin or Sec-Fetch-Site (a script with the token), and a trusted origin', async () => {
    const s = await setup({ trustedOrigins: ['https://ops.example.com/'] })
    const plain = await send(entryUrl(s.url, 'A'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-sluice-csrf': s.csrf, [ROLE]: 'write' },
      body: SPEC,
    })
    expect(plain.status).toBe(200)
    const trusted = await send(entryUrl(s.url, 'B'), {
      method: 'PUT',
      headers: { ...pageWrite(s.url, s.csrf), [ROLE]: 'write', origin: 'https://ops.example.com' },
      body: SPEC,
    })
    expect(trusted.status).toBe(200)
    expect(s.table.version).toBe(2)
  })

  it('answers a table that fails for another reason with 500, or 503 for a store error', async () => {
    const s = await setup()
    const headers = { ...pageWrite(s.url, s.csrf), [ROLE]: 'write' }
    s.table.set = async () => {
      throw Object.assign(new Error('Redis is away'), { code: 'ERR_SLUICE_STORE' })
    }
    const down = await send(entryUrl(s.url, 'A'), { method: 'PUT', headers, body: SPEC })
    expect(down.status).toBe(503)
    expect(down.json).toEqual({ code: 'ERR_SLUICE_STORE', message: 'Redis is away' })
    s.table.set = async () => {
      throw new TypeError('boom')
    }
    const failed = await send(entryUrl(s.url, 'A'), { method: 'PUT', headers, body: SPEC })
    expect(failed.status).toBe(500)
    expect(failed.json.code).toBe(DashboardErrorCode.UNAVAILABLE)
  })
})

describe('mounting', () => {
  const access = () => 'write' as const

  it('in Express under a path: page, API, and the mount path without its slash redirecting to it', async () => {
    const table = openTable()
    const app = express()
    app.use('/ops/sluice', dashboard({ access, tables: { t: table } }))
    app.use((_req, res) => void res.status(418).end())
    const url = await serve(app)
    const bare = await send(`${url}/ops/sluice?x=1`)
    expect(bare.status).toBe(308)
    expect(bare.headers.location).toBe('./sluice/?x=1')
    expect(new URL(bare.headers.location!, `${url}/ops/sluice?x=1`).pathname).toBe('/ops/sluice/')
    expect((await send(`${url}/ops/sluice/`)).text).toContain('<meta name="sluice-access" content="write">')
    expect((await send(`${url}/ops/sluice/api/tables`)).json).toEqual({
      tables: [{ name: 't', version: 0, entries: 0 }],
    })
    expect((await send(`${url}/elsewhere`)).status).toBe(418)
    const csrf = await csrfOf(`${url}/ops/sluice/`)
    const put = await send(`${url}/ops/sluice/api/tables/t/entries/A%3AB`, {
      method: 'PUT',
      headers: pageWrite(url, csrf),
      body: SPEC,
    })
    expect(put.status).toBe(200)
    expect(table.entries().has('A:B')).toBe(true)
  })

  it('in Express after express.json(): the parsed body is taken, with the same bound', async () => {
    // createLimitTable is a dashboard table as it is.
    const table = createLimitTable()
    const app = express()
    app.use(express.json({ limit: '1mb' }))
    app.use('/sluice', dashboard({ access, tables: { t: table } }))
    const url = await serve(app)
    const csrf = await csrfOf(`${url}/sluice/`)
    const put = await send(`${url}/sluice/api/tables/t/entries/A`, {
      method: 'PUT',
      headers: pageWrite(url, csrf),
      body: SPEC,
    })
    expect(put.status).toBe(200)
    const big = await send(`${url}/sluice/api/tables/t/entries/B`, {
      method: 'PUT',
      headers: pageWrite(url, csrf),
      body: JSON.stringify([{ kind: 'fixedWindow', limit: 5, windowMs: 1000, name: 'x'.repeat(70_000) }]),
    })
    expect(big.status).toBe(413)
    expect([...table.entries().keys()]).toEqual(['A'])
  })

  it('in a node:http server under basePath', async () => {
    const handler = dashboard({ access, basePath: '/sluice' })
    const url = await serve(handler)
    expect((await send(`${url}/sluice`)).headers.location).toBe('./sluice/')
    expect((await send(`${url}/sluice/api/stats`)).status).toBe(200)
    expect((await send(`${url}/other`)).status).toBe(404)
  })

  it('in Fastify under a prefix: the body reaches the handler unread', async () => {
    const table = openTable()
    const app = Fastify()
    await app.register(fastifyDashboard, { prefix: '/sluice', access, tables: { t: table } })
    app.get('/', async () => ({ home: true }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
      expect((await send(`${url}/sluice`)).headers.location).toBe('./sluice/')
      const page = await send(`${url}/sluice/`)
      expect(page.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY)
      expect((await send(`${url}/`)).json).toEqual({ home: true })
      const csrf = await csrfOf(`${url}/sluice/`)
      const put = await send(`${url}/sluice/api/tables/t/entries/A%2FB`, {
        method: 'PUT',
        headers: pageWrite(url, csrf),
        body: SPEC,
      })
      expect(put.status).toBe(200)
      expect(put.json.entry).toBe('A/B')
      const bad = await send(`${url}/sluice/api/tables/t/entries/C`, {
        method: 'PUT',
        headers: pageWrite(url, csrf),
        body: '[{"kind":"fixedWindow","limit":-2,"windowMs":1000}]',
      })
      expect(bad.status).toBe(400)
      expect(bad.json.code).toBe(ErrorCode.INVALID_OPTION)
      expect([...table.entries().keys()]).toEqual(['A/B'])
    } finally {
      await app.close()
    }
  })
})

afterAll(async () => {
  await closeServers()
  await stopAll()
})
