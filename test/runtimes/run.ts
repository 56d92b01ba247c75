/**
 * @module Runs the shared Fetch and Hono suites under Bun or Deno (whichever runs this file):
 * `bun test/runtimes/run.ts` or `deno run -A test/runtimes/run.ts`, with `SLUICE_TEST_REDIS_PORT` naming
 * a redis-server started for the run (test/runtimes.test.ts starts one and runs both). Prints one line
 * per case and store, `ok` or `not ok` with the failure, and exits 1 when any case failed; a missing
 * port is a failure, never a skip.
 */
import process from 'node:process'
import type { Runtime } from './runtime.ts'
import { type StoreKind, storeSource } from './stores.ts'
import { clearOfMinuteEdge, fetchCases, honoCases } from './suite.ts'

const runtime: Runtime =
  'Bun' in globalThis ? (await import('./bun.ts')).bun : (await import('./deno.ts')).deno
const port = Number(process.env.SLUICE_TEST_REDIS_PORT)
const kinds: StoreKind[] =
  runtime.name === 'deno' ? ['memory', 'ioredis', 'node-redis'] : ['memory', 'ioredis']
const run = Date.now().toString(36)

let failed = 0
for (const kind of kinds) {
  let source: Awaited<ReturnType<typeof storeSource>>
  try {
    source = await storeSource(kind, port)
  } catch (error) {
    failed++
    console.log(`not ok ${runtime.name} ${kind}: ${String(error)}`)
    continue
  }
  let n = 0
  for (const test of [...fetchCases, ...honoCases]) {
    const store = source.store()
    try {
      await clearOfMinuteEdge()
      await test.run(runtime, store, `${runtime.name}-${kind}-${run}-${n++}`)
      console.log(`ok ${runtime.name} ${kind}: ${test.name}`)
    } catch (error) {
      failed++
      console.log(
        `not ok ${runtime.name} ${kind}: ${test.name}\n  ${String((error as Error)?.stack ?? error).replaceAll('\n', '\n  ')}`,
      )
    }
  }
  await source.close()
}
process.exit(failed === 0 ? 0 : 1)
