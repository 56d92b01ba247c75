/**
 * @module `sluice limits list [--text] | get ENTRY | set ENTRY SPEC… | delete ENTRY | audit [--count N]
 * --table NAME [--redis URL] [--prefix P] [--actor NAME]`: reads and changes a limit table kept in Redis
 * (`RedisLimitTable`). Input is checked in full before Redis is contacted, so a typo never needs a Redis
 * and never writes anything. Results are JSON on stdout; `list --text` prints each entry's rules as text
 * instead, in the grammar `set` reads back.
 */
import { hostname, userInfo } from 'node:os'
import { formatRuleSpec, InvalidOptionError, parseRuleSpecs, type Rule } from '@sluice/core'
import { prefixOption } from '@sluice/core/options'
import { checkEntryName, parseEntry } from '@sluice/core/store'
import { RedisLimitTable } from '@sluice/redis'
import type { Redis } from 'ioredis'
import { readArgs } from './args.ts'
import type { Io } from './io.ts'
import { connect, requiredUrl, withinTimeout } from './redis.ts'

export const LIMITS_USAGE = `Usage: sluice limits <command> --table NAME [--redis URL] [options]

Commands:
  list [--text]             every entry of the table, as JSON; with --text one line per entry by name:
                            the entry, a tab and its rules as text (what set takes back)
  get ENTRY                 one entry: its own rules, and the rules that apply to it ("*" for a missing entry)
  set ENTRY SPEC...         set an entry's rules (checked before anything is written)
  delete ENTRY              remove an entry (it then falls to "*"); "deleted": false when the table does
                            not hold it; a table Redis does not hold is refused (exit 1)
  audit [--count N]         the last N changes (default 20), newest first

Options:
  --table NAME              the table (required)
  --redis URL               where the table is, e.g. redis://10.0.0.5:6379/0 (required, unless
                            SLUICE_REDIS_URL is set; a database number, /N, must exist: Redis is asked)
  --prefix PREFIX           the table's key prefix (default sluice)
  --actor NAME              who makes the change, for the audit trail: 1 to 128 characters without
                            control or format characters (default user@host)
  --timeout MS              how long the whole command waits for Redis (default 2000)

Specs:
  slidingLog:100/1s         100 in any second, exactly
  fixedWindow:1000/1h       1000 per aligned hour
  slidingWindow:600/1m[/10] 600 per minute, in 10 buckets
  tokenBucket:50+10/s       capacity 50, refilled 10 a second
  leakyBucket:5/s[~2s]      5 a second, each call waiting up to 2 s for its turn
  concurrency:10[~30s]      at most 10 leases at once, each lasting at most 30 s (default 60 s)
  warmUp:100/s,30s[x3][~1s] 100 a second once warm, warming up over 30 s from 3 times slower
  quota:1000/day[@@Europe/Berlin]
                            1000 per calendar day in a time zone (an IANA name; default UTC); a quota
                            counts per hour, day, week, month or year
  quota:500/week[-sun]      500 per calendar week, weeks starting on Sunday (-mon … -sun; default Monday)
  KIND:...@NAME             a named rule (two rules of one kind and window need names)
  -1                        not limited (alone: with other specs it is refused)
  '{"kind":"slidingLog","limit":100,"windowMs":1000}'   JSON: a spec or a list of them

Exit codes: 0 done, 1 invalid input (nothing written), 2 Redis could not be reached, did not answer
within the timeout, or holds a table that cannot be read.`

const VALUED = ['table', 'redis', 'prefix', 'actor', 'timeout', 'count']
const FLAGS = ['help', 'text']

