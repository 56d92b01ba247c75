/**
 * The `sluice` command, built, as a real child process against a real redis-server: `sluice limits
 * list | get | set | delete | audit`. JSON on stdout; errors as `CODE: message` on stderr; exit 0 on
 * success, 1 on invalid input (nothing written), 2 when Redis cannot be reached (within its timeout).
 */
import { createServer, type Server } from 'node:net'
import { parseRuleSpec } from '@sluice/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sluice, sluiceWith } from '../../../test/harness/cli.ts'
import { type RedisServer, startRedis, stopAll } from '../../../test/harness/redis.ts'

let server: RedisServer
let url: string

beforeAll(async () => {
  server = await startRedis()
  url = `redis://${server.host}:${server.port}`
})

afterAll(async () => {
  await stopAll()
})

describe('sluice limits (issue 25)', () => {
  it('a database Redis does not have (/99): exit 1, nothing written to database 0', async () => {
    const result = await sluice(
      'limits',
      'set',
      'A',
      'slidingLog:5/1s',
      '--table',
      'db99',
      '--redis',
      `${url}/99`,
    )
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(
      /^ERR_SLUICE_INVALID_OPTION: Invalid option --redis: .*a database this Redis has \(DB index is out of range\)/,
    )
    expect((await server.cli('KEYS', '*db99*')).trim()).toBe('')
    // A database it has is used, and only that one.
    expect(
      (await sluice('limits', 'set', 'A', 'slidingLog:5/1s', '--table', 'db3', '--redis', `${url}/3`)).code,
    ).toBe(0)
    expect(await server.cli('-n', '3', 'HGET', 'sluice:table:{db3}', 'A')).toBe(
      '[{"kind":"slidingLog","limit":5,"windowMs":1000}]\n',
    )
    expect((await server.cli('KEYS', '*db3*')).trim()).toBe('')
  })

  it('a wrong password is reported as Redis said it, not as a closed connection', async () => {
    const locked = await startRedis()
    await locked.cli('CONFIG', 'SET', 'requirepass', 'right')
    const result = await sluice(
      'limits',
      'list',
      '--table',
      'gw',
      '--redis',
      `redis://:wrong@${locked.host}:${locked.port}`,
    )
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(
      /^ERR_SLUICE_STORE: Cannot reach Redis at redis:\/\/…@127\.0\.0\.1:\d+: WRONGPASS/,
    )
    expect(result.stderr).not.toContain('wrong')
  })

  it('checks --actor before Redis is asked, and refuses bidi overrides in it', async () => {
    for (const actor of ['', 'a'.repeat(129), 'ops\u202Eeilla', 'a\nb']) {
      const result = await sluice(
        'limits',
        'set',
        'A',
        'slidingLog:5/1s',
        '--table',
        'gw',
        '--redis',
        'redis://127.0.0.1:1',
        '--actor',
        actor,
      )
      expect(result.code, JSON.stringify(actor)).toBe(1)
      expect(result.stderr).toMatch(/^ERR_SLUICE_INVALID_OPTION: Invalid option --actor/)
    }
  })

  it('refuses -1 beside rules instead of dropping it; a delete of a missing entry says deleted: false', async () => {
    const t = ['--table', 'minus', '--redis', url]
    const mixed = await sluice('limits', 'set', 'A', '-1', 'slidingLog:5/1s', ...t)
    expect(mixed.code).toBe(1)
    expect(mixed.stderr).toMatch(
      /^ERR_SLUICE_INVALID_OPTION: Invalid option set: "-1 slidingLog:5\/1s"; expected -1 alone/,
    )
    expect((await server.cli('KEYS', '*minus*')).trim()).toBe('')
    expect((await sluice('limits', 'set', 'A', 'slidingLog:5/1s', ...t)).code).toBe(0)
    const missing = JSON.parse((await sluice('limits', 'delete', 'B', ...t)).stdout)
    expect(missing).toEqual({ table: 'minus', version: 1, entry: 'B', deleted: false })
    const deleted = JSON.parse((await sluice('limits', 'delete', 'A', ...t)).stdout)
    expect(deleted).toEqual({ table: 'minus', version: 2, entry: 'A', deleted: true })
  })

  it('takes the Redis URL from SLUICE_REDIS_URL when --redis is not given', async () => {
    const env = await sluiceWith(
      { SLUICE_REDIS_URL: url },
      'limits',
      'set',
      'A',
      'slidingLog:7/1s',
      '--table',
      'env',
    )
    expect(env.code).toBe(0)
    expect(await server.cli('HGET', 'sluice:table:{env}', 'A')).toBe(
      '[{"kind":"slidingLog","limit":7,"windowMs":1000}]\n',
    )
    // --redis wins over the environment.
    const given = await sluiceWith(
      { SLUICE_REDIS_URL: 'redis://127.0.0.1:1' },
      'limits',
      'list',
      '--table',
      'env',
      '--redis',
      url,
    )
    expect(given.code).toBe(0)
  })
})

