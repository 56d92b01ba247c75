/**
 * @module Redis decisions from one process: throughput with `inFlight` calls outstanding (each of
 * `inFlight` workers awaits one call, then sends the next), or latency of one call at a time.
 * params: { subject, port, redisPid, measure: 'throughput' | 'latency', inFlight, warmupMs, measureMs,
 *           keys, autoPipelining }
 * or, to read latencies in pairs, { subjects: [...], measure: 'interleaved', ... }: every subject in this one
 * process, each on a client of its own, taking turns call by call (the order turning and reversing), so a
 * moment of load, a GC or a scheduler hiccup falls on all of them alike; it reports each one's p50 and p99.
 * Subjects:
 *  - `sluice:<algorithm>`: createLimiter + RedisStore on an ioredis client (`onStoreError: 'throw'`, so a
 *    timeout fails the case instead of passing as an admission).
 *    `concurrency` releases each lease as the HTTP kit does (not awaited); `concurrency-awaited` awaits it.
 *  - `sluice-node-redis:<algorithm>`: the same on a node-redis client.
 *  - `sluice-pair:<algorithm>`: the same (ioredis), the rule second of two, after a fixedWindow: the composed
 *    script, not a straight-down one.
 *  - `rlf`: rate-limiter-flexible RateLimiterRedis (its Lua script through ioredis).
 *  - `rlr`: rate-limit-redis (express-rate-limit's Redis store, EVALSHA through ioredis `call`).
 *  - `ceiling:<algorithm>`: a raw EVALSHA of lib/ceiling-scripts.mjs through ioredis.
 *  - `minimal:<algorithm>`: a raw EVALSHA of lib/ceiling-scripts.mjs's MINIMAL_LUA (the Redis work alone;
 *    concurrency's releases as the ceiling's).
 *  - `ceiling-autopipelined:<algorithm>`: the same with ioredis `enableAutoPipelining` (batched writes).
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { CEILING_LUA, CEILING_RELEASES_LUA, ceilingArgs, MINIMAL_LUA } from '../lib/ceiling-scripts.mjs'
import { params, report } from '../lib/child.mjs'
import { sluice } from '../lib/sluice.mjs'
import { quantile } from '../lib/stats.mjs'
import { consumeAndRelease, HIGH, ruleFor, WINDOW_MS } from '../lib/subjects.mjs'

const require = createRequire(import.meta.url)
const p = params()
const { createLimiter, fixedWindow } = await sluice('core')
const { RedisStore } = await sluice('redis')

async function ioredisClient(name) {
  const { Redis } = require('ioredis')
  const client = new Redis({
    host: '127.0.0.1',
    port: p.port,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: p.autoPipelining === true || name.startsWith('ceiling-autopipelined:'),
  })
  await new Promise((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', reject)
  })
  return { client, close: () => client.disconnect() }
}

async function subject(name) {
  const [kind, algorithm] = name.split(':')
  if (kind === 'sluice' || kind === 'sluice-node-redis' || kind === 'sluice-pair') {
    let client
    let close
    if (kind !== 'sluice-node-redis') ({ client, close } = await ioredisClient(name))
    else {
      const { createClient } = require('redis')
      client = createClient({ socket: { host: '127.0.0.1', port: p.port }, disableOfflineQueue: true })
      await client.connect()
      close = () => client.destroy()
    }
    const store = new RedisStore({ client, timeoutMs: 1000, deniedCache: p.deniedCache ?? true })
    const rule = ruleFor(algorithm === 'concurrency-awaited' ? 'concurrency' : algorithm)
    const rules =
      kind === 'sluice-pair'
        ? [fixedWindow({ limit: HIGH, windowMs: WINDOW_MS, name: 'first' }), rule]
        : [rule]
    const limiter = createLimiter({ rules, store, onStoreError: 'throw' })
    const consume =
      algorithm === 'concurrency' || algorithm === 'concurrency-awaited'
        ? consumeAndRelease(limiter, algorithm === 'concurrency-awaited')
        : (key) => limiter.consume(key)
    return { consume, admitted: (d) => d.allowed, close }
  }
  const { client, close } = await ioredisClient(name)
  if (kind === 'rlf') {
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const rl = new RateLimiterRedis({ storeClient: client, points: HIGH, duration: WINDOW_MS / 1000 })
    return { consume: (key) => rl.consume(key), admitted: (r) => r.remainingPoints >= 0, close }
  }
  if (kind === 'rlr') {
    const { RedisStore: RlrStore } = require('rate-limit-redis')
    const store = new RlrStore({ sendCommand: (command, ...args) => client.call(command, ...args) })
    store.init({ windowMs: WINDOW_MS })
    await new Promise((resolve) => setTimeout(resolve, 100)) // its SCRIPT LOAD
    return { consume: (key) => store.increment(key), admitted: (info) => info.totalHits <= HIGH, close }
  }
  if (algorithm === 'concurrency') {
    if (kind !== 'ceiling' && kind !== 'minimal') throw new Error(`no ${kind} script for concurrency`)
    return ceilingConcurrency(client, close, (kind === 'minimal' ? MINIMAL_LUA : CEILING_LUA).concurrency)
  }
  if (kind === 'ceiling' || kind === 'ceiling-autopipelined' || kind === 'minimal') {
    const sha = await client.script('LOAD', (kind === 'minimal' ? MINIMAL_LUA : CEILING_LUA)[algorithm])
    const args = ceilingArgs(ruleFor(algorithm)).map(String)
    return {
      consume: (key) => client.evalsha(sha, 1, `ceiling:{${key}}:${algorithm}`, '1', ...args),
      admitted: (reply) => reply[0] === 1,
      close,
    }
  }
  throw new Error(`unknown redis subject ${name}`)
}

/**
 * The concurrency ceiling: a request is a raw EVALSHA consume with a lease id of the client's making,
 * awaited, then its release, un-awaited, with every release of the turn in one raw EVALSHA (at most 64),
 * as sluice batches them. Raw scripts through plain ioredis, as every ceiling here: no corked writes, and
 * each lease id an argument of its own.
 */
