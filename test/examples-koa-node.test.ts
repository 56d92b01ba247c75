/**
 * examples/koa and examples/node as their users run them (`node examples/<name>/server.mjs`): a real server
 * process on a free port, real HTTP requests, and the exact limits each promises. Both examples keep the
 * same limits, so one set of cases runs against each. Each test starts a server of its own.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { run, startServer, stopExamples } from './examples-harness.ts'
import { expectPaymentTable, expectReportQueue, expectRouteTemplate } from './examples-shared-cases.ts'

afterAll(stopExamples)

describe.each(['koa', 'node'])('examples/%s', (name) => {
  const SERVER = `examples/${name}/server.mjs`

  it('limits POST /pay per bizType + channel from its table; -1 and missing pairs are not limited', async () => {
    const server = await startServer(SERVER)
    await expectPaymentTable(server.url, '"100-per-60s";q=100;w=60, "3-per-1s";q=3;w=1')
  })

  it('counts GET /users/:id by its route template: five a minute whatever the ids', async () => {
    await expectRouteTemplate((await startServer(SERVER)).url)
  })

  it('queues GET /report at 2 a second, and refuses a request that would wait past 2 s', async () => {
    await expectReportQueue((await startServer(SERVER)).url)
  })

  it('says so and exits 1 when its port is taken', async () => {
    const server = await startServer(SERVER)
    const second = run(SERVER, [], { PORT: new URL(server.url).port })
    expect(await second.exited).toBe(1)
    expect(second.output()).toMatch(/^Cannot listen on port \d+: EADDRINUSE\. Set PORT to a free port\.\n$/)
  })
})
