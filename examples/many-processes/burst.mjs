/**
 * Fires a burst of requests, all at once, at the many-processes server, under one fresh API key, and
 * shows how the workers answered: per worker and in total, admitted and denied. Together they admit
 * exactly the limit (read from the `RateLimit-Policy` header), however the requests fell.
 *
 * Run: node examples/many-processes/burst.mjs [url] [requests]
 * (default http://localhost:3003 and 200; add --json for one line of JSON instead of the table).
 * The exit code is 0 when the workers admitted exactly the limit, 1 otherwise.
 */
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'

/**
 * Sends `requests` GET requests to `url` at once, each on a connection of its own so that node:cluster
 * spreads them over the workers. Resolves with what came back.
 */
export async function burst(url, requests) {
  const apiKey = `burst-${randomUUID()}`
  const replies = await Promise.all(
    Array.from({ length: requests }, async () => {
      const res = await fetch(url, { headers: { 'x-api-key': apiKey, connection: 'close' } })
      await res.arrayBuffer()
      return {
        status: res.status,
        worker: res.headers.get('x-worker'),
        policy: res.headers.get('ratelimit-policy'),
      }
    }),
  )
  const workers = {}
  for (const { status, worker } of replies) {
    const name = worker ?? '?'
    workers[name] ??= { admitted: 0, denied: 0, failed: 0 }
    const w = workers[name]
    if (status === 200) w.admitted++
    else if (status === 429) w.denied++
    else w.failed++
  }
  const total = { admitted: 0, denied: 0, failed: 0 }
  for (const w of Object.values(workers)) {
    total.admitted += w.admitted
    total.denied += w.denied
    total.failed += w.failed
  }
  const policy = replies.find((r) => r.policy !== null)?.policy
  const limit = policy ? Number(/;q=(\d+)/.exec(policy)?.[1]) : undefined
  return { apiKey, requests, limit, workers, total, exact: total.admitted === limit }
}

/** The burst's result as a table, one row per worker. */
export function table({ apiKey, requests, limit, workers, total, exact }) {
  const row = (name, w) =>
    `${name.padEnd(8)} ${String(w.admitted).padStart(8)} ${String(w.denied).padStart(8)}` +
    (w.failed > 0 ? ` ${String(w.failed).padStart(8)} failed` : '')
  const ids = Object.keys(workers).sort((a, b) => Number(a) - Number(b))
  return [
    `${requests} requests at once under x-api-key ${apiKey}`,
    `${'worker'.padEnd(8)} ${'admitted'.padStart(8)} ${'denied'.padStart(8)}`,
    ...ids.map((id) => row(id, workers[id])),
    row('total', total),
    exact
      ? `${ids.length} processes admitted exactly the limit, ${limit}, between them.`
      : `Expected exactly ${limit} admitted in all, got ${total.admitted}.`,
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2).filter((a) => a !== '--json')
  const result = await burst(args[0] ?? 'http://localhost:3003', Number(args[1] ?? 200))
  console.log(process.argv.includes('--json') ? JSON.stringify(result) : table(result))
  process.exitCode = result.exact ? 0 : 1
}
