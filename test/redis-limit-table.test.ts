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
import { ALL_CLIENT_KINDS, CLIENT_KINDS, clientOf, closeClients } from './harness/clients.ts'
import { type RedisServer, sleep, startRedis, stopAll } from './harness/redis.ts'

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
