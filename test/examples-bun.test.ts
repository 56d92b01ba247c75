/**
 * examples/bun as its users run it (`bun examples/bun/server.ts`, Bun from the repository's `bun`
 * devDependency): a real Bun.serve process on a free port, real HTTP requests, the exact limits it promises.
 */
import { connect } from 'node:net'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort, type Running, request, start, stopExamples, waitFor } from './examples-harness.ts'

afterAll(stopExamples)

/** Starts the example through pnpm's shell shim for the `bun` binary, as `pnpm exec bun` would. */
async function startBun(): Promise<Running & { url: string; port: number }> {
  const port = await freePort()
  const running = start(join('node_modules', '.bin', 'bun'), ['examples/bun/server.ts'], {
    PORT: String(port),
  })
  await waitFor(running, new RegExp(`on http://localhost:${port}\\b`))
  return Object.assign(running, { url: `http://127.0.0.1:${port}`, port })
}

/** Whether something accepts a TCP connection on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

describe('examples/bun', () => {
  it('limits /pay to 3 per 10 s with fetchLimit and the Hono app to 5 per 10 s, on Bun.serve', async () => {
    const { url } = await startBun()
    const pays: string[] = []
    for (let i = 0; i < 4; i++) {
      const r = await request(`${url}/pay`, { method: 'POST' })
      pays.push(`${r.status} ${r.headers.get('ratelimit-policy')}`)
    }
    expect(pays).toEqual([
      '200 "3-per-10s";q=3;w=10',
      '200 "3-per-10s";q=3;w=10',
      '200 "3-per-10s";q=3;w=10',
      '429 "3-per-10s";q=3;w=10',
    ])
    const hello: Array<number | string> = []
    for (let i = 0; i < 6; i++) {
      const r = await request(`${url}/hono/hello`)
      hello.push(r.status === 200 ? (r.body.remaining as number) : r.status)
    }
    expect(hello).toEqual([4, 3, 2, 1, 0, 429])
    expect((await request(`${url}/elsewhere`)).status).toBe(404)
  })

  it("stopping it ends the bun server behind pnpm's shell shim (the shim alone was killed, and bun kept listening)", async () => {
    const server = await startBun()
    expect(await listening(server.port)).toBe(true)
    await server.stop()
    expect(await listening(server.port)).toBe(false)
  })
})
