import { ErrorCode, InvalidOptionError, ipKey, type KeySpec, SluiceError } from '@sluice/core'
import type { KeyOptions, KeyResult, RequestView } from '@sluice/core/http'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileKey } from '../src/http/keys/keys.ts'

interface Req {
  ip?: string
  route?: string
  headers?: Record<string, string | string[] | undefined>
  a?: string | null
  b?: string | null
  c?: string | null
}

const view: RequestView<Req> = {
  ip: (req) => req.ip,
  route: (req) => req.route ?? '',
  header: (req, name) => req.headers?.[name],
}

/** A key built by synchronous parts, which answer in the same tick (never a promise). */
const key = (spec: KeySpec<Req>, req: Req, options?: KeyOptions): KeyResult =>
  compileKey(spec, view, options)(req) as KeyResult

const ok = (k: string): KeyResult => ({ ok: true, key: k })

/** Reads a key back into its parts: `\\x` is an escaped x, `\\,` splits values of one part, `:` splits parts. */
function decode(key: string): (string | string[])[] {
  const parts: (string | string[])[] = []
  let values: string[] = []
  let value = ''
  for (let i = 0; i < key.length; i++) {
    const c = key[i]!
    if (c === '\\') {
      const next = key[++i]!
      if (next === ',') {
        values.push(value)
        value = ''
      } else value += next
    } else if (c === ':') {
      values.push(value)
      parts.push(values.length === 1 ? values[0]! : values)
      values = []
      value = ''
    } else value += c
  }
  values.push(value)
  parts.push(values.length === 1 ? values[0]! : values)
  return parts
}

function optionError(fn: () => unknown): InvalidOptionError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect((error as InvalidOptionError).code).toBe('ERR_SLUICE_INVALID_OPTION')
    return error as InvalidOptionError
  }
  throw new Error('expected an InvalidOptionError')
}