describe("sluice limits at a table's edges (issue 45 item 4, issue 44 item 7)", () => {
  it('delete on a table Redis does not hold says nothing was deleted, exits 1 and writes no audit record', async () => {
    const result = await sluice('limits', 'delete', 'X', '--table', 'fresh', '--redis', url)
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toBe(
      'ERR_SLUICE_INVALID_OPTION: Invalid option --table: "fresh"; expected a table this Redis holds (it has none named "fresh"); nothing was deleted.\n',
    )
    expect((await server.cli('KEYS', '*fresh*')).trim()).toBe('')
  })

  it('delete of an entry an existing table does not hold writes nothing: no version, no audit record', async () => {
    const t = ['--table', 'held', '--redis', url]
    expect((await sluice('limits', 'set', 'A', 'slidingLog:5/1s', ...t)).code).toBe(0)
    const result = await sluice('limits', 'delete', 'B', ...t)
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({ table: 'held', version: 1, entry: 'B', deleted: false })
    expect(await server.cli('GET', 'sluice:table:{held}:version')).toBe('1\n')
    expect(await server.cli('XLEN', 'sluice:table:{held}:audit')).toBe('1\n')
  })

  it('a junk version key fails list clearly (exit 2) instead of printing an empty table', async () => {
    const t = ['--table', 'junk', '--redis', url]
    expect((await sluice('limits', 'set', 'A', 'slidingLog:5/1s', ...t)).code).toBe(0)
    await server.cli('SET', 'sluice:table:{junk}:version', 'abc')
    for (const args of [['list'], ['get', 'A'], ['delete', 'A']]) {
      const result = await sluice('limits', ...args, ...t)
      expect(result.code, args.join(' ')).toBe(2)
      expect(result.stdout).toBe('')
      expect(result.stderr).toBe(
        'ERR_SLUICE_STORE: Limit table "junk" in Redis has no valid version ("abc"); the table cannot be opened.\n',
      )
    }
    expect(await server.cli('HLEN', 'sluice:table:{junk}')).toBe('1\n')
    expect(await server.cli('XLEN', 'sluice:table:{junk}:audit')).toBe('1\n')
  })

  it('gives up within its timeout on a Redis stopped by SIGSTOP (exit 2), limits and dashboard, where they took twice as long', async () => {
    const stopped = await startRedis()
    const pid = stopped.pid!
    process.kill(pid, 'SIGSTOP')
    try {
      const target = `redis://${stopped.host}:${stopped.port}`
      const result = await sluice('limits', 'list', '--table', 'gw', '--redis', target, '--timeout', '2000')
      expect(result.code).toBe(2)
      expect(result.stdout).toBe('')
      expect(result.stderr).toBe(
        `ERR_SLUICE_STORE: Cannot reach Redis at ${target}: no answer within 2000 ms\n`,
      )
      // Measured, not asserted (the machine's load sets it): the command's whole run, Node's start included.
      console.info(
        `sluice limits list on a stopped Redis, --timeout 2000: exit after ${Math.round(result.ms)} ms`,
      )
      const served = await sluice('dashboard', '--redis', target, '--port', '0', '--timeout', '2000')
      expect(served.code).toBe(2)
      expect(served.stderr).toBe(
        `ERR_SLUICE_STORE: Cannot reach Redis at ${target}: no answer within 2000 ms\n`,
      )
      console.info(
        `sluice dashboard on a stopped Redis, --timeout 2000: exit after ${Math.round(served.ms)} ms`,
      )
    } finally {
      process.kill(pid, 'SIGCONT')
      await stopped.kill()
    }
  })

  it('refuses to run without --redis or SLUICE_REDIS_URL, saying how to name one: limits and dashboard', async () => {
    const message =
      'ERR_SLUICE_INVALID_OPTION: Invalid option --redis: undefined; expected a Redis URL: pass --redis redis://HOST:PORT[/DB], or set SLUICE_REDIS_URL in the environment.\n'
    // The read first: on a build that still guessed, the test fails before anything is written anywhere.
    for (const args of [
      ['limits', 'list', '--table', 'guess'],
      ['limits', 'set', 'A', 'slidingLog:5/1s', '--table', 'guess'],
      ['dashboard', '--port', '0'],
    ]) {
      const result = await sluiceWith({ SLUICE_REDIS_URL: '' }, ...args)
      expect(result.code, args.join(' ')).toBe(1)
      expect(result.stdout).toBe('')
      expect(result.stderr).toBe(message)
    }
  })
})

