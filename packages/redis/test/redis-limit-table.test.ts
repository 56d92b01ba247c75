/**
 * RedisLimitTable on a real redis-server, with every client library and major: processes that open one
 * table see each other's edits within a second, exactly; every change is audited; bad input is refused
 * before anything is written; hostile entry names stay hash fields; and a Redis that goes away, or comes
 * back without its data, never leaves a process without a table or rolls it back.
 */
import { hostname } from 'node:os'
import { ErrorCode, SluiceError, StoreError, slidingLog } from '@sluice/core'
import { RedisLimitTable } from '@sluice/redis'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { ALL_CLIENT_KINDS, CLIENT_KINDS, clientOf, closeClients } from '../../../test/harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer
const open: RedisLimitTable[] = []
let run = 0

beforeAll(async () => {
  server = await startRedis()
})

afterEach(async () => {
  for (const table of open.splice(0)) await table.close()
  vi.restoreAllMocks()
})

afterAll(async () => {
  await closeClients()
  await stopAll()
})

const tps = (limit: number) => ({ kind: 'slidingLog', limit, windowMs: 1000 }) as const

/** Resolves once `check` holds, polling every 10 ms; fails after `ms`. */
async function within(ms: number, check: () => boolean, what: string): Promise<number> {
  const started = performance.now()
  while (!check()) {
    if (performance.now() - started > ms) throw new Error(`not within ${ms} ms: ${what}`)
    await sleep(10)
  }
  return performance.now() - started
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

type Kind = (typeof ALL_CLIENT_KINDS)[number]

async function openTable(kind: Kind, name: string, extra: { checkMs?: number } = {}) {
  const table = await RedisLimitTable.open({ client: await clientOf(kind, server), name, ...extra })
  open.push(table)
  return table
}

/** The table's entries as JSON, in entry order (Redis hands a hash back in its own order). */
const json = (table: RedisLimitTable) =>
  JSON.stringify([...table.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))

describe.each(ALL_CLIENT_KINDS)('RedisLimitTable (%s)', (kind) => {
  it('two processes: an edit in one reaches the other within a second, exactly, and is audited', async () => {
    const name = `t${run++}`
    // The version check is off: the edit must arrive through pub/sub.
    const a = await openTable(kind, name, { checkMs: 0 })
    const b = await openTable(kind, name, { checkMs: 0 })
    expect(a.version).toBe(0)
    expect(b.get('PAYMENT:ALIPAY')).toBe(null)
    const heard: [string, number][] = []
    b.onChange((entry, version) => heard.push([entry, version]))

    await a.set('PAYMENT:ALIPAY', [tps(5)], { actor: 'ops:alice' })
    expect(a.version).toBe(1)
    await within(1000, () => b.version === 1, 'b sees version 1')
    expect(b.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 5, windowMs: 1000 })])
    // The same frozen list per call, so the store's plan cache holds.
    expect(b.get('PAYMENT:ALIPAY')).toBe(b.get('PAYMENT:ALIPAY'))

    await b.set('*', [tps(1)])
    await b.set('REFUND:ALIPAY', null)
    await a.delete('PAYMENT:ALIPAY', { actor: 'ops:bob' })
    await within(1000, () => a.version === 4 && b.version === 4, 'both at version 4')
    expect(json(a)).toBe(json(b))
    expect(a.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 1, windowMs: 1000 })])
    expect(a.get('REFUND:ALIPAY')).toBe(null)
    expect(heard).toEqual([
      ['PAYMENT:ALIPAY', 1],
      ['*', 2],
      ['REFUND:ALIPAY', 3],
      ['PAYMENT:ALIPAY', 4],
    ])

    const audit = await b.audit(10)
    expect(audit.map(({ id: _, time: __, ...r }) => r)).toEqual([
      {
        version: 4,
        change: 'delete',
        entry: 'PAYMENT:ALIPAY',
        before: [tps(5)],
        actor: 'ops:bob',
      },
      {
        version: 3,
        change: 'set',
        entry: 'REFUND:ALIPAY',
        after: null,
        actor: `${process.pid}@${hostname()}`,
      },
      { version: 2, change: 'set', entry: '*', after: [tps(1)], actor: `${process.pid}@${hostname()}` },
      { version: 1, change: 'set', entry: 'PAYMENT:ALIPAY', after: [tps(5)], actor: 'ops:alice' },
    ])
    expect(Math.abs(audit[0]!.time - Date.now())).toBeLessThan(5000)

    // Deleting an entry the table does not hold is no change.
    await a.delete('never-there')
    expect(a.version).toBe(4)
    expect(await a.audit(10)).toHaveLength(4)
  })

  it('a process that opens later reads the table as it stands', async () => {
    const name = `t${run++}`
    const a = await openTable(kind, name)
    await a.set('x', [tps(2), { kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }])
    await a.set('y', null)
    const b = await openTable(kind, name)
    expect(b.version).toBe(2)
    expect(json(b)).toBe(json(a))
  })
})

