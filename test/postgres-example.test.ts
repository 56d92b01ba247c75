/**
 * examples/postgres runs as `DATABASE_URL=… node examples/postgres/main.mjs` against a server of the test's
 * own and prints the decisions its comments promise: 5 API calls a minute, 2 exports at once (a release
 * frees one), and a login blocked after 3 failures. It runs the built packages (`pnpm build` first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { run, stopExamples } from './examples-harness.ts'
import { type PostgresServer, startPostgres, stopAll } from './harness/postgres.ts'

let server: PostgresServer

beforeAll(async () => {
  server = await startPostgres()
})

afterAll(async () => {
  await stopExamples()
  await stopAll()
})

const EXPECTED = `api call 1             admitted  remaining=4
api call 2             admitted  remaining=3
api call 3             admitted  remaining=2
api call 4             admitted  remaining=1
api call 5             admitted  remaining=0
api call 6             denied    remaining=0  reason=rules  retry in 1 min
export 1 starts        admitted  remaining=1
export 2 starts        admitted  remaining=0
export 3 starts        denied    remaining=0  reason=rules  retry in 1 min
export 1 done, 3 again admitted  remaining=0
failed login 1         admitted  remaining=2
failed login 2         admitted  remaining=1
failed login 3         admitted  remaining=0
failed login 4         denied    remaining=0  reason=rules  retry in 15 min
failed login 5         denied    remaining=0  reason=blocked  retry in 15 min
`

describe('examples/postgres', () => {
  it('prints the decisions of its run against the test server, exactly', async () => {
    const main = run('examples/postgres/main.mjs', [], { DATABASE_URL: server.url })
    expect(await main.exited).toBe(0)
    expect(main.output()).toBe(EXPECTED)
  })

  it('refuses to run without DATABASE_URL', async () => {
    const main = run('examples/postgres/main.mjs', [], { DATABASE_URL: undefined })
    expect(await main.exited).toBe(1)
  })
})
