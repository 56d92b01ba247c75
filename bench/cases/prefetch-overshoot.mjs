/**
 * @module Prefetch's overshoot, measured beside its bound. `processes` processes, each with `inFlight`
 * calls in flight, consume from one key through a RedisStore with `prefetch: { units, ms }`, at a limit
 * they keep reaching (a denied call sleeps its `retryAfterMs`, then asks again), for `seconds`.
 * params: { port, algorithm: 'slidingLog' | 'fixedWindow', processes, inFlight, limit, windowMs, units,
 * ms, seconds } (and `role: 'worker'`, `index` for the processes this case starts).
 *
 * Every admission is timed in Redis time. A unit spent locally (`reason: 'prefetch'`) is timed by the
 * worker: right after `consume` returns when the store answered in the call, else when its promise
 * settles (a call that joined a fetch spends when the fetch's answer is handled, just before). A worker
 * samples Redis `TIME` every 50 ms on a connection of its own, each sample bracketed by local times t0
 * and t1, so Redis's clock minus the local one lies in [R − t1, R − t0]; local times are converted with
 * the upper bound (the least R − t0 of the samples within a second), so they are never early. An
 * admission Redis decided (the leader of a fetch, `reason: 'rules'`) happened when Redis counted it,
 * which a busy worker may learn hundreds of ms later: it is timed by Redis itself. slidingLog: each
 * admitted fetch logs one entry, scored by the ms it was counted at, so the entries are those
 * admissions' times (their number is checked against the workers' count). fixedWindow: its answer's
 * `resetMs` (the window's end less the ms Redis counted at) names the window.
 *
 * slidingLog: the coordinator snapshots the key's sorted set (`MULTI TIME ZRANGE … WITHSCORES`) every
 * windowMs / 4, so every entry is seen after prefetch gave back what it would (members
 * `<seq>:<runningSum>:<cost>`, scored by Redis ms; a member gone before its window ended was given back
 * whole). The sweep takes every span [a, a + windowMs) starting at an admission: the measured overshoot
 * is the admissions in it minus the limit; its bound is the units Redis counted in the `ms` before it
 * (scores in (a − ms − 1, a], a ms of slack for scores being whole ms). fixedWindow: admissions per window
 * of Redis time, the bound 0.
 *
 * Reports the admitted total beside what Redis counted (units net of give-backs, slidingLog) and the
 * most the rule admits over the run's span with exact decisions (limit × windows the span touches), the
 * script calls Redis ran per admission (INFO commandstats), and the share spent from prefetched units.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { params, report } from '../lib/child.mjs'
import { connectIoredis } from '../lib/redis-server.mjs'
import { sluice } from '../lib/sluice.mjs'

const p = params()
const PREFIX = 'overshoot'
const KEY = 'hot'
const SAMPLE_EVERY_MS = 50

const connect = () => connectIoredis(p.port)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const redisMs = ([sec, usec]) => Number(sec) * 1000 + Number(usec) / 1000

if (p.role === 'worker') await worker()
else await coordinator()

async function worker() {
  const { createLimiter, fixedWindow, slidingLog } = await sluice('core')
  const { RedisStore } = await sluice('redis')
  const client = await connect()
  const clock = await connect()
  const rule = (p.algorithm === 'fixedWindow' ? fixedWindow : slidingLog)({
    limit: p.limit,
    windowMs: p.windowMs,
  })
  const store = new RedisStore({
    client,
    prefix: PREFIX,
    timeoutMs: 2000,
    prefetch: { units: p.units, ms: p.ms },
  })
  // Whether the store answered the latest call in it (units spent locally): then the admission happened
  // before `consume` returned.
  let synchronous = false
  const apply = store.apply.bind(store)
  store.apply = (...args) => {
    const answer = apply(...args)
    synchronous = typeof answer?.then !== 'function'
    return answer
  }
  const limiter = createLimiter({ rules: [rule], store, onStoreError: 'throw' })

  /** [t0, Redis ms, t1]: Redis's clock read between local times t0 and t1. */
  const samples = []
  const sample = async () => {
    const t0 = performance.now()
    const r = await clock.time()
    samples.push([t0, redisMs(r), performance.now()])
  }
  for (let i = 0; i < 20; i++) await sample()

  process.stdout.write('READY\n')
  await new Promise((resolve) => process.stdin.once('data', resolve))

  /** Units spent here: [local ms, 1 when spent in the call]. Admissions Redis decided: [called, settled, resetMs]. */
  const spent = []
  const decided = []
  const reasons = {}
  let calls = 0
  let sampling = false
  const sampler = setInterval(() => {
    if (sampling) return
    sampling = true
    sample().finally(() => {
      sampling = false
    })
  }, SAMPLE_EVERY_MS)
  const end = performance.now() + p.seconds * 1000
  async function caller() {
    while (performance.now() < end) {
      calls++
      const called = performance.now()
      const promise = limiter.consume(KEY)
      const returned = performance.now()
      const local = synchronous
      const d = await promise
      if (d.allowed) {
        if (d.reason === 'prefetch') spent.push(local ? returned : performance.now())
        else decided.push([called, performance.now(), d.resetMs])
        reasons[d.reason] = (reasons[d.reason] ?? 0) + 1
      } else await sleep(Math.max(1, d.retryAfterMs))
    }
  }
  await Promise.all(Array.from({ length: p.inFlight }, caller))
  clearInterval(sampler)
  // Unspent units go back before the process ends.
  store.close()
  await sleep(100)
  for (let i = 0; i < 20; i++) await sample()

  // Local ms to Redis ms: the offset lies in [R − t1, R − t0] for every sample; the samples within a
  // second of a time bound it there (the clocks may drift apart slowly).
  let widest = 0
  const offset = (t) => {
    let upper = Number.POSITIVE_INFINITY
    let lower = Number.NEGATIVE_INFINITY
    for (const [t0, r, t1] of samples) {
      if (Math.abs(t0 - t) > 1000) continue
      upper = Math.min(upper, r - t0)
      lower = Math.max(lower, r - t1)
    }
    widest = Math.max(widest, upper - lower)
    return [lower, upper]
  }
  const late = (t) => Math.round((t + offset(t)[1]) * 1000) / 1000
  const times = spent.map(late)
  // fixedWindow: the window each admission Redis decided was counted in, from its resetMs (Redis's window
  // end less the whole ms it counted at, which lies between the call and its answer, so the window end lies
  // in (lo − 1, hi]): the one window end there. Placed by its answer's time should there be none or two.
  const windows = []
  let unplaced = 0
  if (p.algorithm === 'fixedWindow') {
    for (const [called, settled, resetMs] of decided) {
      const lo = called + offset(called)[0] + resetMs - 1
      const hi = settled + offset(settled)[1] + resetMs
      const end = Math.floor(hi / p.windowMs)
      if (end * p.windowMs > lo && (end - 1) * p.windowMs <= lo) windows.push(end - 1)
      else {
        unplaced++
        windows.push(Math.floor(late(settled) / p.windowMs))
      }
    }
  }
  client.disconnect()
  clock.disconnect()
  report({ times, windows, unplaced, decided: decided.length, reasons, calls, clockUncertaintyMs: widest })
}

