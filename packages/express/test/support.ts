/**
 * @module What every Express test shares: both Express majors, a manual clock, a listening server,
 * and handlers that record what reached them.
 */
import type { AddressInfo } from 'node:net'
import { MemoryStore } from '@sluice/core'
import express5, {
  type ErrorRequestHandler,
  type Express,
  type Request,
  type RequestHandler,
  type Response,
} from 'express'
import express4 from 'express4'

/** The suites run once per Express major. */
export const flavours = [
  { name: 'express 5', express: express5 },
  { name: 'express 4', express: express4 },
] as const

/** A memory store on a clock the test moves. Starts at the beginning of a minute, so windows align. */
export function clocked(start = 1_000_020_000) {
  const clock = { now: start }
  return { clock, store: new MemoryStore({ clock: () => clock.now, sweepIntervalMs: 0 }) }
}

/** A final handler answering 200 with what the limit decided; counts its calls. */
export function handler(): { calls: Request[]; handle: RequestHandler } {
  const calls: Request[] = []
  const handle = (req: Request, res: Response) => {
    calls.push(req)
    res.json({ ok: true, remaining: req.rateLimit?.remaining ?? null })
  }
  return { calls, handle }
}

/** An error handler answering 500 with the error's code, keeping every error it got. */
export function errors(): { seen: unknown[]; handle: ErrorRequestHandler } {
  const seen: unknown[] = []
  const handle: ErrorRequestHandler = (error, _req, res, _next) => {
    seen.push(error)
    res.status(500).json({ error: (error as { code?: string }).code ?? String(error) })
  }
  return { seen, handle }
}

/** Listens on a free port of 127.0.0.1; `close` also drops idle keep-alive connections. */
export async function listen(app: Express): Promise<{ url: string; close: () => Promise<void> }> {
  const server = app.listen(0, '127.0.0.1')
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      }),
  }
}

/** Collects unhandled rejections while `run` goes on, so a test can assert there were none. */
export async function unhandledDuring(run: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = []
  const record = (reason: unknown) => seen.push(reason)
  process.on('unhandledRejection', record)
  try {
    await run()
    // A rejection is reported after the microtask queue drains; give it a turn of the loop.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('unhandledRejection', record)
  }
  return seen
}