describe('ipKey', () => {
  it('keeps IPv4 as it is', () => {
    expect(ipKey('203.0.113.7')).toBe('203.0.113.7')
    expect(ipKey('0.0.0.0')).toBe('0.0.0.0')
    expect(ipKey('255.255.255.255', 128)).toBe('255.255.255.255')
  })

  it('groups IPv6 by /56 by default, in canonical form', () => {
    expect(ipKey('2001:db8:ab:cd12::1')).toBe('2001:db8:ab:cd00::/56')
    expect(ipKey('2001:DB8:00AB:CD12:0000:0000:0000:0001')).toBe('2001:db8:ab:cd00::/56')
    expect(ipKey('2001:db8:ab:cdff:ffff:ffff:ffff:ffff')).toBe('2001:db8:ab:cd00::/56')
  })

  it('gives two addresses in one /56 the same key and different /56s different keys', () => {
    expect(ipKey('2001:db8:ab:cd00::1')).toBe(ipKey('2001:db8:ab:cdff:1234:5678:9abc:def0'))
    expect(ipKey('2001:db8:ab:cd00::1')).not.toBe(ipKey('2001:db8:ab:ce00::1'))
    expect(ipKey('2001:db8:ab:ce00::1')).toBe('2001:db8:ab:ce00::/56')
  })

  it('groups by another prefix length when asked', () => {
    expect(ipKey('2001:db8:ab:cd12::1', 64)).toBe('2001:db8:ab:cd12::/64')
    expect(ipKey('2001:db8:ab:cd12:ffff::', 64)).toBe('2001:db8:ab:cd12::/64')
    expect(ipKey('2001:db8:ab:cd13::1', 64)).toBe('2001:db8:ab:cd13::/64')
    expect(ipKey('2001:db8:ab:cd12::1', 48)).toBe('2001:db8:ab::/48')
    expect(ipKey('2001:db8:ab:cd12::1', 128)).toBe('2001:db8:ab:cd12::1/128')
    expect(ipKey('ffff::1', 1)).toBe('8000::/1')
    expect(ipKey('2001:db8:ab:cd12::1', 57)).toBe('2001:db8:ab:cd00::/57')
    expect(ipKey('2001:db8:ab:cd92::1', 57)).toBe('2001:db8:ab:cd80::/57')
  })

  it('compresses the longest run of zero groups, the first of equal runs', () => {
    expect(ipKey('2001:0:0:1:0:0:0:1', 128)).toBe('2001:0:0:1::1/128')
    expect(ipKey('2001:db8:0:0:1:0:0:1', 128)).toBe('2001:db8::1:0:0:1/128')
    expect(ipKey('2001:db8:1:1:1:1:1:1', 128)).toBe('2001:db8:1:1:1:1:1:1/128')
    expect(ipKey('2001:db8:0:1:1:1:1:1', 128)).toBe('2001:db8:0:1:1:1:1:1/128')
    expect(ipKey('::')).toBe('::/56')
    expect(ipKey('::1')).toBe('::/56')
    expect(ipKey('::1', 128)).toBe('::1/128')
  })

  it('reads IPv4-mapped IPv6 as the IPv4 address, dotted or hex', () => {
    expect(ipKey('::ffff:1.2.3.4')).toBe('1.2.3.4')
    expect(ipKey('::ffff:102:304')).toBe('1.2.3.4')
    expect(ipKey('::FFFF:0102:0304')).toBe('1.2.3.4')
    expect(ipKey('0:0:0:0:0:ffff:cb00:7107', 128)).toBe('203.0.113.7')
    // Not mapped: the ::ffff:0:0/96 test is exact.
    expect(ipKey('::fffe:102:304', 128)).toBe('::fffe:102:304/128')
    expect(ipKey('1::ffff:102:304', 128)).toBe('1::ffff:102:304/128')
  })

  it('drops a zone id: it names the server interface, not the client', () => {
    expect(ipKey('fe80::1%eth0')).toBe('fe80::/56')
    expect(ipKey('fe80::1%eth0', 128)).toBe('fe80::1/128')
    expect(ipKey('fe80::1%eth0', 128)).toBe(ipKey('fe80::1%eth1', 128))
  })

  it('answers undefined for anything that is not an IP address', () => {
    for (const bad of [
      '',
      'localhost',
      'unknown',
      '1.2.3',
      '01.2.3.4',
      '256.1.1.1',
      '1.2.3.4:8080',
      ' 1.2.3.4',
      '[::1]',
      '::1]:80/[',
      '1::2::3',
      'fe80::1%',
      '2001:db8::g',
      'x'.repeat(65_536),
      `${'1:'.repeat(30_000)}1`,
    ]) {
      expect(ipKey(bad), bad.slice(0, 20)).toBeUndefined()
    }
  })

  it('matches the WHATWG canonical form at /128 for every IPv6 address (property)', () => {
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        const canonical = new URL(`http://[${ip}]`).hostname.slice(1, -1)
        const result = ipKey(ip, 128)
        if (canonical.startsWith('::ffff:') && canonical.split(':').length === 5) {
          expect(result).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
        } else {
          expect(result).toBe(`${canonical}/128`)
        }
      }),
    )
  })

  it('is stable: a network key read again gives itself (property)', () => {
    fc.assert(
      fc.property(fc.ipV6(), fc.integer({ min: 1, max: 128 }), (ip, subnet) => {
        const first = ipKey(ip, subnet)!
        if (!first.includes('/')) return // read as IPv4
        expect(ipKey(first.slice(0, first.indexOf('/')), subnet)).toBe(first)
      }),
    )
  })

  it('rejects a bad prefix length, naming ipv6Subnet', () => {
    for (const bad of [0, 129, -1, 56.5, Number.NaN, Number.POSITIVE_INFINITY, '56', null]) {
      const error = optionError(() => ipKey('2001:db8::1', bad as number))
      expect(error.option).toBe('ipv6Subnet')
      expect(error.value).toBe(bad)
    }
  })
})