describe.each(CLIENT_KINDS)('RedisLimitTable input checks (%s)', (kind) => {
  const BAD: [string, string, unknown, string][] = [
    ['an invalid spec', 'a', [tps(0)], ErrorCode.INVALID_OPTION],
    [
      'an unknown field',
      'a',
      [{ kind: 'slidingLog', limit: 1, windowMs: 1000, burst: 3 }],
      ErrorCode.INVALID_OPTION,
    ],
    ['an unknown kind', 'a', [{ kind: 'gcra', limit: 1 }], ErrorCode.INVALID_SPEC],
    [
      'a huge entry (17 rules)',
      'a',
      Array.from({ length: 17 }, (_, i) => ({ ...tps(1), name: `r${i}` })),
      ErrorCode.TABLE_TOO_LARGE,
    ],
    ['a huge name in a spec', 'a', [{ ...tps(1), name: 'n'.repeat(100_000) }], ErrorCode.INVALID_OPTION],
    ['two rules sharing an identity', 'a', [tps(1), tps(2)], ErrorCode.DUPLICATE_RULE],
    ['a hostile entry name (line break)', 'a\nb', [tps(1)], ErrorCode.INVALID_ENTRY],
    ['a hostile entry name (NUL)', '\u0000', [tps(1)], ErrorCode.INVALID_ENTRY],
    ['a hostile entry name (1 MB)', 'x'.repeat(1 << 20), [tps(1)], ErrorCode.INVALID_ENTRY],
  ]

  it.each(BAD)(
    '%s: a coded error, nothing written, no process sees anything',
    async (_, entry, value, code) => {
      const name = `bad${run++}`
      const a = await openTable(kind, name, { checkMs: 50 })
      const b = await openTable(kind, name, { checkMs: 50 })
      await a.set('a', [tps(3)])
      await within(1000, () => b.version === 1, 'b at version 1')
      const before = await server.cli('HGETALL', `sluice:table:{${name}}`)
      const heard: string[] = []
      b.onChange((e) => heard.push(e))
      const error = await rejection(a.set(entry, value as never))
      expect(error).toBeInstanceOf(SluiceError)
      expect(error).toMatchObject({ code })
      await sleep(150)
      expect(await server.cli('HGETALL', `sluice:table:{${name}}`)).toBe(before)
      expect(await server.cli('GET', `sluice:table:{${name}}:version`)).toBe('1\n')
      expect(Number(await server.cli('XLEN', `sluice:table:{${name}}:audit`))).toBe(1)
      expect([a.version, b.version]).toEqual([1, 1])
      expect(heard).toEqual([])
      expect(json(b)).toBe('[["a",[{"kind":"slidingLog","limit":3,"windowMs":1000}]]]')
    },
  )

  it('keeps hostile but valid entry names as hash fields: no key is made or reached from them', async () => {
    const name = `hostile${run++}`
    const a = await openTable(kind, name)
    const b = await openTable(kind, name)
    const names = ['{x}', `}:version`, `sluice:table:{${name}}:audit`, '%7B', 'ключ 🔑', '*x', ' ', '"\\']
    for (const [i, entry] of names.entries()) await a.set(entry, [tps(i + 1)])
    await within(1000, () => b.version === names.length, 'b sees every entry')
    for (const [i, entry] of names.entries())
      expect(b.get(entry)).toEqual([slidingLog({ limit: i + 1, windowMs: 1000 })])
    const keys = (await server.cli('KEYS', `*${name}*`)).trim().split('\n').sort()
    expect(keys).toEqual([
      `sluice:table:{${name}}`,
      `sluice:table:{${name}}:audit`,
      `sluice:table:{${name}}:stamp`,
      `sluice:table:{${name}}:version`,
    ])
  })

  it('rejects bad options at open, naming them', async () => {
    const client = await clientOf(kind, server)
    for (const [options, option] of [
      [{ client, name: 'a{b}' }, 'RedisLimitTable.name'],
      [{ client, name: '' }, 'RedisLimitTable.name'],
      [{ client, name: 'a', prefix: 'a:b' }, 'RedisLimitTable.prefix'],
      [{ client, name: 'a', checkMs: -1 }, 'RedisLimitTable.checkMs'],
      [{ client, name: 'a', follow: 'yes' }, 'RedisLimitTable.follow'],
      [{ client, name: 'a', nmae: 'b' }, 'RedisLimitTable.nmae'],
      [{ client: {}, name: 'a' }, 'RedisLimitTable.client'],
    ] as const) {
      expect(await rejection(RedisLimitTable.open(options as never))).toMatchObject({
        code: ErrorCode.INVALID_OPTION,
        option,
      })
    }
  })
})

