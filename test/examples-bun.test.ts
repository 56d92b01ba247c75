/**
 * examples/bun as its users run it (`bun examples/bun/server.ts`, Bun from the repository's `bun`
 * devDependency): a real Bun.serve process on a free port, real HTTP requests, the exact limits it promises.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort, ROOT, request } from './examples-harness.ts'

const children: ChildProcess[] = []
afterAll(() => {
  for (const child of children) child.kill('SIGKILL')
})

async function startBun(): Promise<string> {
  const port = await freePort()
  const child = spawn(join(ROOT, 'node_modules/.bin/bun'), ['examples/bun/server.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let output = ''
  await new Promise<void>((resolve, reject) => {
    const seen = (chunk: Buffer) => {
      output += chunk
      if (output.includes(`on http://localhost:${port}`)) resolve()
    }
    child.stdout.on('data', seen)
    child.stderr.on('data', seen)
    child.once('exit', (code) => reject(new Error(`bun exited (${code}) before listening:\n${output}`)))
  })
  return `http://127.0.0.1:${port}`
}

describe('examples/bun', () => {
  it('limits /pay to 3 per 10 s with fetchLimit and the Hono app to 5 per 10 s, on Bun.serve', async () => {
    const url = await startBun()
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
})
