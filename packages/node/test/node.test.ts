/**
 * What only node:http has: the socket's address and `trustProxy` as a list walked from the right of
 * `X-Forwarded-For`, `true` refused; the `route` option `key: 'route'` needs; `withRateLimit` around a
 * listener and the connect-style `rateLimit(o)(req, res, next)` with its errors. The shared behaviour is the
 * contract suite's.
 */
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ErrorCode, fixedWindow, MemoryStore } from '@sluice/core'
import { type NodeRateLimitOptions, rateLimit, withRateLimit } from '@sluice/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { catchError } from '../../core/test/support.ts'

const ten = [fixedWindow({ limit: 10, windowMs: 60_000 })]
const one = [fixedWindow({ limit: 1, windowMs: 60_000 })]
const store = () => new MemoryStore({ clock: () => 1_000_020_000, sweepIntervalMs: 0 })

const open: (() => Promise<void>)[] = []
afterEach(async () => {
  vi.restoreAllMocks()
  for (const close of open.splice(0)) await close()
})

async function listen(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(listener)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  open.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const ok = (req: IncomingMessage, res: ServerResponse) => {
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ remaining: req.rateLimit?.remaining ?? null }))
}

/** Sends a GET whose X-Forwarded-For may be several header lines; answers the status. */
function get(url: string, forwardedFor?: string | string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }
    const req = request(url, { headers, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode!))
    })
    req.on('error', reject)
    req.end()
  })
}

/** Units of a 10-unit rule a key has used: `peek` answers as if it counted one more. */
async function used(limit: { limiter: { peek(key: string): Promise<{ remaining: number }> } }, key: string) {
  return 9 - (await limit.limiter.peek(key)).remaining
}

describe('the client address', () => {
  it("is the socket's: X-Forwarded-For is never read without trustProxy", async () => {
    const listener = withRateLimit({ rules: ten, store: store() }, ok)
    const url = await listen(listener)
    await get(url, '203.0.113.9')
    expect(await used(listener, '127.0.0.1')).toBe(1)
    expect(await used(listener, '203.0.113.9')).toBe(0)
  })

  it('walks X-Forwarded-For from the right to the first hop that is not a trusted proxy, across header lines', async () => {
    const listener = withRateLimit(
      { rules: ten, store: store(), trustProxy: ['127.0.0.1', '10.0.0.0/8'] },
      ok,
    )
    const url = await listen(listener)
    // The client wrote 198.51.100.7 itself; the first proxy saw 203.0.113.9; 10.1.2.3 is a trusted proxy.
    expect(await get(url, '198.51.100.7, 203.0.113.9, 10.1.2.3')).toBe(200)
    expect(await get(url, ['198.51.100.7, 203.0.113.9', '10.1.2.3'])).toBe(200)
    // Every hop trusted: the leftmost is the client.
    expect(await get(url, '10.0.0.1, 10.0.0.2')).toBe(200)
    // IPv6 clients are grouped by subnet as usual.
    expect(await get(url, '2001:db8:0:1::1')).toBe(200)
    expect(await used(listener, '203.0.113.9')).toBe(2)
    expect(await used(listener, '198.51.100.7')).toBe(0)
    expect(await used(listener, '10.0.0.1')).toBe(1)
    expect(await used(listener, '2001:db8::/56')).toBe(1)
    expect(await used(listener, '127.0.0.1')).toBe(0)
    // What is not an address is the client's own say, never trusted: 'ip' cannot key it.
    expect(await get(url, 'localhost, 10.1.2.3')).toBe(400)
  })

  it('reads nothing from X-Forwarded-For when the socket is not a trusted proxy', async () => {
    const listener = withRateLimit({ rules: ten, store: store(), trustProxy: ['10.0.0.0/8'] }, ok)
    const url = await listen(listener)
    await get(url, '203.0.113.9')
    expect(await used(listener, '127.0.0.1')).toBe(1)
  })

  it('refuses trustProxy: true with a coded error saying why, and entries that are not addresses or CIDRs', () => {
    const refused = catchError(() => rateLimit({ rules: ten, trustProxy: true as unknown as string[] }))
    expect(refused).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'rateLimit.trustProxy' })
    expect((refused as Error).message).toContain('true is refused')
    expect((refused as Error).message).toContain("such as ['127.0.0.1', '10.0.0.0/8']")
    const cases: [unknown, string][] = [
      ['10.0.0.0/8', 'rateLimit.trustProxy'],
      [['10.0.0.0/33'], 'rateLimit.trustProxy[0]'],
      [['127.0.0.1', 'proxy.internal'], 'rateLimit.trustProxy[1]'],
      [['::1/129'], 'rateLimit.trustProxy[0]'],
      [[42], 'rateLimit.trustProxy[0]'],
    ]
    for (const [trustProxy, option] of cases) {
      expect(
        catchError(() => rateLimit({ rules: ten, trustProxy } as NodeRateLimitOptions)),
        option,
      ).toMatchObject({
        code: ErrorCode.INVALID_OPTION,
        option,
      })
    }
  })
})