describe('sluice limits', () => {
  it('sets, gets, lists, deletes and audits entries of a table', async () => {
    const t = ['--table', 'gw', '--redis', url]
    const set = await sluice(
      'limits',
      'set',
      'PAYMENT:ALIPAY',
      'slidingLog:100/1s',
      'fixedWindow:1000/1h',
      ...t,
      '--actor',
      'ops:alice',
    )
    expect(set).toMatchObject({ code: 0, stderr: '' })
    expect(JSON.parse(set.stdout)).toEqual({
      table: 'gw',
      version: 1,
      entry: 'PAYMENT:ALIPAY',
      rules: [
        { kind: 'slidingLog', limit: 100, windowMs: 1000 },
        { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 },
      ],
    })
    expect((await sluice('limits', 'set', '*', 'tokenBucket:50+10/s', ...t)).code).toBe(0)
    expect((await sluice('limits', 'set', 'REFUND:ALIPAY', '-1', ...t)).code).toBe(0)
    expect((await sluice('limits', 'set', 'PAYMENT:UNIONPAY', 'leakyBucket:5/s~2s', ...t)).code).toBe(0)

    const list = await sluice('limits', 'list', ...t)
    expect(list.code).toBe(0)
    const listed = JSON.parse(list.stdout)
    expect(listed.version).toBe(4)
    expect(listed.entries).toEqual({
      'PAYMENT:ALIPAY': [
        { kind: 'slidingLog', limit: 100, windowMs: 1000 },
        { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 },
      ],
      '*': [{ kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
      'REFUND:ALIPAY': null,
      'PAYMENT:UNIONPAY': [{ kind: 'leakyBucket', ratePerSecond: 5, maxQueueMs: 2000 }],
    })

    const missing = JSON.parse((await sluice('limits', 'get', 'PAYMENT:WECHAT', ...t)).stdout)
    expect(missing).toEqual({
      table: 'gw',
      version: 4,
      entry: 'PAYMENT:WECHAT',
      defined: false,
      rules: null,
      applies: [{ kind: 'tokenBucket', capacity: 50, refillPerSecond: 10 }],
    })
    const refund = JSON.parse((await sluice('limits', 'get', 'REFUND:ALIPAY', ...t)).stdout)
    expect(refund).toMatchObject({ defined: true, rules: null, applies: null })

    const deleted = await sluice('limits', 'delete', 'PAYMENT:ALIPAY', ...t, '--actor', 'ops:bob')
    expect(JSON.parse(deleted.stdout)).toEqual({
      table: 'gw',
      version: 5,
      entry: 'PAYMENT:ALIPAY',
      deleted: true,
    })

    const audit = JSON.parse((await sluice('limits', 'audit', '--count', '2', ...t)).stdout)
    expect(
      audit.changes.map((c: Record<string, unknown>) => [c.version, c.change, c.entry, c.actor]),
    ).toEqual([
      [5, 'delete', 'PAYMENT:ALIPAY', 'ops:bob'],
      [4, 'set', 'PAYMENT:UNIONPAY', expect.stringMatching(/@/)],
    ])
    expect(audit.changes[0].before).toEqual([
      { kind: 'slidingLog', limit: 100, windowMs: 1000 },
      { kind: 'fixedWindow', limit: 1000, windowMs: 3_600_000 },
    ])
  })

  it.each([
    [
      'an invalid spec',
      ['set', 'A', 'slidingLog:0/1s'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option slidingLog.limit: 0; expected an integer >= 1, or -1 for not limited.',
    ],
    [
      'text that does not parse',
      ['set', 'A', 'slidingLog:100'],
      'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "slidingLog:100": expected slidingLog:LIMIT/WINDOW, e.g. slidingLog:100/1s.',
    ],
    [
      'an unknown kind',
      ['set', 'A', 'gcra:5/1s'],
      'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "gcra:5/1s": expected a known kind',
    ],
    [
      'an unknown field in JSON',
      ['set', 'A', '{"kind":"slidingLog","limit":1,"windowMs":1000,"burst":2}'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option slidingLog.burst',
    ],
    [
      'two rules sharing an identity',
      ['set', 'A', 'slidingLog:5/1s', 'slidingLog:9/1s'],
      'ERR_SLUICE_DUPLICATE_RULE: Rules "5-per-1s" and "9-per-1s" of limit table entry "A" would share their state (slidingLog:1000): give them different names.',
    ],
    [
      'a huge entry',
      ['set', 'A', ...Array.from({ length: 17 }, (_, i) => `slidingLog:5/1s@r${i}`)],
      'ERR_SLUICE_TABLE_TOO_LARGE: Limit table entry "A" has 17 rules; at most 16.',
    ],
    [
      'a hostile entry name',
      ['set', 'A\u001b[31m', 'slidingLog:5/1s'],
      'ERR_SLUICE_INVALID_ENTRY: Invalid limit table entry',
    ],
    ['an entry name of 300 characters', ['get', 'x'.repeat(300)], 'ERR_SLUICE_INVALID_ENTRY'],
    [
      'a missing --table',
      ['list'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option --table: undefined; expected a table name.',
    ],
    [
      'a table name with braces',
      ['list', '--table', 'a{b}'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option --table',
    ],
    [
      'an unknown subcommand',
      ['lsit', '--table', 'gw'],
      'ERR_SLUICE_INVALID_OPTION: Invalid option limits: "lsit"',
    ],
    ['an unknown option', ['list', '--tabel', 'gw'], 'ERR_SLUICE_INVALID_OPTION: Invalid option --tabel'],
    ['set without a spec', ['set', 'A'], 'ERR_SLUICE_INVALID_OPTION: Invalid option set'],
  ])('%s: exit 1, the code on stderr, nothing written', async (_, args, message) => {
    const before = await server.cli('KEYS', '*bad*')
    const named = args.includes('--table') || args.includes('--tabel') || _ === 'a missing --table'
    const result = await sluice('limits', ...args, ...(named ? [] : ['--table', 'bad']), '--redis', url)
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr.startsWith(message)).toBe(true)
    expect(await server.cli('KEYS', '*bad*')).toBe(before)
  })

  it('exits 2 within its timeout when Redis cannot be reached: refused, or silent', async () => {
    const refused = await sluice('limits', 'list', '--table', 'gw', '--redis', 'redis://127.0.0.1:1')
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/^ERR_SLUICE_STORE: Cannot reach Redis at redis:\/\/127\.0\.0\.1:1: /)
    // A server that accepts the connection and never answers.
    const silent: Server = createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const port = (silent.address() as { port: number }).port
    const hung = await sluice(
      'limits',
      'get',
      'A',
      '--table',
      'gw',
      '--redis',
      `redis://127.0.0.1:${port}`,
      '--timeout',
      '500',
    )
    silent.close()
    expect(hung.code).toBe(2)
    expect(hung.stderr).toMatch(/^ERR_SLUICE_STORE/)
    // Invalid input is found before Redis is asked: exit 1, even with no Redis.
    expect(
      (await sluice('limits', 'set', 'A', 'nope', '--table', 'gw', '--redis', 'redis://127.0.0.1:1')).code,
    ).toBe(1)
  })

  it('prints help asked for on stdout (usage after a mistake on stderr)', async () => {
    const help = await sluice('limits', '--help')
    expect(help.code).toBe(0)
    expect(help.stdout).toContain('tokenBucket:50+10/s')
    expect(help.stderr).toBe('')
    const top = await sluice('--help')
    expect(top).toMatchObject({ code: 0, stderr: '' })
    expect(top.stdout).toContain('Usage: sluice <command>')
    expect((await sluice('limits')).stderr).toContain('Usage: sluice limits')
    expect((await sluice()).code).toBe(1)
    expect((await sluice('nope')).stderr).toContain('Unknown command "nope"')
  })

  it("lists a form of every rule kind in limits --help, each one core's grammar reads", async () => {
    const help = (await sluice('limits', '--help')).stdout
    const specs = help.slice(help.indexOf('Specs:')).split('\n').slice(1)
    const forms = specs.map((line) => /^ {2}(\w+:\S+)/.exec(line)?.[1]).filter((f) => f !== undefined)
    const kinds = forms.map((f) => f.slice(0, f.indexOf(':')))
    expect(kinds.filter((k) => k !== 'KIND').sort()).toEqual([
      'concurrency',
      'fixedWindow',
      'leakyBucket',
      'slidingLog',
      'slidingWindow',
      'tokenBucket',
      'warmUp',
    ])
    for (const form of forms.filter((f) => !f.startsWith('KIND'))) {
      // The optional parts in brackets, written out: both the short and the full form are rules.
      expect(() => parseRuleSpec(form.replace(/[[\]]/g, ''))).not.toThrow()
      expect(() => parseRuleSpec(form.replace(/\[[^\]]*\]/g, ''))).not.toThrow()
    }
  })
})