describe('RedisLimitTable on Valkey GLIDE', () => {
  it('refuses a GLIDE client at open, naming the option: it cannot follow the table on a duplicate', async () => {
    const client = await clientOf('glide', server)
    expect(await rejection(RedisLimitTable.open({ client, name: 'a' }))).toMatchObject({
      code: ErrorCode.INVALID_OPTION,
      option: 'RedisLimitTable.client',
    })
  })
})

describe.each(CLIENT_KINDS)('RedisLimitTable while Redis is away (%s)', (kind) => {
  it('keeps serving the last table; a Redis back without its data does not roll it back; it catches up on edits made meanwhile', async () => {
    const own = await startRedis()
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const tableOn = async (checkMs = 100) => {
      const t = await RedisLimitTable.open({ client: await clientOf(kind, own), name: 'gw', checkMs })
      open.push(t)
      return t
    }
    const a = await tableOn()
    const b = await tableOn()
    await a.set('PAYMENT:ALIPAY', [tps(5)])
    await a.set('PAYMENT:WECHAT', [tps(3)])
    await a.set('REFUND:ALIPAY', null)
    await within(1000, () => b.version === 3, 'b at version 3')
    const held = json(a)

    await own.kill()
    // Still deciding on the last table, synchronously, without throwing.
    await sleep(300)
    for (const t of [a, b]) {
      expect(t.version).toBe(3)
      expect(json(t)).toBe(held)
      expect(t.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 5, windowMs: 1000 })])
    }
    const failed = await rejection(a.set('PAYMENT:ALIPAY', [tps(9)]))
    expect(failed).toBeInstanceOf(StoreError)
    expect(a.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 5, windowMs: 1000 })])

    // Redis comes back empty (no persistence). An operator's tool, fresh, writes an edit at once.
    await own.start()
    const cli = await RedisLimitTable.open({ client: await clientOf(kind, own), name: 'gw', follow: false })
    open.push(cli)
    await cli.set('PAYMENT:WECHAT', [tps(7)], { actor: 'ops' })

    // Neither process rolls back; each warns, and the table is written back with the edit merged in.
    await within(5000, () => a.version >= 4 && b.version >= 4 && a.version === b.version, 'both past 3')
    for (const t of [a, b]) {
      expect(t.get('PAYMENT:ALIPAY')).toEqual([slidingLog({ limit: 5, windowMs: 1000 })])
      expect(t.get('REFUND:ALIPAY')).toBe(null)
      expect(t.get('PAYMENT:WECHAT')).toEqual([slidingLog({ limit: 7, windowMs: 1000 })])
    }
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('Limit table "gw" in Redis is at version'), {
      code: 'SLUICE_TABLE_BEHIND',
    })
    const version = a.version
    // The next change carries the version on from the highest seen.
    await b.set('PAYMENT:UNIONPAY', [tps(2)])
    expect(b.version).toBe(version + 1)
    await within(1000, () => a.version === version + 1, 'a follows')
    const fresh = await RedisLimitTable.open({ client: await clientOf(kind, own), name: 'gw', follow: false })
    open.push(fresh)
    expect(json(fresh)).toBe(json(a))
    expect((await fresh.audit(1))[0]).toMatchObject({ version: version + 1, entry: 'PAYMENT:UNIONPAY' })
  })
})