describe('compileKey parts', () => {
  it("'ip' alone is the address key as is", () => {
    expect(key('ip', { ip: '203.0.113.7' })).toEqual(ok('203.0.113.7'))
    expect(key('ip', { ip: '2001:db8:ab:cd12::1' })).toEqual(ok('2001:db8:ab:cd00::/56'))
    expect(key('ip', { ip: '2001:db8:ab:cd12::1' }, { ipv6Subnet: 64 })).toEqual(ok('2001:db8:ab:cd12::/64'))
    expect(key('ip', { ip: '::ffff:203.0.113.7' })).toEqual(ok('203.0.113.7'))
  })

  it("'route' alone is the view's route as is", () => {
    expect(key('route', { route: 'POST /pay/:id' })).toEqual(ok('POST /pay/:id'))
  })

  it('reads a header by its lower-case name', () => {
    expect(key({ header: 'X-Channel' }, { headers: { 'x-channel': 'ALIPAY' } })).toEqual(ok('ALIPAY'))
    expect(key({ header: 'x-channel' }, { headers: { 'x-channel': 'ALIPAY' } })).toEqual(ok('ALIPAY'))
  })

  it('reads several headers, one part each, in order', () => {
    const req = { route: 'POST /pay', headers: { 'x-channel': 'ALIPAY', 'x-biz-type': 'PAYMENT' } }
    expect(key({ header: ['X-Channel', 'x-biz-type'] }, req)).toEqual(ok('ALIPAY:PAYMENT'))
    expect(key(['route', { header: ['x-channel', 'x-biz-type'] }], req)).toEqual(
      ok('POST /pay:ALIPAY:PAYMENT'),
    )
  })

  it('joins a header sent several times so it never reads as one value', () => {
    const spec = { header: 'x-tenant' }
    expect(key(spec, { headers: { 'x-tenant': ['a', 'b'] } })).toEqual(ok('a\\,b'))
    expect(key(spec, { headers: { 'x-tenant': 'a,b' } })).toEqual(ok('a,b'))
    expect(key(spec, { headers: { 'x-tenant': 'a\\,b' } })).toEqual(ok('a\\\\,b'))
    expect(key(spec, { headers: { 'x-tenant': ['a:b', 'c'] } })).toEqual(ok('a\\:b\\,c'))
    expect(key(spec, { headers: { 'x-tenant': ['', ''] } })).toEqual(ok('\\,'))
    // One value sent once is that value.
    expect(key(spec, { headers: { 'x-tenant': ['a'] } })).toEqual(ok('a'))
  })

  it('takes a function part as its string', () => {
    expect(key((req) => req.a, { a: 'tenant-1' })).toEqual(ok('tenant-1'))
    expect(key((req) => req.a, { a: 'x:y' })).toEqual(ok('x:y'))
    expect(key(['ip', (req) => req.a], { ip: '10.0.0.1', a: 'tenant-1' })).toEqual(ok('10.0.0.1:tenant-1'))
  })

  it('escapes \\ and : inside values of a key of several parts', () => {
    expect(key(['ip', 'route'], { ip: '2001:db8:ab:cd12::1', route: 'POST /pay/:id' })).toEqual(
      ok('2001\\:db8\\:ab\\:cd00\\:\\:/56:POST /pay/\\:id'),
    )
    expect(key([(req) => req.a, (req) => req.b], { a: 'a\\', b: 'b' })).toEqual(ok('a\\\\:b'))
  })

  it('keeps lists of values apart that a plain join would merge', () => {
    const two = compileKey<Req>([(req) => req.a, (req) => req.b], view)
    expect(two({ a: 'a:b', b: 'c' })).not.toEqual(two({ a: 'a', b: 'b:c' }))
    expect(two({ a: 'a\\', b: 'b' })).not.toEqual(two({ a: 'a', b: '\\b' }))
    expect(two({ a: 'a\\:', b: 'b' })).not.toEqual(two({ a: 'a\\', b: ':b' }))
    const headerAndFn = compileKey<Req>([{ header: 'x-h' }, (req) => req.a], view)
    expect(headerAndFn({ headers: { 'x-h': ['p', 'q'] }, a: 'r' })).not.toEqual(
      headerAndFn({ headers: { 'x-h': 'p\\,q' }, a: 'r' }),
    )
  })

  it('never gives two different lists of values the same key (property)', () => {
    // A small alphabet rich in the characters that matter makes near-collisions common.
    const text = fc.string({ unit: fc.constantFrom('a', ':', '\\', ',', 'b'), minLength: 1, maxLength: 6 })
    const several = fc.array(fc.string({ unit: fc.constantFrom('a', ':', '\\', ','), maxLength: 4 }), {
      minLength: 2,
      maxLength: 3,
    })
    const tuple = fc.tuple(fc.oneof(text, several), text, text)
    const build = compileKey<Req>([{ header: 'x-h' }, (req) => req.a, (req) => req.b], view)
    const keyOf = ([h, a, b]: [string | string[], string, string]) => {
      const result = build({ headers: { 'x-h': h }, a, b }) as KeyResult
      if (!result.ok) throw new Error('expected a key')
      return result.key
    }
    // Every key reads back as exactly the values it was built from: that is injectivity.
    fc.assert(
      fc.property(tuple, (x) => {
        expect(decode(keyOf(x))).toEqual(x)
      }),
      { numRuns: 2000 },
    )
    fc.assert(
      fc.property(tuple, tuple, (x, y) => {
        fc.pre(JSON.stringify(x) !== JSON.stringify(y))
        expect(keyOf(x)).not.toBe(keyOf(y))
      }),
      { numRuns: 2000 },
    )
  })

  it('never gives two different single header values the same key (property)', () => {
    const value = fc.oneof(
      fc.string({ unit: fc.constantFrom('a', ':', '\\', ','), minLength: 1, maxLength: 6 }),
      fc.array(fc.string({ unit: fc.constantFrom('a', ':', '\\', ','), maxLength: 3 }), {
        minLength: 2,
        maxLength: 3,
      }),
    )
    const build = compileKey<Req>({ header: 'x-h' }, view)
    const keyOf = (h: string | string[]) => (build({ headers: { 'x-h': h } }) as { key: string }).key
    fc.assert(
      fc.property(value, value, (x, y) => {
        fc.pre(JSON.stringify(x) !== JSON.stringify(y))
        expect(keyOf(x)).not.toBe(keyOf(y))
      }),
      { numRuns: 2000 },
    )
  })

  it('handles a hostile 64 KB header in linear time', () => {
    const big = ':\\'.repeat(32_768)
    const build = compileKey<Req>(['ip', { header: 'x-h' }], view)
    const result = build({ ip: '10.0.0.1', headers: { 'x-h': big } }) as KeyResult
    expect(result.ok).toBe(true)
    expect((result as { key: string }).key.length).toBe('10.0.0.1:'.length + 2 * big.length)
    const many = build({ ip: '10.0.0.1', headers: { 'x-h': Array.from({ length: 10_000 }, () => 'a:b') } })
    expect((many as { key: string }).key.length).toBe('10.0.0.1:'.length + 10_000 * 4 + 9_999 * 2)
  })
})

