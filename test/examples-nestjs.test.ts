/**
 * examples/nestjs as its users run it: compiled with tsc (`pnpm --filter @sluice/example-nestjs build`),
 * then `node examples/nestjs/dist/main.js`, a real Nest app on a free port, real HTTP requests, and the
 * exact limits it promises: the module's limit, a route's own table, a route template, a queue, a skip.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ROOT, request, run, startServer, stopExamples } from './examples-harness.ts'
import { expectPaymentTable, expectReportQueue, expectRouteTemplate } from './examples-shared-cases.ts'

const SERVER = 'examples/nestjs/dist/main.js'

beforeAll(async () => {
  // The example's own build, as its users run it: tsc with the example's tsconfig.
  await promisify(execFile)(process.execPath, [
    join(ROOT, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(ROOT, 'examples/nestjs'),
  ])
})
afterAll(stopExamples)

describe('examples/nestjs', () => {
  it("limits GET / by the module's options: 100 a minute per IP, then 429 with problem details", async () => {
    const server = await startServer(SERVER)
    const replies = []
    for (let i = 0; i < 101; i++) replies.push(await request(`${server.url}/`))
    expect(replies.slice(0, 100).every((r) => r.status === 200)).toBe(true)
    expect(replies[0]!.body).toEqual({ hello: 'world', remaining: 99 })
    expect(replies[0]!.headers.get('ratelimit-policy')).toBe('"100-per-60s";q=100;w=60')
    const denied = replies[100]!
    expect(denied.status).toBe(429)
    expect(denied.headers.get('content-type')).toMatch(/^application\/problem\+json/)
    expect(denied.headers.get('retry-after')).not.toBeNull()
    expect(denied.body.detail).toMatch(/^Rate limit 100-per-60s exceeded; retry in \d+ s\.$/)
  })

  it('limits POST /pay per bizType + channel from its table; -1 and missing pairs are not limited', async () => {
    await expectPaymentTable((await startServer(SERVER)).url, '"3-per-1s";q=3;w=1')
  })

  it('counts GET /users/:id by its route template: five a minute whatever the ids', async () => {
    await expectRouteTemplate((await startServer(SERVER)).url)
  })

  it('queues GET /report at 2 a second, and refuses the request that would wait past 2 s', async () => {
    await expectReportQueue((await startServer(SERVER)).url)
  })

  it('never limits GET /health (@SkipRateLimit): no count, no rate-limit headers', async () => {
    const server = await startServer(SERVER)
    for (let i = 0; i < 110; i++) {
      const r = await request(`${server.url}/health`)
      expect(r.status).toBe(200)
      expect(r.body).toEqual({ ok: true })
      expect(r.headers.get('ratelimit')).toBeNull()
      expect(r.headers.get('ratelimit-policy')).toBeNull()
    }
  })

  it('says so and exits 1 when its port is taken', async () => {
    const server = await startServer(SERVER)
    const second = run(SERVER, [], { PORT: new URL(server.url).port })
    expect(await second.exited).toBe(1)
    // Nest logs the listen error itself first; the example's own line ends the output.
    expect(second.output()).toMatch(/\nCannot listen on port \d+: EADDRINUSE\. Set PORT to a free port\.\n$/)
  })
})
