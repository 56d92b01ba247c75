#!/usr/bin/env node
/**
 * @module Redis time of a settle beside a refund (`INFO commandstats` usec_per_call of EVALSHA): what one
 * script call costs inside redis-server for a token budget's acts on 10,000 keys, each with two rules (60
 * requests and 100,000 tokens a minute, `fixedWindow` and `slidingWindow`): a consume of per-rule costs
 * `[1, 1200]` beside a plain consume of 1, a peek, a penalty of 300 on both rules, a refund naming the call
 * (700 units back under the call's marks, the act a settle of fewer units replaces), and settles of
 * `[0, -700]` (units back), `[0, 300]` (units counted past the reservation) and `[0, 0]`. Redis runs one
 * script at a time, so its time per call is what bounds a Redis's decisions per second; other processes on
 * the machine barely move it.
 *
 *   pnpm --filter @sluice/core --filter @sluice/redis build && node bench/redis-settle.mjs [--rounds 5] [--keys 10000]
 *
 * Each act runs once per key per round, 64 calls in flight, on a redis-server of its own flushed before each
 * round; each figure is the median of its rounds.
 */
import { loadavg } from 'node:os'
import { fixedWindow, slidingWindow } from '@sluice/core'
import { refundMark } from '@sluice/core/store'
import { RedisStore } from '@sluice/redis'
import { numberOption } from './lib/options.mjs'
import { connectIoredis, redisVersion, scriptStats, startRedis } from './lib/redis-server.mjs'
import { median } from './lib/stats.mjs'

console.log(`node ${process.version}`)
const rounds = numberOption('rounds', 5)
const keys = numberOption('keys', 10_000)
const IN_FLIGHT = 64

const rules = [
  fixedWindow({ limit: 60, windowMs: 60_000, name: 'requests' }),
  slidingWindow({ limit: 100_000, windowMs: 60_000, name: 'tokens' }),
]

const redis = await startRedis()
const admin = await connectIoredis(redis.port)
const client = await connectIoredis(redis.port)
const store = new RedisStore({ client, deniedCache: false, timeoutMs: 2000 })
console.log(
  `redis-server ${redisVersion()} on ${redis.port}; ${rounds} rounds of ${keys} keys; load ${loadavg()[0].toFixed(2)}`,
)

/** Runs `act(i)` for every key, `IN_FLIGHT` at a time; returns Redis's µs per script call. */
async function measure(act) {
  await admin.config('RESETSTAT')
  let next = 0
  const worker = async () => {
    while (next < keys) await act(next++)
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const { calls, usec } = await scriptStats(admin)
  if (calls !== keys) throw new Error(`expected ${keys} script calls, Redis ran ${calls}`)
  return usec / calls
}

const ACTS = [
  'consume 1',
  'consume [1, 1200]',
  'peek 1',
  'refund 700 (marks)',
  'penalize 300',
  'settle [0, -700]',
  'settle [0, 300]',
  'settle [0, 0]',
]
const figures = new Map(ACTS.map((a) => [a, []]))
try {
  for (let round = 0; round < rounds; round++) {
    await admin.flushall()
    const prefix = `settle${round}`
    const marks = new Array(keys)
    // The scripts are loaded before anything is measured (a first call goes as EVAL).
    await store.apply(prefix, 'warm', rules, 1, 'consume')
    await store.apply(prefix, 'warm', rules, [1, 2], 'consume')
    await store.adjust(prefix, 'warm', rules, 1, 'refund', undefined, ['0', '0'])
    await store.adjust(prefix, 'warm', rules, [0, 1], 'settle', undefined, ['0', '0'])
    figures.get('consume 1').push(await measure((i) => store.apply(prefix, `plain${i}`, rules, 1, 'consume')))
    figures.get('consume [1, 1200]').push(
      await measure(async (i) => {
        const answer = await store.apply(prefix, `k${i}`, rules, [1, 1200], 'consume')
        marks[i] = rules.map((rule, r) => refundMark(rule, answer[r], answer.countedAt))
      }),
    )
    figures.get('peek 1').push(await measure((i) => store.apply(prefix, `k${i}`, rules, 1, 'peek')))
    figures
      .get('refund 700 (marks)')
      .push(
        await measure((i) =>
          store.adjust(prefix, `k${i}`, rules, 700, 'refund', undefined, [undefined, marks[i][1]]),
        ),
      )
    figures
      .get('penalize 300')
      .push(await measure((i) => store.adjust(prefix, `plain${i}`, rules, 300, 'penalize')))
    figures
      .get('settle [0, -700]')
      .push(
        await measure((i) => store.adjust(prefix, `k${i}`, rules, [0, -700], 'settle', undefined, marks[i])),
      )
    figures
      .get('settle [0, 300]')
      .push(
        await measure((i) => store.adjust(prefix, `k${i}`, rules, [0, 300], 'settle', undefined, marks[i])),
      )
    figures
      .get('settle [0, 0]')
      .push(await measure((i) => store.adjust(prefix, `k${i}`, rules, [0, 0], 'settle', undefined, marks[i])))
  }
  console.log('\nact                     Redis µs per call (median of rounds)')
  for (const [act, usec] of figures) console.log(`${act.padEnd(24)}${median(usec).toFixed(2)}`)
} finally {
  await store.close()
  client.disconnect()
  admin.disconnect()
  await redis.stop()
}