export async function limits(argv: readonly string[], io: Io): Promise<number> {
  const { positionals, options } = readArgs(argv, VALUED, FLAGS)
  if (options.has('help')) {
    io.out(LIMITS_USAGE)
    return 0
  }
  if (positionals.length === 0) {
    io.err(LIMITS_USAGE)
    return 1
  }
  const [command, ...rest] = positionals
  const table = options.get('table')
  if (typeof table !== 'string') {
    throw new InvalidOptionError('--table', table === true ? '' : table, 'a table name')
  }
  prefixOption('--table', table)
  const timeoutMs = Number(options.get('timeout') ?? 2000)
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new InvalidOptionError('--timeout', options.get('timeout'), 'an integer >= 1 (ms)')
  }
  const count = Number(options.get('count') ?? 20)
  if (!Number.isSafeInteger(count) || count < 1 || count > 1000) {
    throw new InvalidOptionError('--count', options.get('count'), 'an integer from 1 to 1000')
  }
  const given = options.get('actor')
  const actor = given === undefined ? `${safeUser()}@${hostname()}`.slice(0, 128) : actorOption(given)
  const prefix = options.get('prefix')
  const text = options.has('text')
  if (text && command !== 'list') throw new InvalidOptionError('--text', true, 'only with list')

  // Everything the command says is checked before Redis is asked anything.
  let run: (t: RedisLimitTable) => Promise<unknown>
  switch (command) {
    case 'list':
      arity(command, rest, 0)
      run = async (t) =>
        text
          ? textLines(t.entries())
          : { table, version: t.version, entries: Object.fromEntries(t.entries()) }
      break
    case 'get': {
      arity(command, rest, 1)
      const entry = checkEntryName(rest[0])
      run = async (t) => {
        const own = t.entries()
        return {
          table,
          version: t.version,
          entry,
          defined: own.has(entry),
          rules: own.get(entry) ?? null,
          applies: t.get(entry),
        }
      }
      break
    }
    case 'set': {
      if (rest.length < 2) throw new InvalidOptionError('set', rest.join(' '), 'ENTRY SPEC...')
      const entry = checkEntryName(rest[0])
      const texts = rest.slice(1)
      if (texts.length > 1 && texts.some((text) => text.trim() === '-1')) {
        // -1 means "not limited": beside rules it would be dropped, and the entry limited after all.
        throw new InvalidOptionError('set', texts.join(' '), '-1 alone (not limited), or one or more rules')
      }
      const parsed = parseEntry(entry, parseRuleSpecs(texts))
      run = async (t) => {
        await t.set(entry, parsed.rules, { actor })
        return { table, version: t.version, entry, rules: t.entries().get(entry) ?? null }
      }
      break
    }
    case 'delete': {
      arity(command, rest, 1)
      const entry = checkEntryName(rest[0])
      run = async (t) => {
        if (t.version === 0) {
          // No such table (a typo, or Redis lost it): nothing to delete, and nothing is written.
          throw new InvalidOptionError(
            '--table',
            table,
            `a table this Redis holds (it has none named ${JSON.stringify(table)}); nothing was deleted`,
          )
        }
        // An entry the table does not hold is not asked of Redis: nothing changes, nothing is recorded.
        if (!t.entries().has(entry)) return { table, version: t.version, entry, deleted: false }
        const before = t.version
        await t.delete(entry, { actor })
        return { table, version: t.version, entry, deleted: t.version !== before }
      }
      break
    }
    case 'audit':
      arity(command, rest, 0)
      run = async (t) => ({ table, version: t.version, changes: await t.audit(count) })
      break
    default:
      throw new InvalidOptionError('limits', command, 'one of list, get, set, delete, audit')
  }

  const url = requiredUrl(options.get('redis'))

  // One deadline for the whole command (connecting, reading, writing), so it gives up within --timeout.
  let client: Redis | undefined
  let done = false
  const work = async (): Promise<unknown> => {
    client = await connect(url, timeoutMs)
    // Connected just after the deadline: close at once, or the connection would hold the process open.
    if (done) client.disconnect()
    const t = await RedisLimitTable.open({
      client,
      name: table,
      follow: false,
      timeoutMs,
      ...(typeof prefix === 'string' && { prefix }),
    })
    try {
      return await run(t)
    } finally {
      await t.close()
    }
  }
  try {
    const result = await withinTimeout(work(), timeoutMs, url)
    io.out(typeof result === 'string' ? result : JSON.stringify(result, replacer, 2))
    return 0
  } finally {
    done = true
    client?.disconnect()
  }
}

/**
 * A table's entries as `list --text` prints them: a line each, `ENTRY<TAB>RULES` (`-1` for not limited),
 * by entry name.
 * An entry's name holds no tab or line break (`checkEntryName`), so each line reads back unambiguously.
 */
function textLines(entries: ReadonlyMap<string, readonly Rule[] | null>): string {
  return [...entries]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([entry, rules]) => `${entry}\t${rules === null ? '-1' : rules.map(formatRuleSpec).join(' ')}`)
    .join('\n')
}

/** Rules print as their specs (their JSON), and maps as objects. */
function replacer(_key: string, value: unknown): unknown {
  if (value instanceof Map) return Object.fromEntries(value as Map<string, readonly Rule[] | null>)
  return value
}

function arity(command: string, rest: readonly string[], n: number): void {
  if (rest.length !== n) {
    const expected = n === 0 ? 'no arguments' : 'ENTRY'
    throw new InvalidOptionError(command, rest.join(' '), expected)
  }
}

/** Control and format characters (bidi overrides among them), separators, lone surrogates. */
const UNSAFE_ACTOR = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u

function actorOption(value: string | true): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 128 || UNSAFE_ACTOR.test(value)) {
    throw new InvalidOptionError(
      '--actor',
      value === true ? '' : value,
      '1 to 128 characters without control or format characters',
    )
  }
  return value
}

function safeUser(): string {
  try {
    return userInfo().username
  } catch {
    return String(process.getuid?.() ?? 'unknown')
  }
}
