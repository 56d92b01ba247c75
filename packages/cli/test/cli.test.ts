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
      'quota',
      'quota',
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

describe('sluice limits with quotas (issue 48)', () => {
  it('sets quotas as text, lists them as specs and, with --text, as the text set takes back', async () => {
    const t = ['--table', 'plans', '--redis', url]
    const pro = await sluice('limits', 'set', 'PLAN:PRO', 'quota:10000/month@@europe/berlin', ...t)
    expect(pro).toMatchObject({ code: 0, stderr: '' })
    // The zone as Intl names it.
    expect(JSON.parse(pro.stdout)).toEqual({
      table: 'plans',
      version: 1,
      entry: 'PLAN:PRO',
      rules: [{ kind: 'quota', limit: 10_000, per: 'month', timeZone: 'Europe/Berlin', weekStartsOn: 1 }],
    })
    const set = (entry: string, ...specs: string[]) => sluice('limits', 'set', entry, ...specs, ...t)
    expect(
      (await set('PLAN:TEAM', 'quota:500/week-sun@@America/New_York', 'fixedWindow:60/1m@requests')).code,
    ).toBe(0)
    expect(
      (await set('PLAN:AI', 'quota:1000000/month@@Asia/Tokyo@tokens', 'slidingWindow:90000/1m@burst')).code,
    ).toBe(0)
    expect((await set('*', 'quota:1000/day')).code).toBe(0)
    expect((await set('PLAN:FREE', '-1')).code).toBe(0)

    const listed = JSON.parse((await sluice('limits', 'list', ...t)).stdout)
    expect(listed).toEqual({
      table: 'plans',
      version: 5,
      entries: {
        'PLAN:PRO': [
          { kind: 'quota', limit: 10_000, per: 'month', timeZone: 'Europe/Berlin', weekStartsOn: 1 },
        ],
        'PLAN:TEAM': [
          { kind: 'quota', limit: 500, per: 'week', timeZone: 'America/New_York', weekStartsOn: 7 },
          { kind: 'fixedWindow', limit: 60, windowMs: 60_000, name: 'requests' },
        ],
        'PLAN:AI': [
          {
            kind: 'quota',
            limit: 1_000_000,
            per: 'month',
            timeZone: 'Asia/Tokyo',
            weekStartsOn: 1,
            name: 'tokens',
          },
          { kind: 'slidingWindow', limit: 90_000, windowMs: 60_000, buckets: 10, name: 'burst' },
        ],
        '*': [{ kind: 'quota', limit: 1000, per: 'day', timeZone: 'UTC', weekStartsOn: 1 }],
        'PLAN:FREE': null,
      },
    })
    const text = await sluice('limits', 'list', '--text', ...t)
    expect(text).toMatchObject({ code: 0, stderr: '' })
    expect(text.stdout).toBe(
      [
        '*\tquota:1000/day',
        'PLAN:AI\tquota:1000000/month@@Asia/Tokyo@tokens slidingWindow:90000/1m@burst',
        'PLAN:FREE\t-1',
        'PLAN:PRO\tquota:10000/month@@Europe/Berlin',
        'PLAN:TEAM\tquota:500/week-sun@@America/New_York fixedWindow:60/1m@requests',
        '',
      ].join('\n'),
    )
    // Each line reads back: set with its text gives the same entry.
    for (const line of text.stdout.trim().split('\n')) {
      const [entry, rules] = line.split('\t') as [string, string]
      const again = await sluice(
        'limits',
        'set',
        entry,
        ...rules.split(' '),
        '--table',
        'again',
        '--redis',
        url,
      )
      expect(JSON.parse(again.stdout).rules).toEqual(listed.entries[entry])
    }
    // A plan falls back to "*": its daily quota applies.
    const other = JSON.parse((await sluice('limits', 'get', 'PLAN:OTHER', ...t)).stdout)
    expect(other).toMatchObject({ defined: false, rules: null })
    expect(other.applies).toEqual([
      { kind: 'quota', limit: 1000, per: 'day', timeZone: 'UTC', weekStartsOn: 1 },
    ])
    const textGet = await sluice('limits', 'get', 'PLAN:PRO', '--text', ...t)
    expect(textGet.code).toBe(1)
    expect(textGet.stderr).toBe(
      'ERR_SLUICE_INVALID_OPTION: Invalid option --text: true; expected only with list.\n',
    )
  })

  it('refuses a quota of an unknown zone, a huge limit, a bad week start or period: exit 1, the code, nothing written', async () => {
    const refused: [string, string][] = [
      [
        'quota:1000/day@@Mars/Olympus',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.timeZone: "Mars/Olympus"; expected an IANA time zone name Intl knows, such as Europe/Berlin or UTC.',
      ],
      [
        'quota:99999999999999999999/month',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.limit: 100000000000000000000; expected an integer >= 1, or -1 for not limited.',
      ],
      [
        '{"kind":"quota","limit":500,"per":"week","weekStartsOn":9}',
        'ERR_SLUICE_INVALID_OPTION: Invalid option quota.weekStartsOn: 9; expected an integer from 1 to 7.',
      ],
      [
        'quota:500/week-xyz',
        'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "quota:500/week-xyz": expected quota:LIMIT/PER[-DAY][@@ZONE], e.g. quota:1000/day, quota:10000/month@@Europe/Berlin, quota:500/week-sun.',
      ],
      [
        'quota:500/day-sun',
        'ERR_SLUICE_INVALID_SPEC: Invalid rule spec "quota:500/day-sun": expected quota:LIMIT/PER[-DAY][@@ZONE], e.g. quota:1000/day, quota:10000/month@@Europe/Berlin, quota:500/week-sun.',
      ],
      [
        '{"kind":"quota","limit":5,"per":"fortnight"}',
        "ERR_SLUICE_INVALID_OPTION: Invalid option quota.per: \"fortnight\"; expected one of 'hour', 'day', 'week', 'month', 'year'.",
      ],
    ]
    for (const [spec, error] of refused) {
      // Checked before Redis is asked: the same answer with a Redis, and with none to reach.
      for (const redis of [url, 'redis://127.0.0.1:1']) {
        const result = await sluice('limits', 'set', 'PLAN:X', spec, '--table', 'hostile', '--redis', redis)
        expect([result.code, result.stdout, result.stderr], spec).toEqual([1, '', `${error}\n`])
      }
    }
    expect((await server.cli('KEYS', '*hostile*')).trim()).toBe('')
  })

  it('reads a table holding a quota sluice cannot read, written around it: the entry is left out with a warning, the rest listed', async () => {
    const t = ['--table', 'around', '--redis', url]
    expect((await sluice('limits', 'set', 'PLAN:PRO', 'quota:10000/month@@Europe/Berlin', ...t)).code).toBe(0)
    // Written by hand: an unknown zone, a huge limit, a week start that is not a day.
    for (const [entry, spec] of [
      ['MARS', { kind: 'quota', limit: 5, per: 'day', timeZone: 'Mars/Olympus' }],
      ['HUGE', { kind: 'quota', limit: 2 ** 60, per: 'day' }],
      ['WEEK', { kind: 'quota', limit: 5, per: 'week', weekStartsOn: 0 }],
    ] as const) {
      await server.cli('HSET', 'sluice:table:{around}', entry, JSON.stringify([spec]))
    }
    for (const args of [
      ['list', '--text'],
      ['get', 'MARS'],
    ]) {
      const result = await sluice('limits', ...args, ...t)
      expect(result.code, args.join(' ')).toBe(0)
      expect(result.stderr).toMatch(
        /Warning: Limit table "around" holds 3 entries sluice cannot read \("[A-Z]+", …\); each keeps the last good value this process had, if any\./,
      )
      if (args[0] === 'list') expect(result.stdout).toBe('PLAN:PRO\tquota:10000/month@@Europe/Berlin\n')
      else expect(JSON.parse(result.stdout)).toMatchObject({ entry: 'MARS', defined: false, rules: null })
    }
    // Set through sluice, the entry is checked: the hand-written zone is refused, a known one taken.
    const again = await sluice('limits', 'set', 'MARS', 'quota:5/day@@Mars/Olympus', ...t)
    expect(again.code).toBe(1)
    expect((await sluice('limits', 'set', 'MARS', 'quota:5/day@@UTC', ...t)).code).toBe(0)
  })
})