function startWorker(index) {
  const file = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [file, JSON.stringify({ ...p, role: 'worker', index })], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  let ready
  const isReady = new Promise((resolve) => {
    ready = resolve
  })
  child.stdout.on('data', (c) => {
    out += c
    if (out.includes('READY\n')) ready()
  })
  child.stderr.on('data', (c) => {
    err = (err + c).slice(-4000)
  })
  const done = new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '))
      if (code !== 0 || line === undefined) reject(new Error(`worker ${index} failed (${code}):\n${err}`))
      else resolve(JSON.parse(line.slice(7)))
    })
  })
  done.catch(() => ready())
  return { child, isReady, done }
}

/** Script calls Redis has run so far (EVALSHA and EVAL). */
async function scriptCalls(admin) {
  const info = await admin.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/cmdstat_(evalsha|eval):calls=(\d+)/g)) n += Number(m[2])
  return n
}

async function coordinator() {
  const admin = await connect()
  for (const k of await admin.keys(`${PREFIX}:*`)) await admin.del(k)
  const workers = Array.from({ length: p.processes }, (_, i) => startWorker(i))
  await Promise.all(workers.map((w) => w.isReady))
  const scriptsBefore = await scriptCalls(admin)

  // slidingLog: every entry of the log, by score and seq, with its latest cost (0 once given back whole).
  const entries = new Map()
  let key
  let snapshots = 0
  let snapshotting = false
  const snapshot = async () => {
    key ??= (await admin.keys(`${PREFIX}:*`))[0]
    if (key === undefined) return
    const [[, time], [, flat]] = await admin.multi().time().zrange(key, 0, -1, 'WITHSCORES').exec()
    const now = Math.floor(redisMs(time))
    const seen = new Set()
    for (let i = 0; i < flat.length; i += 2) {
      const [seq, , cost] = flat[i].split(':')
      const id = `${flat[i + 1]}:${seq}`
      seen.add(id)
      const e = entries.get(id)
      if (e === undefined) entries.set(id, { score: Number(flat[i + 1]), cost: Number(cost) })
      else e.cost = Number(cost)
    }
    // A live entry gone from the set was given back whole (expired ones leave after the window).
    for (const [id, e] of entries) if (e.score > now - p.windowMs && !seen.has(id)) e.cost = 0
    snapshots++
  }
  const timer =
    p.algorithm === 'slidingLog'
      ? setInterval(() => {
          if (snapshotting) return
          snapshotting = true
          snapshot().finally(() => {
            snapshotting = false
          })
        }, p.windowMs / 4)
      : undefined
  for (const w of workers) w.child.stdin.end('GO\n')
  const results = await Promise.all(workers.map((w) => w.done))
  clearInterval(timer)
  while (snapshotting) await sleep(5)
  if (p.algorithm === 'slidingLog') await snapshot()
  const scripts = (await scriptCalls(admin)) - scriptsBefore

  admin.disconnect()

  const reasons = {}
  for (const r of results) for (const [k, v] of Object.entries(r.reasons)) reasons[k] = (reasons[k] ?? 0) + v
  const sum = (field) => results.reduce((n, r) => n + r[field], 0)
  const decided = sum('decided')
  const local = results.flatMap((r) => r.times)
  const admitted = local.length + decided
  const W = p.windowMs
  const common = {
    admitted,
    calls: sum('calls'),
    localShare: local.length / admitted,
    scriptsPerAdmitted: scripts / admitted,
    clockUncertaintyMs: Math.max(...results.map((r) => r.clockUncertaintyMs)),
  }

  if (p.algorithm === 'fixedWindow') {
    const perWindow = new Map()
    const add = (w) => perWindow.set(w, (perWindow.get(w) ?? 0) + 1)
    for (const t of local) add(Math.floor(t / W))
    for (const r of results) for (const w of r.windows) add(w)
    const most = Math.max(...perWindow.values())
    const ids = [...perWindow.keys()]
    const windows = Math.max(...ids) - Math.min(...ids) + 1
    report({
      ...common,
      allowed: p.limit * windows,
      overshoot: most - p.limit,
      bound: 0,
      worstOverBound: most - p.limit,
      windows,
      windowsOverLimit: [...perWindow.values()].filter((n) => n > p.limit).length,
      unplaced: sum('unplaced'),
    })
    return
  }

  // slidingLog: the units Redis counted, by score, net of give-backs; prefix sums for the bound.
  const counted = [...entries.values()].filter((e) => e.cost > 0).sort((a, b) => a.score - b.score)
  const scores = counted.map((e) => e.score)
  const sums = [0]
  for (const e of counted) sums.push(sums[sums.length - 1] + e.cost)
  /** Units with scores <= x. */
  const upTo = (x) => {
    let lo = 0
    let hi = scores.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (scores[mid] <= x) lo = mid + 1
      else hi = mid
    }
    return sums[lo]
  }
  // Each admitted fetch logged one entry, its leader's unit counted at the entry's score: the admissions
  // Redis decided, at Redis's own ms. With the units spent here, every admission.
  const times = [...local, ...[...entries.values()].map((e) => e.score)].sort((a, b) => a - b)
  const spans = times.length
  const first = times[0]
  const last = times[spans - 1]
  let overshoot = Number.NEGATIVE_INFINITY
  let bound = 0
  let worstOverBound = Number.NEGATIVE_INFINITY
  let spansOverLimit = 0
  let spansOverBound = 0
  let j = 0
  for (let i = 0; i < spans; i++) {
    const a = times[i]
    while (j < spans && times[j] < a + W) j++
    const over = j - i - p.limit
    const b = upTo(a) - upTo(a - p.ms - 1)
    if (over > 0) spansOverLimit++
    if (over > b) spansOverBound++
    if (over > overshoot || (over === overshoot && b < bound)) {
      overshoot = over
      bound = b
    }
    worstOverBound = Math.max(worstOverBound, over - b)
  }
  report({
    ...common,
    countedInRedis: sums[sums.length - 1],
    allowed: p.limit * (Math.floor((last - first) / W) + 1),
    overshoot,
    bound,
    worstOverBound,
    spans,
    spansOverLimit,
    // Entries seen against admissions Redis decided: equal when every admitted fetch's entry was seen.
    entriesSeen: entries.size,
    decided,
    spansOverBound,
    snapshots,
  })
}