describe('compileKey missing parts', () => {
  const absent: [string, KeySpec<Req>, Req][] = [
    ['header x-channel', { header: 'x-channel' }, {}],
    ['header x-channel', { header: 'x-channel' }, { headers: { 'x-channel': '' } }],
    ['header x-channel', { header: 'x-channel' }, { headers: { 'x-channel': [] } }],
    ['header x-channel', { header: 'x-channel' }, { headers: { 'x-channel': [''] } }],
    ['ip', 'ip', {}],
    ['ip', 'ip', { ip: '' }],
    ['ip', 'ip', { ip: 'unix:/tmp/socket' }],
    ['route', 'route', { route: '' }],
    [
      'key function tenant',
      function tenant(req: Req) {
        return req.a
      },
      {},
    ],
    ['key function #1', (req: Req) => req.a, { a: null }],
    ['key function #1', (req: Req) => req.a, { a: '' }],
  ]

  /** What a client is told: the header it must send, else a plain sentence (never "key function #1"). */
  const detailOf = (missing: string) =>
    missing.startsWith('header ')
      ? `This request needs the ${missing.slice('header '.length)} header.`
      : 'This request cannot be identified for rate limiting.'

  it.each(absent)('rejects by default when %s is absent', (missing, spec, req) => {
    expect(key(spec, req)).toEqual({ ok: false, missing, detail: detailOf(missing), policy: 'reject' })
  })

  it.each(absent)('skips when asked and %s is absent', (missing, spec, req) => {
    expect(key(spec, req, { onMissingKey: 'skip' })).toEqual({
      ok: false,
      missing,
      detail: detailOf(missing),
      policy: 'skip',
    })
  })

  it.each(absent)('uses the default when %s is absent', (_missing, spec, req) => {
    expect(key(spec, req, { onMissingKey: { default: 'none' } })).toEqual(ok('none'))
  })

  it('never builds the string "undefined" or "null"', () => {
    const spec: KeySpec<Req> = ['ip', 'route', { header: 'x-h' }, (req) => req.a, (req) => req.b]
    for (const onMissing of ['reject', 'skip', { default: '-' }] as const) {
      const result = key(spec, { a: undefined, b: null }, { onMissingKey: onMissing })
      expect(JSON.stringify(result)).not.toMatch(/undefined|null/)
    }
    expect(key(spec, { a: undefined, b: null }, { onMissingKey: { default: '-' } })).toEqual(ok('-:-:-:-:-'))
  })

  it('substitutes the default for the absent part only, escaped like a value', () => {
    const spec: KeySpec<Req> = ['route', { header: ['x-biz-type', 'x-channel'] }]
    const req = { route: 'POST /pay', headers: { 'x-biz-type': 'PAYMENT' } }
    expect(key(spec, req, { onMissingKey: { default: 'default' } })).toEqual(ok('POST /pay:PAYMENT:default'))
    expect(key(spec, req, { onMissingKey: { default: 'n:a' } })).toEqual(ok('POST /pay:PAYMENT:n\\:a'))
    expect(key({ header: 'x-h' }, {}, { onMissingKey: { default: 'n:a' } })).toEqual(ok('n\\:a'))
    expect(key((r: Req) => r.a, {}, { onMissingKey: { default: 'n:a' } })).toEqual(ok('n:a'))
  })

  it('reports the first absent part', () => {
    const spec: KeySpec<Req> = ['route', { header: ['x-biz-type', 'x-channel'] }]
    expect(key(spec, { route: 'GET /', headers: {} })).toEqual({
      ok: false,
      missing: 'header x-biz-type',
      detail: 'This request needs the x-biz-type header.',
      policy: 'reject',
    })
    expect(key(spec, { route: 'GET /', headers: { 'x-biz-type': 'P' } })).toEqual({
      ok: false,
      missing: 'header x-channel',
      detail: 'This request needs the x-channel header.',
      policy: 'reject',
    })
  })

  it('throws INVALID_KEY when a function part returns something not a string', () => {
    const build = compileKey<Req>(() => 42 as unknown as string, view)
    expect(() => build({})).toThrow(SluiceError)
    try {
      build({})
    } catch (error) {
      expect((error as SluiceError).code).toBe(ErrorCode.INVALID_KEY)
      expect((error as Error).message).toBe(
        'The key function #1 returned 42; expected a string, undefined or null.',
      )
    }
  })
})