describe('a trustProxy list that trusts every address', () => {
  it("refuses ['0.0.0.0/0'], ['::/0'] and any list that adds up to every address, as it refuses true", () => {
    const everyone: string[][] = [
      ['0.0.0.0/0'],
      ['::/0'],
      ['10.0.0.0/8', '::/0'],
      ['0.0.0.0/1', '128.0.0.0/1'],
      ['::ffff:0.0.0.0/96'],
      ['::ffff:0:0/97', '128.0.0.0/1'],
      ['::/1', '8000::/1'],
      ['::/1'], // holds ::ffff:0:0/96, where IPv4 addresses are matched too
      ['2001:db8::1', '0.0.0.0/0'],
    ]
    for (const trustProxy of everyone) {
      for (const build of [
        () => rateLimit({ rules: ten, trustProxy }),
        () => withRateLimit({ rules: ten, trustProxy }, ok),
      ]) {
        const refused = catchError(build)
        expect(refused, trustProxy.join(' ')).toMatchObject({
          code: ErrorCode.INVALID_OPTION,
          option: 'rateLimit.trustProxy',
        })
        expect((refused as Error).message).toMatch(
          /A list that trusts every IPv[46] address is refused: it would believe every X-Forwarded-For entry/,
        )
      }
    }
  })

  it('takes lists that leave some addresses out, however wide', async () => {
    for (const trustProxy of [
      ['0.0.0.0/1'],
      ['8000::/1'],
      ['::ffff:0:0/97'],
      ['10.0.0.0/8', 'fd00::/8', '127.0.0.1'],
      [],
    ]) {
      expect(() => rateLimit({ rules: ten, trustProxy }), trustProxy.join(' ')).not.toThrow()
    }
    // Half of IPv4 trusted, the loopback proxy among it: the forwarded address is read, and is one client.
    const listener = withRateLimit({ rules: ten, store: store(), trustProxy: ['0.0.0.0/1'] }, ok)
    const url = await listen(listener)
    await get(url, '203.0.113.9')
    await get(url, '198.51.100.4')
    expect(await used(listener, '203.0.113.9')).toBe(1)
    expect(await used(listener, '198.51.100.4')).toBe(1)
    expect(await used(listener, '127.0.0.1')).toBe(0)
  })
})

describe("key: 'route'", () => {
  it('is refused without a route option, alone or in a list', () => {
    for (const key of ['route', ['ip', 'route']] as const) {
      const error = catchError(() => rateLimit({ rules: ten, key }))
      expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'rateLimit.route' })
      expect((error as Error).message).toContain('node:http has no router')
    }
    expect(catchError(() => rateLimit({ rules: ten, route: '/users/:id' as never }))).toMatchObject({
      option: 'rateLimit.route',
    })
  })

  it("counts by the method and the template the route option names, never the URL's ids", async () => {
    const listener = withRateLimit(
      {
        rules: ten,
        store: store(),
        key: 'route',
        route: (req) => (req.url!.startsWith('/users/') ? '/users/:id' : '/'),
      },
      ok,
    )
    const url = await listen(listener)
    await get(`${url}/users/1`)
    await get(`${url}/users/2?x=1`)
    await get(url)
    expect(await used(listener, 'GET /users/:id')).toBe(2)
    expect(await used(listener, 'GET /')).toBe(1)
  })
})

describe('rateLimit(o)(req, res, next) and withRateLimit(o, handler)', () => {
  it('calls next() for an admitted request and answers a denied one itself, as Connect and Polka expect', async () => {
    const limit = rateLimit({ rules: one, store: store() })
    const nexts: unknown[] = []
    const url = await listen((req, res) =>
      limit(req, res, (error) => {
        nexts.push(error)
        ok(req, res)
      }),
    )
    const first = await fetch(url)
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ remaining: 0 })
    const denied = await fetch(url)
    expect(denied.status).toBe(429)
    expect(denied.headers.get('content-type')).toBe('application/problem+json')
    expect(denied.headers.get('retry-after')).toBe('60')
    expect(nexts).toEqual([undefined])
  })

  it('sends what a key function or onLimited throws to next(err)', async () => {
    const errors: unknown[] = []
    const next = (res: ServerResponse) => (error?: unknown) => {
      errors.push((error as Error | undefined)?.message)
      res.statusCode = error === undefined ? 200 : 500
      res.end()
    }
    const keyFails = rateLimit({
      rules: one,
      store: store(),
      key: () => {
        throw new Error('no tenant')
      },
    })
    const limitedFails = rateLimit({
      rules: one,
      store: store(),
      onLimited: async () => {
        throw new Error('log is down')
      },
    })
    const keyUrl = await listen((req, res) => keyFails(req, res, next(res)))
    const limitedUrl = await listen((req, res) => limitedFails(req, res, next(res)))
    expect(await get(keyUrl)).toBe(500)
    expect(await get(limitedUrl)).toBe(200)
    expect(await get(limitedUrl)).toBe(500)
    expect(errors).toEqual(['no tenant', undefined, 'log is down'])
  })

  it("answers 500 for an error before withRateLimit's handler, and reports it as a SluiceWarning", async () => {
    const warnings: string[] = []
    vi.spyOn(process, 'emitWarning').mockImplementation(((warning: string, type?: unknown) => {
      if (type === 'SluiceWarning') warnings.push(warning)
    }) as typeof process.emitWarning)
    const handler = vi.fn(ok)
    const url = await listen(
      withRateLimit(
        {
          rules: one,
          store: store(),
          key: () => {
            throw new Error('no tenant')
          },
        },
        handler,
      ),
    )
    expect(await get(url)).toBe(500)
    expect(handler).not.toHaveBeenCalled()
    expect(warnings).toEqual(['sluice: a request failed before its handler: Error: no tenant'])
  })
})