async function ceilingConcurrency(client, close, lua) {
  const sha = await client.script('LOAD', lua)
  const releases = await client.script('LOAD', CEILING_RELEASES_LUA)
  const args = ceilingArgs(ruleFor('concurrency')).map(String)
  const mine = randomBytes(8).toString('hex')
  let n = 0
  let keys = []
  let leases = []
  let scheduled = false
  let failed
  const flush = () => {
    scheduled = false
    if (keys.length === 0) return
    client.evalsha(releases, keys.length, ...keys, ...leases).catch((error) => {
      failed ??= error
    })
    keys = []
    leases = []
  }
  return {
    consume: async (key) => {
      if (failed !== undefined) throw failed
      const ruleKey = `ceiling:{${key}}:concurrency`
      const lease = `${mine}${n++}`
      const reply = await client.evalsha(sha, 1, ruleKey, '1', ...args, lease)
      if (reply[0] === 1) {
        keys.push(ruleKey)
        leases.push(lease)
        if (keys.length >= 64) flush()
        else if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      }
      return reply
    },
    admitted: (reply) => reply[0] === 1,
    close,
  }
}

const keys = Array.from({ length: p.keys }, (_, i) => `client:${i}`)

/** redis-server's CPU time so far in µs (Linux /proc; NaN elsewhere or without its pid). */
function redisCpuUs() {
  try {
    const fields = readFileSync(`/proc/${p.redisPid}/stat`, 'utf8').split(') ')[1].split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
  } catch {
    return Number.NaN
  }
}

async function throughput(s, ms) {
  let n = 0
  let k = 0
  const end = performance.now() + ms
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  const redis0 = redisCpuUs()
  async function worker() {
    while (performance.now() < end) {
      const key = keys[k]
      if (++k === keys.length) k = 0
      await s.consume(key)
      n++
    }
  }
  await Promise.all(Array.from({ length: p.inFlight }, worker))
  const cpu = process.cpuUsage(cpu0)
  // CPU per call of this client and of redis-server (user + system): what each side spends on a call,
  // whatever else runs on the machine.
  return {
    perSecond: n / ((performance.now() - t0) / 1000),
    requests: n,
    clientCpuUsPerCall: (cpu.user + cpu.system) / n,
    redisCpuUsPerCall: (redisCpuUs() - redis0) / n,
  }
}

/**
 * One call at a time for `ms`, each subject taking its turn in an order that turns every step and runs
 * backwards every other step, so no subject keeps the same one before it (whatever a subject leaves behind
 * after its call, a flush on `setImmediate`, falls on the others alike).
 */
async function latencies(subjects, ms) {
  const samples = subjects.map(() => [])
  let k = 0
  let step = 0
  const end = performance.now() + ms
  while (performance.now() < end) {
    const key = keys[k]
    if (++k === keys.length) k = 0
    for (let i = 0; i < subjects.length; i++) {
      const which = (step % 2 === 0 ? i + step : subjects.length - 1 - i + step) % subjects.length
      const t0 = performance.now()
      await subjects[which].consume(key)
      samples[which].push(performance.now() - t0)
    }
    step++
  }
  return samples.map((values) => {
    values.sort((a, b) => a - b)
    return { p50Ms: quantile(values, 0.5), p99Ms: quantile(values, 0.99), calls: values.length }
  })
}

const names = p.measure === 'interleaved' ? p.subjects : [p.subject]
const subjects = []
for (const name of names) subjects.push(await subject(name))
let result
if (p.measure === 'throughput') {
  const warmup = await throughput(subjects[0], p.warmupMs)
  result = await throughput(subjects[0], p.measureMs)
  // Every request the case made, its warm-up's and the last one's too (Redis's INFO counts them all).
  result.allRequests = warmup.requests + result.requests + 1
} else {
  await latencies(subjects, p.warmupMs)
  const each = await latencies(subjects, p.measureMs)
  result = p.measure === 'interleaved' ? Object.fromEntries(names.map((n, i) => [n, each[i]])) : each[0]
}
for (const [i, s] of subjects.entries()) {
  const admitted = s.admitted(await s.consume(keys[0]))
  s.close()
  if (!admitted) throw new Error(`${names[i]} denied a call: the bench limits are too low`)
}
report(result)
