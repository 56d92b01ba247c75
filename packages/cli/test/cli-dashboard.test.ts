/**
 * `sluice dashboard`, built, as a real child process against a real redis-server: it serves the page and
 * the JSON API for the tables it was given (edited meanwhile with `sluice limits set`, followed live),
 * refuses a reader's write, lets a writer edit (recorded in the table's audit trail), stops on SIGTERM,
 * exits 2 when Redis cannot be reached (within its timeout, no hang) and 1 on invalid input.
 */
import { request as httpRequest } from 'node:http'
import { createServer, type Server } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  freePort,
  type Running,
  request,
  run,
  stopExamples,
  waitFor,
} from '../../../test/examples-harness.ts'
import { SLUICE_BIN, sluice } from '../../../test/harness/cli.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer
let redisUrl: string

beforeAll(async () => {
  server = await startRedis()
  redisUrl = `redis://${server.host}:${server.port}`
})

afterAll(async () => {
  await stopExamples()
  await stopAll()
})

/** Starts `sluice dashboard ...args` and waits for the URL it prints. */
async function dashboard(...args: string[]): Promise<Running & { url: string }> {
  const running = run(SLUICE_BIN, ['dashboard', ...args])
  const [, url] = await waitFor(running, /^sluice dashboard on (http:\/\/\S+\/) /m)
  return Object.assign(running, { url: url! })
}

