/**
 * @module A fixed number of Redis decisions of one subject, for redis-client-instructions.mjs to count the
 * client's side under callgrind. params: { subject, port, keys, warmup, calls, batch }. The subject is
 * cases/redis.mjs's `sluice:<algorithm>` (RedisStore on ioredis, `deniedCache: false`; `concurrency`
 * releases each lease un-awaited). Every key is touched once, `warmup` calls run, then `calls` more,
 * `batch` in flight at a time (`Promise.all`). Run with `--expose-gc`.
 */
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { collected } from '../lib/collect.mjs'
import { sluice } from '../lib/sluice.mjs'
import { consumeAndRelease, ruleFor } from '../lib/subjects.mjs'

const require = createRequire(import.meta.url)
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()

/** Says `word` on stdout, then waits for a line on stdin. */
async function handshake(word) {
  process.stdout.write(`${word}\n`)
  await lines.next()
}

const p = JSON.parse(process.argv[2])
const { createLimiter } = await sluice('core')
const { RedisStore } = await sluice('redis')
const { Redis } = require('ioredis')
const client = new Redis({
  host: '127.0.0.1',
  port: p.port,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
})
await new Promise((resolve, reject) => {
  client.once('ready', resolve)
  client.once('error', reject)
})
const algorithm = p.subject.split(':')[1]
// Timeouts far above what callgrind's slowdown makes a round trip take.
const store = new RedisStore({ client, timeoutMs: 60_000, deniedCache: false })
const limiter = createLimiter({ rules: [ruleFor(algorithm)], store, onStoreError: 'throw' })
const consume = algorithm === 'concurrency' ? consumeAndRelease(limiter) : (key) => limiter.consume(key)
const keys = Array.from({ length: p.keys }, (_, i) => `client:${i}`)
const inFlight = new Array(p.batch)
let k = 0

async function run(n) {
  for (let done = 0; done < n; done += p.batch) {
    for (let i = 0; i < p.batch; i++) {
      inFlight[i] = consume(keys[k])
      if (++k === keys.length) k = 0
    }
    await Promise.all(inFlight)
  }
}

for (let i = 0; i < keys.length; i += p.batch) await Promise.all(keys.slice(i, i + p.batch).map(consume))
await run(p.warmup)
await collected()
await handshake('READY')
await run(p.calls)
// The releases of the last calls go at the end of this turn: counted with them.
await new Promise((resolve) => setImmediate(resolve))
await handshake('DONE')
const admitted = (await consume(keys[0])).allowed
await store.close()
client.disconnect()
lines.return?.()
process.stdin.destroy()
if (!admitted) throw new Error(`${p.subject} denied a call: the bench limits are too low`)