describe('compileKey options', () => {
  it('lets an explicit undefined keep the defaults', () => {
    expect(
      key('ip', { ip: '2001:db8:ab:cd12::1' }, { ipv6Subnet: undefined, onMissingKey: undefined }),
    ).toEqual(ok('2001:db8:ab:cd00::/56'))
    expect(key('ip', {}, { ipv6Subnet: undefined, onMissingKey: undefined })).toEqual({
      ok: false,
      missing: 'ip',
      detail: 'This request cannot be identified for rate limiting.',
      policy: 'reject',
    })
  })

  it.each([
    [undefined],
    [null],
    [[]],
    ['IP'],
    ['url'],
    [42],
    [{ header: [] }],
    [{ header: '' }],
    [{ header: 'x channel' }],
    [{ header: 'x-h\n' }],
    [{ header: [1] }],
    [{ header: ['x-a', null] }],
    [{ header: 42 }],
    [{ headers: 'x-h' }],
    [{ header: 'x-h', default: 'y' }],
    [{}],
    [[['ip']]],
    [['ip', null]],
    [['ip', 'nope']],
  ])('rejects the key spec %j, naming key', (spec) => {
    expect(optionError(() => compileKey(spec as unknown as KeySpec<Req>, view)).option).toBe('key')
  })

  it.each([[0], [129], [-56], [56.5], [Number.NaN], ['56'], [null]])(
    'rejects ipv6Subnet %j',
    (ipv6Subnet) => {
      const error = optionError(() => compileKey('ip', view, { ipv6Subnet: ipv6Subnet as number }))
      expect(error.option).toBe('ipv6Subnet')
      expect(error.value).toBe(ipv6Subnet)
    },
  )

  it.each([
    ['allow'],
    ['Reject'],
    [null],
    [{}],
    [{ default: '' }],
    [{ default: 1 }],
    [{ default: 'x', also: 'y' }],
    [['skip']],
    [true],
  ])('rejects onMissingKey %j', (onMissing) => {
    const error = optionError(() => compileKey('ip', view, { onMissingKey: onMissing as 'skip' }))
    expect(error.option).toBe('onMissingKey')
    expect(error.value).toBe(onMissing)
  })

  it('rejects an unknown option, naming it', () => {
    const error = optionError(() => compileKey('ip', view, { ipv6subnet: 64 } as KeyOptions))
    expect(error.option).toBe('compileKey.ipv6subnet')
  })

  it('rejects a view without ip, route and header functions', () => {
    const error = optionError(() => compileKey('ip', { ip: () => undefined } as unknown as RequestView<Req>))
    expect(error.option).toBe('view')
  })

  it('explains the problem in the message', () => {
    expect(optionError(() => compileKey({ header: 'x channel' }, view)).message).toBe(
      'Invalid option key: "x channel"; expected a header name (letters, digits and !#$%&\'*+-.^_`|~).',
    )
    expect(optionError(() => compileKey('ip', view, { ipv6Subnet: 0 })).message).toBe(
      'Invalid option ipv6Subnet: 0; expected an integer from 1 to 128.',
    )
  })
})