/** A request over node:http, whose Host header is what the test says (fetch would set its own). */
function hostRequest(
  port: number,
  path: string,
  { method = 'GET', body, ...headers }: Record<string, string>,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => {
        text += c.toString()
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const tableUrl = (base: string, table: string) => `${base}api/tables/${table}`

describe('sluice dashboard', () => {
  it('serves the page and a table edited with sluice limits set, follows it live, and stops on SIGTERM', async () => {
    const t = ['--table', 'gw', '--redis', redisUrl]
    expect(
      (await sluice('limits', 'set', 'PAYMENT:ALIPAY', 'slidingLog:100/1s', ...t, '--actor', 'ops:alice'))
        .code,
    ).toBe(0)
    expect((await sluice('limits', 'set', '*', 'tokenBucket:50+10/s', ...t)).code).toBe(0)

    const port = await freePort()
    const running = await dashboard('--redis', redisUrl, '--port', String(port), '--table', 'gw')
    expect(running.url).toBe(`http://127.0.0.1:${port}/`)
    expect(running.output()).toBe(
      `sluice dashboard on http://127.0.0.1:${port}/ (read access, tables gw, Redis ${redisUrl})\n`,
    )

    const page = await request(running.url)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(page.text).toContain('<meta name="sluice-access" content="read">')
    expect(page.text).toContain('<meta name="sluice-csrf" content="">')
    expect((await request(`${running.url}assets/app.js`)).status).toBe(200)

    const view = await request(tableUrl(running.url, 'gw'))
    expect(view.status).toBe(200)
    expect(view.body).toEqual({
      name: 'gw',
      version: 2,
      entries: [
        { entry: '*', rules: [{ kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }] },
        { entry: 'PAYMENT:ALIPAY', rules: [{ kind: 'slidingLog', limit: 100, windowMs: 1000 }] },
      ],
      audit: [
        {
          version: 2,
          time: expect.any(Number),
          change: 'set',
          entry: '*',
          after: [{ kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
          actor: expect.stringMatching(/@/),
        },
        {
          version: 1,
          time: expect.any(Number),
          change: 'set',
          entry: 'PAYMENT:ALIPAY',
          after: [{ kind: 'slidingLog', limit: 100, windowMs: 1000 }],
          actor: 'ops:alice',
        },
      ],
    })
    expect((await request(`${running.url}api/tables`)).body).toEqual({
      tables: [{ name: 'gw', version: 2, entries: 2 }],
    })
    expect((await request(`${running.url}api/stats`)).status).toBe(200)

    // A reader cannot change the table, even with the headers of a page.
    const put = await request(`${tableUrl(running.url, 'gw')}/entries/PAYMENT%3AALIPAY`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-sluice-csrf': 'x'.repeat(43) },
      body: '["slidingLog:1/1s"]',
    })
    expect(put.status).toBe(403)
    expect(put.body).toEqual({
      code: 'ERR_SLUICE_DASHBOARD_FORBIDDEN',
      message: 'Read access cannot change a table.',
    })

    // An edit made elsewhere reaches the running dashboard through Redis.
    expect((await sluice('limits', 'set', 'PAYMENT:ALIPAY', 'slidingLog:5/1s', ...t)).code).toBe(0)
    await expect
      .poll(async () => (await request(tableUrl(running.url, 'gw'))).body.entries, { timeout: 3000 })
      .toEqual([
        { entry: '*', rules: [{ kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }] },
        { entry: 'PAYMENT:ALIPAY', rules: [{ kind: 'slidingLog', limit: 5, windowMs: 1000 }] },
      ])
    expect((await sluice('limits', 'list', ...t)).stdout).toContain('"version": 3')

    expect(await running.stop()).toBe(0)
    expect(running.output()).toMatch(/\nSIGTERM: stopping\.\n$/)
    await expect(fetch(running.url)).rejects.toThrow()
  })

  it('lets a writer edit a table with the page token: the edit is in Redis, with its actor', async () => {
    const port = await freePort()
    const running = await dashboard(
      `--redis=${redisUrl}`,
      '--port',
      String(port),
      '--table',
      'ops',
      '--table',
      'gw',
      '--access',
      'write',
    )
    expect(running.output()).toContain('(write access, tables ops, gw, ')
    const page = await request(running.url)
    const csrf = /<meta name="sluice-csrf" content="([\w-]+)">/.exec(page.text)![1]!
    const put = await request(`${tableUrl(running.url, 'ops')}/entries/REFUND`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-sluice-csrf': csrf },
      body: '["leakyBucket:5/s~2s"]',
    })
    expect(put.status).toBe(200)
    expect(put.body).toEqual({
      table: 'ops',
      version: 1,
      entry: 'REFUND',
      rules: [{ kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 }],
    })
    const got = JSON.parse(
      (await sluice('limits', 'get', 'REFUND', '--table', 'ops', '--redis', redisUrl)).stdout,
    )
    expect(got.rules).toEqual([{ kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 }])
    const audit = JSON.parse((await sluice('limits', 'audit', '--table', 'ops', '--redis', redisUrl)).stdout)
    expect(audit.changes.map((c: Record<string, unknown>) => [c.version, c.entry, c.actor])).toEqual([
      [1, 'REFUND', 'dashboard 127.0.0.1'],
    ])
    expect((await request(`${running.url}api/tables`)).body).toEqual({
      tables: [
        { name: 'ops', version: 1, entries: 1 },
        { name: 'gw', version: 3, entries: 2 },
      ],
    })
    expect(await running.stop()).toBe(0)
  })

  it('answers a DNS-rebound Host with 421 (no page, no token, no write) even with --access write; --allowed-host names one', async () => {
    const port = await freePort()
    const running = await dashboard(
      '--redis',
      redisUrl,
      '--port',
      String(port),
      '--table',
      'rebind',
      '--access',
      'write',
      '--allowed-host',
      'ops.example.com',
    )
    const evil = `evil.example:${port}`
    const page = await hostRequest(port, '/', { host: evil })
    expect(page.status).toBe(421)
    expect(page.text).not.toContain('sluice-csrf')
    const csrf = /<meta name="sluice-csrf" content="([\w-]+)">/.exec((await request(running.url)).text)![1]!
    const put = await hostRequest(port, '/api/tables/rebind/entries/PAYMENT', {
      method: 'PUT',
      host: evil,
      origin: `http://${evil}`,
      'content-type': 'application/json',
      'x-sluice-csrf': csrf,
      body: '["slidingLog:1000000/1s"]',
    })
    expect(put.status).toBe(421)
    expect((await hostRequest(port, '/api/tables/rebind', { host: evil })).status).toBe(421)
    expect((await hostRequest(port, '/', { host: 'ops.example.com' })).status).toBe(200)
    const got = JSON.parse((await sluice('limits', 'list', '--table', 'rebind', '--redis', redisUrl)).stdout)
    expect(got).toEqual({ table: 'rebind', version: 0, entries: {} })
    expect(await running.stop()).toBe(0)
    const bad = await sluice('dashboard', '--redis', redisUrl, '--allowed-host', 'http://x/')
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('--allowed-host')
  })

  it('exits 2 within its timeout when Redis cannot be reached: refused, or silent', async () => {
    const refused = await sluice('dashboard', '--redis', 'redis://127.0.0.1:1', '--port', '0')
    expect(refused.code).toBe(2)
    expect(refused.stdout).toBe('')
    expect(refused.stderr).toMatch(/^ERR_SLUICE_STORE: Cannot reach Redis at redis:\/\/127\.0\.0\.1:1: /)
    // A server that accepts the connection and never answers.
    const silent: Server = createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const port = (silent.address() as { port: number }).port
    const hung = await sluice(
      'dashboard',
      '--redis',
      `redis://127.0.0.1:${port}`,
      '--table',
      'gw',
      '--port',
      '0',
      '--timeout',
      '500',
    )
    silent.close()
    expect(hung.code).toBe(2)
    expect(hung.stdout).toBe('')
    expect(hung.stderr).toMatch(/^ERR_SLUICE_STORE/)
  })

  it.each([
    [
      'a port that is not a number',
      ['--port', 'http'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option --port: "http"; expected an integer from 0 to 65535.',
    ],
    ['a port out of range', ['--port', '70000'], 'ERR_SLUICE_INVALID_OPTION: Invalid option --port: "70000"'],
    ['an unknown flag', ['--prot', '8080'], 'ERR_SLUICE_INVALID_OPTION: Invalid option --prot'],
    [
      'an unknown access',
      ['--access', 'admin'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option --access: "admin"; expected read or write.',
    ],
    ['no --redis', null, 'ERR_SLUICE_INVALID_OPTION: Invalid option --redis: undefined'],
    ['a table name with braces', ['--table', 'a{b}'], 'ERR_SLUICE_INVALID_OPTION: Invalid option --table'],
    [
      'a table named twice',
      ['--table', 'gw', '--table', 'gw'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option --table: "gw"; expected each table named once.',
    ],
    ['an argument', ['now'], 'ERR_SLUICE_INVALID_OPTION: Invalid option dashboard: "now"'],
  ])('%s: exit 1, the code on stderr, before Redis is asked', async (_, args, message) => {
    // An unreachable Redis: invalid input is found first.
    const result = await sluice(
      'dashboard',
      ...(args ?? []),
      ...(args === null ? [] : ['--redis', 'redis://127.0.0.1:1']),
    )
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr.startsWith(message)).toBe(true)
  })

  it('exits 1 when its port is taken', async () => {
    const taken: Server = createServer(() => {})
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const port = (taken.address() as { port: number }).port
    const result = await sluice('dashboard', '--redis', redisUrl, '--port', String(port), '--table', 'gw')
    taken.close()
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `ERR_SLUICE_INVALID_OPTION: Invalid option --port: ${port}; expected a port free to listen on at 127.0.0.1 (EADDRINUSE).\n`,
    )
  })

  it('prints its help, and is listed in the command help', async () => {
    const help = await sluice('dashboard', '--help')
    expect(help.code).toBe(0)
    expect(help.stdout).toContain('--access read|write')
    expect(help.stdout).toContain('--allowed-host NAME')
    const usage = await sluice('--help')
    expect(usage.stdout).toContain('  dashboard   serve the live dashboard')
  })
})