describe('RedisLimitTable under a hostile or failing Redis (issue 25)', () => {
  const key = (name: string) => `sluice:table:{${name}}`
  const LIFTED = '[{"kind":"slidingLog","limit":1000000,"windowMs":1000}]'
  const on = async (
    redis: RedisServer,
    name: string,
    options: { checkMs?: number; follow?: boolean } = {},
  ) => {
    const t = await RedisLimitTable.open({ client: await clientOf('ioredis', redis), name, ...options })
    open.push(t)
    return t
  }
  const hash = async (redis: RedisServer, name: string) =>
    (await redis.cli('HGETALL', key(name))).trim().split('\n').filter(Boolean)
  /** An entry's limits, by entry name in order (Redis hands a hash back in its own order). */
  const table = (t: RedisLimitTable) =>
    Object.fromEntries(
      [...t.entries()]
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
        .map(([e, rules]) => [e, rules?.map((r) => (r as { limit?: number }).limit)]),
    )

  it('a forged pub/sub notice rewrites no table and nothing is written back into Redis', async () => {
    const name = `forged${run++}`
    const a = await on(server, name)
    const b = await on(server, name)
    await a.set('PAYMENT:ALIPAY', [tps(5)])
    await within(2000, () => b.version === 1, 'b at version 1')
    const before = await hash(server, name)
    // The next version with a lifted limit, an entry that does not exist, and a "read everything" notice.
    await server.cli('PUBLISH', `${key(name)}:changes`, `2\nPAYMENT:ALIPAY\n${LIFTED}`)
    await server.cli('PUBLISH', `${key(name)}:changes`, `2\nPAYMENT:EVIL\n${LIFTED}`)
    await server.cli('PUBLISH', `${key(name)}:changes`, '3\n\n')
    await sleep(1500)
    for (const t of [a, b]) {
      expect(t.version).toBe(1)
      expect(table(t)).toEqual({ 'PAYMENT:ALIPAY': [5] })
    }
    expect(await hash(server, name)).toEqual(before)
    expect((await a.audit(10)).map((r) => r.change)).toEqual(['set'])
  })

  it('refuses a bidi override or a zero-width character in an audit actor, and writes nothing (item 14)', async () => {
    const name = `actor${run++}`
    const a = await on(server, name)
    for (const actor of ['ops\u202Eeilla', 'ops\u200Balice', 'ops\u2066alice']) {
      const error = await rejection(a.set('PAYMENT:ALIPAY', [tps(5)], { actor }))
      expect(error).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'actor' })
      const refused = await rejection(a.delete('PAYMENT:ALIPAY', { actor }))
      expect(refused).toMatchObject({ code: ErrorCode.INVALID_OPTION, option: 'actor' })
    }
    expect(a.version).toBe(0)
    expect(await hash(server, name)).toEqual([])
    expect(await a.audit(10)).toEqual([])
    // A readable actor is taken as it is.
    await a.set('PAYMENT:ALIPAY', [tps(5)], { actor: 'ops:alice' })
    expect((await a.audit(1))[0]).toMatchObject({ version: 1, actor: 'ops:alice' })
  })

  it('a version of 2^53 - 1 in a notice, then an ordinary set: the set resolves and every process applies it', async () => {
    const name = `huge${run++}`
    const a = await on(server, name)
    const b = await on(server, name)
    await server.cli('PUBLISH', `${key(name)}:changes`, '9007199254740991\nA\nnull')
    await sleep(300)
    await a.set('A', [tps(2)])
    await within(2000, () => b.version === 1, 'b applies the set')
    expect(table(b)).toEqual({ A: [2] })
    await b.set('B', [tps(3)])
    await within(2000, () => a.version === 2, 'a applies the next set')
    const fresh = await on(server, name, { follow: false })
    expect(table(fresh)).toEqual({ A: [2], B: [3] })
    expect(await server.cli('GET', `${key(name)}:version`)).toBe('2\n')
    // A version at the bound in Redis itself: a set is refused, and nothing is written.
    await server.cli('SET', `${key(name)}:version`, '9007199254740991')
    const c = await on(server, name, { follow: false })
    expect(c.version).toBe(9007199254740991)
    expect(await rejection(c.set('C', [tps(1)]))).toBeInstanceOf(StoreError)
    expect(await server.cli('GET', `${key(name)}:version`)).toBe('9007199254740991\n')
    expect(await server.cli('HEXISTS', key(name), 'C')).toBe('0\n')
  })

  it('a Redis restarted from an older dump rolls no process back, and is brought back to their table', async () => {
    const own = await startRedis()
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const a = await on(own, 'gw', { checkMs: 100 })
    const b = await on(own, 'gw', { checkMs: 100 })
    await a.set('A', [tps(5)])
    await a.set('B', [tps(6)])
    await own.cli('SAVE')
    await a.set('A', [tps(50)])
    await a.delete('B')
    await b.set('C', [tps(7)])
    await within(2000, () => a.version === 5 && b.version === 5, 'both at version 5')
    await own.kill()
    await own.start()
    // The dump holds version 2: {A: 5, B: 6}.
    await sleep(3000)
    for (const t of [a, b]) {
      expect(t.version).toBe(5)
      expect(table(t)).toEqual({ A: [50], C: [7] })
    }
    const fresh = await on(own, 'gw', { follow: false })
    expect(table(fresh)).toEqual({ A: [50], C: [7] })
    expect(fresh.version).toBe(5)
    // The next edit lands on the newest table, everywhere.
    await fresh.set('D', [tps(1)])
    await within(2000, () => a.version === 6 && b.version === 6, 'both follow the edit')
    expect(table(a)).toEqual({ A: [50], C: [7], D: [1] })
  })

  it('after a FLUSHALL and a re-provision that reaches the same version, processes and Redis converge on one table', async () => {
    const own = await startRedis()
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const a = await on(own, 'gw')
    const b = await on(own, 'gw')
    await a.set('A', [tps(5)])
    await a.set('B', [tps(6)])
    await a.set('C', [tps(7)])
    await within(2000, () => b.version === 3, 'b at version 3')
    await own.cli('FLUSHALL')
    const ops = await on(own, 'gw', { follow: false })
    await ops.set('A', [tps(1)])
    await ops.set('D', [tps(2)])
    await ops.set('E', [tps(3)])
    const converged = () => {
      const want = JSON.stringify({ A: [1], B: [6], C: [7], D: [2], E: [3] })
      return JSON.stringify(table(a)) === want && JSON.stringify(table(b)) === want
    }
    await within(5000, converged, 'both hold the re-provision merged with their table')
    await within(3000, () => a.version === b.version, 'at one version')
    const fresh = await on(own, 'gw', { follow: false })
    expect(table(fresh)).toEqual(table(a))
    expect(fresh.version).toBe(a.version)
  })

  it('a delete right after a FLUSHALL sticks: the processes drop the entry, it never comes back', async () => {
    const own = await startRedis()
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const a = await on(own, 'gw', { checkMs: 500 })
    await a.set('A', [tps(5)])
    await a.set('B', [tps(6)])
    await own.cli('FLUSHALL')
    const ops = await on(own, 'gw', { follow: false })
    const version = ops.version
    await ops.delete('A')
    expect(ops.version).toBe(version + 1)
    await within(3000, () => a.get('A') === null, 'a drops A')
    await sleep(3000)
    expect(table(a)).toEqual({ B: [6] })
    const fresh = await on(own, 'gw', { follow: false })
    expect(table(fresh)).toEqual({ B: [6] })
    // Deleting an entry a table holds not is no change.
    const now = fresh.version
    await fresh.delete('never-there')
    expect(fresh.version).toBe(now)
  })

  it('a value written around sluice keeps its last good value; a hash past the bound is not loaded', async () => {
    const name = `around${run++}`
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const a = await on(server, name, { checkMs: 100 })
    await a.set('A', [tps(5)])
    await a.set('B', [tps(6)])
    await server.cli('HSET', key(name), 'A', '{not json')
    await server.cli('HSET', key(name), 'Z', '[{"kind":"gcra"}]')
    await server.cli('INCR', `${key(name)}:version`)
    await server.cli('SET', `${key(name)}:stamp`, 'by-hand')
    await within(2000, () => a.version === 3, 'a reads the table again')
    expect(table(a)).toEqual({ A: [5], B: [6] })
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('sluice cannot read'), {
      code: 'SLUICE_TABLE_ENTRY',
    })
    await server.cli(
      'EVAL',
      "for i = 1, 10001 do redis.call('HSET', KEYS[1], 'f' .. i, 'null') end redis.call('INCR', KEYS[2]) redis.call('SET', KEYS[3], 'many') return 1",
      '3',
      key(name),
      `${key(name)}:version`,
      `${key(name)}:stamp`,
    )
    await sleep(500)
    expect(a.version).toBe(3)
    expect(a.entries().size).toBe(2)
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('past the bound of 10000'), {
      code: 'SLUICE_TABLE_UNREADABLE',
    })
  })

  it('opens on an ioredis client with enableOfflineQueue: false before it is ready (the README recipe)', async () => {
    const name = `early${run++}`
    const setup = await on(server, name, { follow: false })
    await setup.set('A', [tps(5)])
    const { Redis } = await import('ioredis')
    const client = new Redis({
      host: server.host,
      port: server.port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
    })
    client.on('error', () => {})
    try {
      const t = await RedisLimitTable.open({ client, name })
      open.push(t)
      expect(table(t)).toEqual({ A: [5] })
    } finally {
      for (const t of open.splice(0)) await t.close()
      client.disconnect()
    }
  })
})
